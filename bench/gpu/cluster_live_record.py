"""Two halves of the live cluster check (issue 38; bench/gpu/cluster_live_gpu.sh runs the first on the GPU machine,
the second runs here):

``record``: scrape each exporter's /metrics every ``--every`` seconds for ``--seconds`` (the GPU machine has no
Prometheus), each sample kept as Prometheus would store it: the exporter's labels plus the scrape's ``instance``
and ``job``, stamped with the scrape's time; JSON lines, gzipped. It also checks, on the GPU machine, what the
exporters must say by themselves: each GPU's series carry its job as its processes know it (``gputop_job{source}``),
one job id on both "nodes".

``judge``: those samples backfilled into a Prometheus started on them and the cluster read at moments of the run
(gputop/evaluate/cluster_live.py): every GPU, each job judged whole over the two "nodes", the accounting with what a
fix would win back.

    python bench/gpu/cluster_live_record.py record --target node-a=127.0.0.1:9501 --target node-b=127.0.0.1:9502 \
        --seconds 90 --out $OUT/scrapes.jsonl.gz
    python bench/gpu/cluster_live_record.py judge $OUT/scrapes.jsonl.gz [--at SECONDS ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def record(targets: list[str], seconds: float, every: float, out: Path) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    end = time.time() + seconds
    jobs_seen: dict[str, set] = {}
    with gzip.open(out, "wt") as f:
        while time.time() < end:
            t0 = time.time()
            for target in targets:
                name, address = target.split("=", 1)
                try:
                    with urllib.request.urlopen(f"http://{address}/metrics", timeout=2) as r:
                        text = r.read().decode()
                except OSError as exc:
                    print(f"{name}: {exc}", file=sys.stderr)
                    continue
                for fam in text_string_to_metric_families(text):
                    for s in fam.samples:
                        labels = dict(s.labels, instance=address, job="gputop")
                        f.write(json.dumps({"t": round(t0, 3), "name": s.name, "labels": labels,
                                            "value": s.value}) + "\n")
                        if s.name == "gputop_job":
                            jobs_seen.setdefault(name, set()).add((s.labels["hpc_job"], s.labels["source"]))
            time.sleep(max(0.0, every - (time.time() - t0)))
    print(json.dumps({node: sorted(jobs) for node, jobs in jobs_seen.items()}))
    named = [{j for j, source in jobs if source not in ("process-group",)} for jobs in jobs_seen.values()]
    both = set.intersection(*named) if len(named) >= 2 else set()
    print(f"jobs on every node: {sorted(both) or 'none'}")
    return 0 if both else 1


def judge(path: Path, at: list[float]) -> int:
    from gputop.evaluate.cluster_live import LOOKBACK, backfill, read
    from gputop.fleet.reader import ClusterReader
    from gputop.telemetry.prometheus import PrometheusClient

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
    from cluster_scale import start_prometheus  # noqa: E402
    from gputop.evaluate.synthetic_fleet import stop

    with gzip.open(path, "rt") as f:
        samples = [json.loads(line) for line in f]
    t0, t1 = min(float(s["t"]) for s in samples), max(float(s["t"]) for s in samples)
    work = Path(tempfile.mkdtemp(prefix="cluster_live-"))
    proc = None
    try:
        data = backfill(samples, work)
        proc, url = start_prometheus(data, work, (f"--query.lookback-delta={LOOKBACK}",))
        for moment in read(url, t0, at or [t1 - t0]):
            print(f"== t+{moment['offset']:.0f} s: {len(moment['rows'])} GPUs"
                  + (f"; not read: {moment['notes']}" if moment["notes"] else ""))
            for r in moment["rows"]:
                print(f"   {r['node']} ({r['instance']}) GPU {r['gpu']}: {r['cls']} ({r['subclass']}) jobs {r['jobs']}")
            for job, j in moment["jobs"].items():
                print(f"   job {job} on {j['nodes']}: {j['finding']}: {j['sentence']}")
        jobs, step = ClusterReader(PrometheusClient(url, env={})).accounting(t1 - t0, t1)
        for j in jobs:
            d = j.to_dict()
            print(f"   accounting: job {j.job}: {d['gpu_hours']:.4f} GPU-h, win back {d['win_back_share']:.0%}, "
                  f"{[(c['class'], round(c['share'], 2)) for c in d['classes']]}")
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record")
    r.add_argument("--target", action="append", required=True, help="NAME=HOST:PORT of an exporter")
    r.add_argument("--seconds", type=float, default=90.0)
    r.add_argument("--every", type=float, default=1.0)
    r.add_argument("--out", type=Path, required=True)
    j = sub.add_parser("judge")
    j.add_argument("scrapes", type=Path)
    j.add_argument("--at", type=float, action="append", default=[], help="seconds after the first scrape")
    a = ap.parse_args()
    if a.what == "record":
        return record(a.target, a.seconds, a.every, a.out)
    return judge(a.scrapes, a.at)


if __name__ == "__main__":
    sys.exit(main())
