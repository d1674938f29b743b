"""The cluster read from Prometheus: the queries, and their answers turned into rows and job accounts.

One :class:`ClusterReader` per server (``telemetry/prometheus.PrometheusClient``). ``snapshot()`` asks:

1. every whole GPU's ``DCGM_FI_*`` series now (one instant query over the names gputop reads, whoever exported
   them: ``gputop --export`` and dcgm-exporter use the same names and labels);
2. ``gputop_bottleneck == 1`` and ``gputop_verdict_confidence`` now: the verdicts the nodes' own gputop exported;
3. for the GPUs without one (dcgm-exporter's nodes), their series over the last ``JUDGE_WINDOW_S`` at
   ``JUDGE_STEP_S`` (``query_range``), which this process judges itself with the classifier
   (``analysis/cluster.judge``).

``accounting(range_s)`` counts each job's GPU-hours by class over the range: the exported verdicts with one
subquery (``count_over_time((gputop_bottleneck == 1)[range:step])``, summed by job, class and subclass), the
dcgm-exporter GPUs by judging their series window by window. The rows and the sums are ``analysis/cluster.py``'s.

An empty fleet (no whole-GPU series now) raises :class:`NoGpu`, saying whether the last hour had GPUs
(``/api/v1/series``: the exporters stopped) or none ever; the client raises the rest (:mod:`gputop.telemetry.errors`).
"""

from __future__ import annotations

import time
from collections import defaultdict

from gputop.analysis import cluster as C
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import to_sample, to_static
from gputop.telemetry.errors import NoGpu
from gputop.telemetry.prometheus import PrometheusClient

NAMES = tuple(dict.fromkeys([row[0] for row in F.FIELDS] + list(F.MEM_TOTAL_PARTS)))  # the DCGM series read
SELECTOR = '{__name__=~"%s"}' % "|".join(NAMES)
# the same series, of the GPUs whose node exported no gputop verdict (matched on node and index)
UNJUDGED = f'{SELECTOR} unless on(Hostname, hostname, gpu) gputop_bottleneck'
JUDGE_WINDOW_S = 60.0  # a dcgm-exporter GPU is judged on its last minute ...
JUDGE_STEP_S = 2.0  # ... one sample every 2 s (dcgm-exporter collects every 1-30 s)
RANGE_POINTS = 720  # accounting: about this many steps over the range (24 h: one every 2 min) ...
MIN_STEP_S, MAX_STEP_S = 1.0, 300.0
EMPTY_LOOKBACK_S = 3600.0  # an empty fleet: were there GPUs this long ago (``series``)?
ACCOUNT_WINDOWS = 24  # ... and a dcgm-exporter GPU judged in at most this many windows over it


def range_step(range_s: float) -> float:
    """The accounting's step for a range: ``RANGE_POINTS`` steps, whole seconds, within [1 s, 5 min]."""
    return float(min(MAX_STEP_S, max(MIN_STEP_S, round(range_s / RANGE_POINTS))))


def _groups(result: list[dict], with_job: bool = False) -> dict[tuple, dict]:
    """Series of whole GPUs grouped by GPU (and by job too: ``with_job``): ``{key: {"labels", "series": {name:
    [(t, v), ...]}, "jobs"}}``; an instant vector's one value is a one-point series."""
    out: dict[tuple, dict] = {}
    for r in result:
        labels = r["metric"]
        if not C.whole_gpu(labels):
            continue
        key = C.gpu_key(labels) + ((C.job_of(labels),) if with_job else ())
        g = out.setdefault(key, {"labels": labels, "series": {}, "jobs": []})
        job = C.job_of(labels)
        if job and job not in g["jobs"]:
            g["jobs"].append(job)
        points = r["values"] if "values" in r else [r["value"]]
        name = labels.get("__name__")
        if name and name not in g["series"]:  # one exporter per series name (a second one on the node: ignored)
            g["series"][name] = [(float(t), _number(v)) for t, v in points]
    return out


def _number(v: str) -> float | None:
    x = float(v)
    return None if x != x or abs(x) >= F.FP64_BLANK else x


def _index(g: dict) -> int:
    gpu = str(g["labels"].get(F.LABEL_GPU, ""))
    return int(gpu) if gpu.isdigit() else 0


def _latest(g: dict) -> dict:
    """Each series' newest value: ``{DCGM name: value}``."""
    return {name: points[-1][1] for name, points in g["series"].items() if points}


def _samples(g: dict) -> list[dict]:
    """A GPU's series as gputop samples, one per timestamp (``telemetry.dcgm.to_sample``: the one conversion)."""
    at: dict[float, dict] = defaultdict(dict)
    for name, points in g["series"].items():
        for t, v in points:
            at[t][name] = v
    return [to_sample(_index(g), t, values) for t, values in sorted(at.items())]


def _static(g: dict) -> dict:
    return to_static(_index(g), g["labels"], _latest(g))


