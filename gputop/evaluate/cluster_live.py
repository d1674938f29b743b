"""The live cluster check judged (issue 38): the scrapes of two ``gputop --export`` on a GPU machine, recorded as
Prometheus would store them (bench/gpu/cluster_live_record.py ``record``), backfilled into a real Prometheus and the
cluster read at moments of the run, as ``gputop --source prometheus=URL`` reads it.

:func:`openmetrics` writes the samples as one OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics``;
:func:`backfill` runs promtool; :func:`read` asks ``fleet/reader.ClusterReader`` with "now" set to each moment and
judges each job over its "nodes" (``analysis/cluster_jobs.judge_jobs``).

Backfilled blocks carry no staleness markers: a series that ends (a verdict's ``class`` label that changed) would
stay visible for Prometheus' default 5 min look-back, two classes at once for one GPU. The recorder scraped every
second, so the Prometheus that reads them is started with ``--query.lookback-delta`` of ``LOOKBACK`` (three
scrapes), which ends a series as the marker ends it on a server that scraped the exporters itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

LOOKBACK = "3s"


def openmetrics(samples: list[dict]) -> str:
    """The samples ({t, name, labels, value}) as one OpenMetrics text: each family's lines together, each series
    in time order."""
    by_family: dict[str, dict[tuple, list]] = {}
    for s in samples:
        if s["value"] != s["value"]:  # NaN: nothing to keep
            continue
        key = tuple(sorted(s["labels"].items()))
        by_family.setdefault(s["name"], {}).setdefault(key, []).append((float(s["t"]), s["value"]))
    out = []
    for name, series in by_family.items():
        out.append(f"# TYPE {name} gauge")
        for labels, points in series.items():
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            out += [f"{name}{{{text}}} {v} {t:.3f}" for t, v in sorted(points)]
    return "\n".join(out) + "\n# EOF\n"


def backfill(samples: list[dict], work: Path) -> Path:
    """The samples backfilled into a TSDB under ``work`` (its path: a Prometheus' ``--storage.tsdb.path``)."""
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    (work / "scrapes.om").write_text(openmetrics(samples))
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(work / "scrapes.om"), str(data)],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    return data


def read(url: str, t0: float, offsets: list[float]) -> list[dict]:
    """The cluster at ``t0 + offset`` for each offset: {"offset", "rows": [{node, instance, gpu, cls, subclass,
    jobs}], "jobs": {job: {nodes, finding, sentence}}, "notes"}."""
    from gputop.analysis.cluster_jobs import judge_jobs
    from gputop.fleet.reader import ClusterReader
    from gputop.telemetry.prometheus import PrometheusClient

    reader = ClusterReader(PrometheusClient(url, env={}))
    out = []
    for offset in offsets:
        rows = reader.snapshot(t0 + offset)
        out.append({"offset": offset, "notes": list(reader.notes),
                    "rows": [{"node": r.node, "instance": r.instance, "gpu": r.gpu, "cls": r.cls,
                              "subclass": r.subclass, "jobs": list(r.jobs)} for r in rows],
                    "jobs": {job: {"nodes": j.nodes, "finding": j.finding, "sentence": j.sentence}
                             for job, j in sorted(judge_jobs(rows).items())}})
    return out
