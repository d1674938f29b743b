"""session 8, docs/benchmarks.md: see README.md here. Its own Prometheus on the 24 h TSDB (argv: see README)."""
import sys, time, tempfile, json, math
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
    js = 10800.0; grid_end = now; start = grid_end - js * math.floor(86400 / js)
    sel = A.not_exported(client, start, grid_end)
    q = S.by_gpu(sel[0], S.META_LABELS)
    def cpu(fn):
        p0 = CS.proc_cpu_s(proc.pid); w = time.perf_counter(); r = fn(); return time.perf_counter() - w, CS.proc_cpu_s(proc.pid) - p0, r
    w, c, r = cpu(lambda: client.query_range(q, start, grid_end, js))
    print("range: wall %.2f prom cpu %.2f series %d points %d" % (w, c, len(r), sum(len(x["values"]) for x in r)))
    w, c, r = cpu(lambda: client.query_range(q, start, grid_end, js))
    print("range again: wall %.2f prom cpu %.2f" % (w, c))
    marks = [start + k * js for k in range(int((grid_end - start) // js) + 1)]
    tot_w = tot_c = 0; n = 0
    for m in marks:
        w, c, r = cpu(lambda: client.query(q, at=m)); tot_w += w; tot_c += c; n += len(r)
    print("instants (%d): wall %.2f prom cpu %.2f series-points %d" % (len(marks), tot_w, tot_c, n))
    q2 = S.by_gpu(sel[0], S.ID_LABELS + ("modelName", "hpc_job"))
    w, c, r = cpu(lambda: client.query_range(q2, start, grid_end, js))
    print("range fewer labels: wall %.2f prom cpu %.2f series %d" % (w, c, len(r)))
    w, c, r = cpu(lambda: client.query_range(sel[0], start, grid_end, js))
    print("range raw (no max by): wall %.2f prom cpu %.2f series %d" % (w, c, len(r)))
finally:
    import os, signal
    os.killpg(proc.pid, signal.SIGTERM); proc.wait()
