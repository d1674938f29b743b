"""Each GPU of the cluster page made from the answers the reader keeps between reads (``latest.py``), and made
again only where what it is made of changed: its row series, the labels and jobs of its meta series, its memory
total, the jobs its verdicts name. At 8,192 GPUs, grouping every answer's series and making every row was most of
a refresh's CPU here (0.7 of 0.75 s), though a GPU is scraped every 15-60 s and the page reads every 5 s
(docs/benchmarks.md, "Cluster scale at 8,192 GPUs").

The GPUs' dicts (``{"labels", "series", "jobs"}``, as ``series.groups`` makes them) are shared with the last read
where nothing changed: not to be changed (``series.merge`` a copy). Each row handed out is a copy its caller may
change.
"""

from __future__ import annotations

import copy

from gputop.analysis import cluster as C
from gputop.analysis import cluster_identity as I
from gputop.fleet import series as S
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import to_sample


def row_of(key: tuple, g: dict, verdict_jobs: list[str]) -> C.ClusterGpu:
    """A GPU's row from its series, labels and jobs (and the jobs its exported verdicts name)."""
    values = S.latest(g)
    sample = to_sample(S.index(g), 0.0, values)
    labels = g["labels"]
    nvlink = [values.get(n) for n in ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES")]
    return C.ClusterGpu(
        node=I.node_of(labels), gpu=labels.get(F.LABEL_GPU, "?"), uuid=I.uuid_of(labels),
        model=labels.get(F.LABEL_MODEL_NAME) or None, jobs=list(dict.fromkeys(g["jobs"] + verdict_jobs)),
        sm_pct=sample["sm_active_pct"], dram_pct=sample["dram_bw_pct"], tensor_pct=sample["tensor_pct"],
        mem_used_bytes=sample["mem_used_bytes"], mem_total_bytes=sample["mem_total_bytes"],
        util_pct=sample["util_gpu_pct"], sm_clock_mhz=sample["sm_clock_mhz"], pcie_tx_bps=sample["pcie_tx_bps"],
        pcie_rx_bps=sample["pcie_rx_bps"], nvlink_bps=None if None in nvlink else sum(nvlink),
        instance=labels.get("instance") or None, scrape_job=labels.get("job") or None, key=key)


class GpuRows:
    """The GPUs made at the last read, and what each was made of (module text)."""

    def __init__(self):
        # GPU -> (what it was made of, its dict, (the jobs its verdicts named, its row as made) or None)
        self._made: dict[tuple, tuple] = {}

    def gpus(self, parts: list, extras: list[tuple], meta, totals: dict[tuple, dict], verdict_class: dict,
             gone) -> dict[tuple, dict]:
        """Each GPU's dict: its series from ``parts`` (the row series' kept answers, ``latest.Latest``, grouped; a
        GPU's first part gives its labels) and ``extras`` (``(kept answer, the classes it is read for)``: only a GPU
        whose class, ``verdict_class[key]``, is one of them takes it), labels and jobs from ``meta`` (the kept
        answer of one series a GPU with all its labels; None: not read now), memory total from ``totals`` (``{key:
        series}``); the GPUs ``gone`` left out."""
        keys = dict.fromkeys(k for latest in parts for k in latest.groups)
        made, out = {}, {}
        for key in keys:
            if key in gone:
                continue
            cls = verdict_class.get(key)
            total = totals.get(key) or {}
            sig = (tuple(latest.of(key) for latest in parts),
                   tuple(latest.of(key) if cls in classes else 0 for latest, classes in extras),
                   meta.of(key) if meta is not None else -1,
                   tuple((name, points[-1][1] if points else None) for name, points in total.items()))
            was = self._made.get(key)
            if was is not None and was[0] == sig:
                made[key], out[key] = was, was[1]
                continue
            g = None
            for part in [latest.groups.get(key) for latest in parts] + \
                    [latest.groups.get(key) if cls in classes else None for latest, classes in extras]:
                if part is None:
                    continue
                if g is None:
                    g = {"labels": part["labels"], "series": dict(part["series"]), "jobs": list(part["jobs"])}
                    continue
                for name, points in part["series"].items():
                    g["series"].setdefault(name, points)
                g["jobs"] += [j for j in part["jobs"] if j not in g["jobs"]]
            if meta is not None:
                S.add_meta({key: g}, meta.series_of(key))
            for name, points in total.items():  # the memory total's parts as last asked for
                g["series"].setdefault(name, points)
            made[key] = (sig, g, None)
            out[key] = g
        self._made = made
        return out

    def row(self, key: tuple, g: dict, verdict_jobs: list[str]) -> C.ClusterGpu:
        """GPU ``key``'s row (a copy, the caller's to change), made again only where its dict (``gpus``) or the jobs
        its verdicts name changed."""
        was = self._made.get(key)
        if was is None or was[1] is not g:
            return row_of(key, g, verdict_jobs)
        jobs = tuple(verdict_jobs)
        if was[2] is None or was[2][0] != jobs:
            was = self._made[key] = (was[0], g, (jobs, row_of(key, g, verdict_jobs)))
        row = copy.copy(was[2][1])
        row.jobs, row.flags, row.missing = list(row.jobs), [], list(row.missing)
        return row