class ClusterReader:
    """The cluster as one Prometheus server sees it."""

    def __init__(self, client: PrometheusClient):
        self.client = client

    def snapshot(self, now: float | None = None) -> list[C.ClusterGpu]:
        """Every GPU now, most wasted first (``analysis.cluster.order``). Raises SourceError (NoGpu: none)."""
        now = time.time() if now is None else now
        gpus = _groups(self.client.query(SELECTOR, at=now))
        verdict_rows: dict[tuple, dict] = {}  # GPU -> the labels of its exported class
        verdict_jobs: dict[tuple, list[str]] = defaultdict(list)
        for r in self.client.query("gputop_bottleneck == 1", at=now):
            if C.whole_gpu(r["metric"]):
                key, job = C.gpu_key(r["metric"]), C.job_of(r["metric"])
                verdict_rows.setdefault(key, r["metric"])
                if job and job not in verdict_jobs[key]:
                    verdict_jobs[key].append(job)
        confidence = {}
        for r in self.client.query("gputop_verdict_confidence", at=now):
            if C.whole_gpu(r["metric"]):
                confidence.setdefault(C.gpu_key(r["metric"]), _number(r["value"][1]))
        if not gpus and not verdict_rows:
            raise NoGpu(self._empty(now))
        rows = {}
        for key in list(gpus) + [k for k in verdict_rows if k not in gpus]:
            g = gpus.get(key) or {"labels": verdict_rows[key], "series": {}, "jobs": []}
            rows[key] = self._row(key, g, verdict_jobs.get(key, []))
            if key in verdict_rows:
                labels = verdict_rows[key]
                rows[key].cls, rows[key].subclass = labels.get("class"), labels.get("subclass") or None
                rows[key].confidence = confidence.get(key)
        unjudged = [k for k in rows if k not in verdict_rows]
        if unjudged:
            history = _groups(self.client.query_range(UNJUDGED, now - JUDGE_WINDOW_S, now, JUDGE_STEP_S))
            for key in unjudged:
                g, row = history.get(key), rows[key]
                row.judged_by = C.JUDGED
                if g is None:  # series now, none over the last minute at the step's marks: nothing to judge
                    row.missing = [f"no DCGM_FI_* series over the last {JUDGE_WINDOW_S:g} s to judge"]
                    continue
                verdict, row.missing = C.judge(_samples(g), _static(g), set(g["series"]))
                row.cls, row.subclass, row.confidence = verdict.cls, verdict.subclass, verdict.confidence
        return C.order(list(rows.values()))

    def _empty(self, now: float) -> str:
        """Why the fleet is empty, in words: nothing ever, or nothing now of series seen in the last hour."""
        seen = self.client.series(SELECTOR, "gputop_bottleneck", start=now - EMPTY_LOOKBACK_S, end=now)
        gpus = {C.gpu_key(s) for s in seen if C.whole_gpu(s)}
        if gpus:
            return (f"{self.client.url}: no GPU series now ({len(gpus)} GPU(s) exported in the last hour, none "
                    "since: have the exporters stopped, or Prometheus stopped scraping them?)")
        return (f"{self.client.url}: no GPU series (neither dcgm-exporter's DCGM_FI_* nor gputop's) in this "
                "Prometheus: is it scraping the exporters?")

    @staticmethod
    def _row(key: tuple, g: dict, verdict_jobs: list[str]) -> C.ClusterGpu:
        sample = to_sample(_index(g), 0.0, _latest(g))
        labels = g["labels"]
        return C.ClusterGpu(
            node=key[0], gpu=key[1], uuid=next((labels[n] for n in F.LABELS_UUID if labels.get(n)), None),
            model=labels.get(F.LABEL_MODEL_NAME) or None, jobs=list(dict.fromkeys(g["jobs"] + verdict_jobs)),
            sm_pct=sample["sm_active_pct"], dram_pct=sample["dram_bw_pct"], tensor_pct=sample["tensor_pct"],
            mem_used_bytes=sample["mem_used_bytes"], mem_total_bytes=sample["mem_total_bytes"])

    def accounting(self, range_s: float, now: float | None = None) -> tuple[list[C.JobHours], float]:
        """Each job's GPU-hours by class over the last ``range_s`` seconds, and the step it was counted at."""
        now = time.time() if now is None else now
        step = range_step(range_s)
        entries = []
        counted = self.client.query(  # range less a second: one mark per step (a subquery holds both its ends)
            f"sum by (hpc_job, namespace, pod, class, subclass) "
            f"(count_over_time((gputop_bottleneck == 1)[{int(range_s) - 1}s:{int(step)}s]))", at=now)
        for r in counted:
            labels = r["metric"]
            entries.append((C.job_of(labels), labels.get("class", "?"), labels.get("subclass") or None,
                            float(r["value"][1]) * step / 3600.0))
        window_s = max(range_s / ACCOUNT_WINDOWS, 5 * step)
        history = _groups(self.client.query_range(UNJUDGED, now - range_s, now, step), with_job=True)
        for key, g in history.items():
            for cls, sub, hours in C.judged_hours(_samples(g), _static(g), step, window_s):
                entries.append((key[2], cls, sub, hours))
        return C.account(entries), step
