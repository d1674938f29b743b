"""Session 8's probes of the first 24 h accounting at 8,192 GPUs (docs/benchmarks.md, "The first 24 h accounting
at 8,192 GPUs, one mark at a time"). Each starts its own Prometheus on a kept TSDB (bench/perf/cluster_scale.py
--keep) and stops it:

    python accounting_probe.py range [TSDB]    # one share of dcgm-exporter's nodes over 24 h at 3 h: one query_range
                                               # against 9 instant queries (Prometheus' CPU)
    python accounting_probe.py equal [TSDB]    # every share read both ways, grouped by GPU and job: equal?
    python accounting_probe.py first N [TSDB]  # N first accountings, each by a new reader (wall, CPU, totals)

TSDB: the data folder, by default /work/tmp-scale24/gpus8192-24h-30s/data (this VM's, not in the repository).
"""
import math
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "perf"))
import cluster_scale as CS  # noqa: E402
from gputop.fleet import accounting as A  # noqa: E402
from gputop.fleet import reader as R  # noqa: E402
from gputop.fleet import series as S  # noqa: E402
from gputop.telemetry.prometheus import PrometheusClient  # noqa: E402

END = 1795807740  # the kept TSDB's last sample (its fleet.json); "now" 5 min before it
NOW, STEP = END - 300, 10800.0
what = sys.argv[1]
n = int(sys.argv[2]) if what == "first" else 0
tsdb = sys.argv[3 if what == "first" else 2] if len(sys.argv) > (3 if what == "first" else 2) else \
    "/work/tmp-scale24/gpus8192-24h-30s/data"
proc, url = CS.start_prometheus(Path(tsdb), Path(tempfile.mkdtemp()))
try:
    client = PrometheusClient(url, timeout=300)
    start = NOW - STEP * math.floor(86400 / STEP)

    def cpu(fn):
        p0, w = CS.proc_cpu_s(proc.pid), time.perf_counter()
        r = fn()
        return time.perf_counter() - w, CS.proc_cpu_s(proc.pid) - p0, r
    if what == "range":
        q = S.by_gpu(A.not_exported(client, start, NOW)[0], S.META_LABELS)
        for _ in range(2):
            w, c, r = cpu(lambda: client.query_range(q, start, NOW, STEP))
            print(f"query_range: wall {w:.2f} s, Prometheus {c:.2f} s, {len(r)} series, "
                  f"{sum(len(x['values']) for x in r)} points")
        w, c, r = cpu(lambda: A._at_marks(client, q, start, NOW, STEP))
        print(f"9 instant queries: wall {w:.2f} s, Prometheus {c:.2f} s")
    elif what == "equal":
        same = True
        for sel in A.not_exported(client, start, NOW):
            q = S.by_gpu(sel, S.META_LABELS)
            a = S.groups(client.query_range(q, start, NOW, STEP), with_job=True)
            b = A._at_marks(client, q, start, NOW, STEP)
            eq = {k: (g["series"], g["jobs"]) for k, g in a.items()} == \
                {k: (g["series"], g["jobs"]) for k, g in b.items()}
            print(len(a), len(b), "equal" if eq else "DIFFERENT", flush=True)
            same &= eq
        print("all equal" if same else "not equal")
    else:
        for i in range(n):
            rd = R.ClusterReader(client)
            c0, p0, w = CS.self_cpu_s(), CS.proc_cpu_s(proc.pid), time.perf_counter()
            jobs, step = rd.accounting(86400, NOW + i)
            print(f"first accounting: wall {time.perf_counter() - w:.2f} s, this process {CS.self_cpu_s() - c0:.2f} s, "
                  f"Prometheus {CS.proc_cpu_s(proc.pid) - p0:.2f} s; {len(jobs)} jobs, "
                  f"{sum(j.gpu_hours for j in jobs):.1f} GPU-hours, {sum(j.win_back_gpu_hours for j in jobs):.1f} "
                  f"won back; notes {rd.accounting_notes}", flush=True)
finally:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
