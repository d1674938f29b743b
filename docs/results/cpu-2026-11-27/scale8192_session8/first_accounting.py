"""session 8, docs/benchmarks.md: see README.md here. Its own Prometheus on the 24 h TSDB (argv: see README)."""
import sys, time, tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "bench" / "perf"))
import cluster_scale as CS
from gputop.fleet import reader as R
from gputop.telemetry.prometheus import PrometheusClient
work = Path(tempfile.mkdtemp())
proc, url = CS.start_prometheus(Path(sys.argv[2] if len(sys.argv) > 2 else "/work/tmp-scale24/gpus8192-24h-30s/data"), work)
try:
    end = 1795807740; now = end - 300
    client = PrometheusClient(url, timeout=300)
    for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
        rd = R.ClusterReader(client)
        c0 = CS.self_cpu_s(); p0 = CS.proc_cpu_s(proc.pid); w = time.perf_counter()
        jobs, step = rd.accounting(86400, now + i)
        print("first accounting wall %.2f client %.2f prom %.2f jobs %d hours %.1f back %.1f" % (time.perf_counter() - w, CS.self_cpu_s() - c0, CS.proc_cpu_s(proc.pid) - p0, len(jobs), sum(j.gpu_hours for j in jobs), sum(j.win_back_gpu_hours for j in jobs)), rd.accounting_notes, flush=True)
finally:
    import os, signal
    os.killpg(proc.pid, signal.SIGTERM); proc.wait()
