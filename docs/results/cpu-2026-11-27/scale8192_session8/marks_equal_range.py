"""session 8, docs/benchmarks.md: see README.md here. Its own Prometheus on the 24 h TSDB (argv: see README)."""
import sys, time, tempfile, math
from pathlib import Path
ROOT = Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "bench" / "perf"))
import cluster_scale as CS
from gputop.fleet import accounting as A, series as S
from gputop.telemetry.prometheus import PrometheusClient
work = Path(tempfile.mkdtemp())
proc, url = CS.start_prometheus(Path(sys.argv[2] if len(sys.argv) > 2 else "/work/tmp-scale24/gpus8192-24h-30s/data"), work)
try:
    end = 1795807740; now = end - 300
    client = PrometheusClient(url, timeout=300)
    js = 10800.0; start = now - js * math.floor(86400 / js)
    same = True
    for sel in A.not_exported(client, start, now):
        q = S.by_gpu(sel, S.META_LABELS)
        a = S.groups(client.query_range(q, start, now, js), with_job=True)
        b = A._at_marks(client, q, start, now, js)
        eq = {k: (g["series"], g["jobs"]) for k, g in a.items()} == {k: (g["series"], g["jobs"]) for k, g in b.items()}
        print(len(a), len(b), "equal" if eq else "DIFFERENT", flush=True)
        same &= eq
    print("all equal" if same else "not equal")
finally:
    import os, signal
    os.killpg(proc.pid, signal.SIGTERM); proc.wait()
