"""Session 9's probes of a refresh at 8,192 GPUs (docs/benchmarks.md, "The collector held off, and fewer series
read, at 8,192 GPUs"). Each starts its own Prometheus on a kept TSDB (bench/perf/cluster_scale.py --keep) and
stops it:

    python refresh_probe.py ab BASE [N] [TSDB END]  # BASE's reader (a commit: its fleet/reader.py and series.py) and
                                                    # this checkout's, alternated on one Prometheus (old new new old
                                                    # ...), N refreshes each, each after a judging ahead at its time:
                                                    # wall, this process' CPU, Prometheus' CPU (and the judging's CPU)
    python refresh_probe.py queries [TSDB END]      # what each query of a refresh costs Prometheus, alone, 7 times

Both keep 300,000 small objects alive while they measure (a page's worth: the collector walks them). TSDB: the
data folder, by default /work/tmp-scale2/gpus8192-2h-30s/data (this VM's, not in the repository); END its last
sample (its fleet.json).
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]  # the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "perf"))
import cluster_scale as CS  # noqa: E402
from gputop.analysis.cluster_jobs import judge_jobs  # noqa: E402
from gputop.fleet import reader as R  # noqa: E402
from gputop.fleet import series as S  # noqa: E402
from gputop.telemetry.prometheus import PrometheusClient  # noqa: E402

TSDB, END = Path("/work/tmp-scale2/gpus8192-2h-30s/data"), 1795796460


def base_reader(commit: str):
    """``commit``'s reader module, on its own series module (both as that commit has them)."""
    def source(path):
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True, text=True,
                              check=True).stdout
    series = types.ModuleType("series_base")
    sys.modules["series_base"] = series
    exec(compile(source("gputop/fleet/series.py"), "series_base", "exec"), series.__dict__)
    reader = types.ModuleType("reader_base")
    sys.modules["reader_base"] = reader
    text = source("gputop/fleet/reader.py").replace("from gputop.fleet import series as S", "import series_base as S")
    exec(compile(text, "reader_base", "exec"), reader.__dict__)
    return reader


def ab(url, pid, base: str, n: int, end: int) -> None:
    client = PrometheusClient(url, timeout=300)
    readers = {"base": base_reader(base).ClusterReader(client), "this": R.ClusterReader(client)}
    now0 = end - 31 * (2 * n + 2)
    for reader in readers.values():
        judge_jobs(reader.snapshot(now0))
    kept = [{"a": [i, str(i)]} for i in range(300000)]  # noqa: F841 (a page's worth of live objects)
    got = {"base": [], "this": []}
    for i in range(2 * n):
        which = ["base", "this"][(i // 2 + i) % 2]
        reader, at = readers[which], now0 + 31 * (i + 1)
        c = time.process_time()
        reader.judge_ahead(at)
        ahead = time.process_time() - c
        p, t, c = CS.proc_cpu_s(pid), time.perf_counter(), time.process_time()
        judge_jobs(reader.snapshot(at))
        got[which].append((time.perf_counter() - t, time.process_time() - c, CS.proc_cpu_s(pid) - p, ahead))
        print(which, " ".join(f"{x:.3f}" for x in got[which][-1]), flush=True)
    for which, runs in got.items():
        med = [statistics.median(r[k] for r in runs) for k in range(4)]
        print(f"{which} ({base if which == 'base' else 'this checkout'}): median of {len(runs)}: wall {med[0]:.3f} s, "
              f"client CPU {med[1]:.3f} s, Prometheus CPU {med[2]:.3f} s; the judging ahead's client CPU {med[3]:.3f} s")


def queries(url, pid, end: int) -> None:
    now = end - 300
    def post(q):
        return urllib.request.urlopen(url + "/api/v1/query", data=urllib.parse.urlencode(
            {"query": q, "time": now}).encode()).read()
    verdicts = json.loads(post("gputop_verdict_confidence"))["data"]["result"]
    names, classes = R.TRAFFIC
    uuids = {r["metric"]["UUID"] for r in verdicts if r["metric"].get("class") in classes}
    asked = {f"row {n}": S.by_gpu(n, S.META_LABELS if n == R.META_NAME else S.ID_LABELS) for n in R.ROW_NAMES}
    asked.update({
        "the models and jobs apart (before)": f"group by ({', '.join(S.META_LABELS)}) ({R.META_NAME})",
        "verdicts": "gputop_verdict_confidence", "subclasses": 'gputop_bottleneck{subclass!=""}', "old": R.OLD,
        "SM clock, joined": S.by_gpu(f'{{__name__=~"{R.CLOCK[0]}"}} and {R.ON_GPU} gputop_verdict_confidence'
                                     f'{{class=~"{"|".join(R.CLOCK[1])}"}}'),
        "PCIe and NVLink, joined (before)": S.by_gpu(f'{{__name__=~"{names}"}} and {R.ON_GPU} '
                                                     f'gputop_verdict_confidence{{class=~"{"|".join(classes)}"}}'),
        f"PCIe and NVLink by {len(uuids)} UUIDs": S.by_gpu(f'{{__name__=~"{names}",UUID=~{S.values_regex(uuids)}}}'),
        "gone": R.GONE})
    kept = [{"a": [i, str(i)]} for i in range(300000)]  # noqa: F841
    for what, q in asked.items():
        cpus, walls = [], []
        for _ in range(7):
            p, t = CS.proc_cpu_s(pid), time.perf_counter()
            body = post(q)
            walls.append(time.perf_counter() - t)
            cpus.append(CS.proc_cpu_s(pid) - p)
        series = len(json.loads(body)["data"]["result"])
        print(f"{what:40s} Prometheus CPU median {statistics.median(cpus):.3f} s (7: {sum(cpus):.2f} s), wall "
              f"{statistics.median(walls):.3f} s, {len(body) / 1e6:.2f} MB, {series} series")


def main() -> None:
    args = sys.argv[1:]
    kind = args.pop(0)
    base = args.pop(0) if kind == "ab" else None
    n = int(args.pop(0)) if kind == "ab" and args and args[0].isdigit() else 6
    tsdb = Path(args[0]) if args else TSDB
    end = int(args[1]) if len(args) > 1 else END
    proc, url = CS.start_prometheus(tsdb, Path(tempfile.mkdtemp()))
    try:
        ab(url, proc.pid, base, n, end) if kind == "ab" else queries(url, proc.pid, end)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


if __name__ == "__main__":
    main()
