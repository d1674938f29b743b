"""The cluster read from Prometheus: the queries, and their answers turned into rows and job accounts.

One :class:`ClusterReader` per server (``telemetry/prometheus.PrometheusClient``). ``snapshot()`` asks:

1. every whole GPU's row series now (``ROW_NAMES``: SM, DRAM and tensor activity, memory, GPU utilisation; one
   instant query, whoever exported them: ``gputop --export`` and dcgm-exporter use the same names and labels);
2. the verdicts the nodes' own gputop exported now: the class from ``gputop_verdict_confidence{class}`` (one series
   per GPU, where ``gputop_bottleneck`` has one per class: every verdict of ``gputop --export`` has a confidence),
   the subclass from ``gputop_bottleneck{subclass!=""}`` (only the current class carries one);
3. for the GPUs without one (dcgm-exporter's nodes), the ``DCGM_FI_*`` series the classifier reads
   (``JUDGE_NAMES``) over the last ``JUDGE_WINDOW_S`` at ``JUDGE_STEP_S`` (``query_range``, on those GPUs' nodes
   only: named by the label index and asked for beside 1 and 2, the nodes the index missed after), which this
   process judges itself with the classifier (``analysis/cluster.judge``). The refreshes within one step of a
   grid of ``JUDGE_STEP_S`` (the cluster page reads every 5 s) reuse the first one's verdicts.

``accounting(range_s)`` counts each job's GPU-hours by class over the range (its queries ``PARALLEL`` at a time:
Prometheus evaluates a query on one core): the exported verdicts with subqueries at the range's step (the range
cut in ``PARALLEL`` slices), summed by job and class (``count_over_time(gputop_verdict_confidence[range:step])``:
one series per GPU, where ``gputop_bottleneck`` has one per class; every verdict of ``gputop --export`` has a
confidence) and by subclass (``gputop_bottleneck{subclass!=""}``: only the current class carries one); the
dcgm-exporter GPUs by judging their series window by window, at most ``ACCOUNT_JUDGE_POINTS`` samples of each over
the range (the GPUs of the nodes that exported no verdict in the range: a node whose gputop exported at any time
of it is counted from its verdicts alone; their nodes in ``PARALLEL`` shares). The rows and the sums are
``analysis/cluster.py``'s.

Cost (bench/perf/cluster_scale.py, docs/benchmarks.md "Cluster scale (issue 26)"): the classifier costs this
process about 70 us per sample, so the dcgm-exporter GPUs are judged on few samples (3 per judging, at most once
per 30 s; 16 per GPU over an accounting range), on the series it reads (``JUDGE_NAMES``), asked for on their own
nodes only (named by the rows, or by the label index: ``/api/v1/label/…/values``), never as every node's series
``unless`` a verdict at every step (that alone took seconds at 256 GPUs over 24 h). At 2,048 GPUs (a quarter
dcgm-exporter's) on 2 cores a refresh took 0.4 s (4% of a core every 5 s) and an accounting of 24 h 3.1-3.7 s
(5-5.6 s while other work held one of the cores).

An empty fleet (no whole-GPU series now) raises :class:`NoGpu`, saying whether the last hour had GPUs
(``/api/v1/series``: the exporters stopped) or none ever; the client raises the rest (:mod:`gputop.telemetry.errors`).
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from gputop.analysis import cluster as C
from gputop.format import count
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import to_sample, to_static
from gputop.telemetry.errors import NoGpu, SourceError
from gputop.telemetry.prometheus import PrometheusClient

NAMES = tuple(dict.fromkeys([row[0] for row in F.FIELDS] + list(F.MEM_TOTAL_PARTS)))  # the DCGM series read
SELECTOR = '{__name__=~"%s"}' % "|".join(NAMES)
# what a row shows (and GPU utilisation, which every dcgm-exporter has: a GPU exporting none of these is not seen)
ROW_NAMES = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
             "DCGM_FI_DEV_GPU_UTIL", *F.MEM_TOTAL_PARTS)
ROW_SELECTOR = '{__name__=~"%s"}' % "|".join(ROW_NAMES)
NOT_JUDGED = "unless on(Hostname, hostname, gpu) gputop_bottleneck"  # series of GPUs without an exported verdict
# the series a GPU is judged on: all but those the classifier never reads (so many fewer series to ask for)
JUDGE_NAMES = tuple(n for n in NAMES if n not in ("DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"))
JUDGE_SELECTOR = '{__name__=~"%s"}' % "|".join(JUDGE_NAMES)
JUDGE_WINDOW_S = 60.0  # a dcgm-exporter GPU is judged on its last minute ...
JUDGE_STEP_S = 30.0  # ... one sample every 30 s (dcgm-exporter collects every 30 s by default: a finer step only
# repeats the same scrapes, and each sample costs the classifier ~70 us); one judging per step of this grid
RANGE_POINTS = 720  # accounting: about this many steps over the range (24 h: one every 2 min) ...
MIN_STEP_S, MAX_STEP_S = 1.0, 300.0
EMPTY_LOOKBACK_S = 3600.0  # an empty fleet: were there GPUs this long ago (``series``)?
ACCOUNT_WINDOWS = 8  # ... and a dcgm-exporter GPU judged in at most this many windows over it ...
ACCOUNT_JUDGE_POINTS = 16  # ... on at most this many samples (24 h: one every 90 min, 2 a window)
PARALLEL = 4  # queries in flight at once; an accounting's range (and its judged nodes) cut in as many parts


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


def _concurrently(calls: list) -> list:
    """Each zero-argument call's result, in order, the calls made ``PARALLEL`` at a time (Prometheus evaluates
    each query on one core; here, threads wait on the sockets). The first failure is raised."""
    if len(calls) <= 1:
        return [c() for c in calls]
    with ThreadPoolExecutor(min(PARALLEL, len(calls))) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


def _slices(range_s: float, step: float) -> list[tuple[float, float]]:
    """The range cut into ``PARALLEL`` slices of whole steps, newest first: ``(offset from now, length)`` pairs.
    A slice is asked for as ``[length - 1 s:step]`` (a subquery holds both its ends: one mark per step) at
    ``now - offset``."""
    size = step * math.ceil(range_s / step / PARALLEL)
    out, offset = [], 0.0
    while offset < range_s:
        span = min(size, range_s - offset)
        out.append((offset, span))
        offset += size
    return out


def _values_regex(values) -> str:
    """A PromQL string holding an RE2 alternation that matches exactly ``values``."""
    rx = "|".join(re.sub(r"([\\.^$*+?()\[\]{}|-])", r"\\\1", v) for v in sorted(values))
    return '"' + rx.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _on_nodes(nodes: dict[str, set[str]]) -> str:
    """Every DCGM series gputop reads of the given nodes, ``{node label: {values}}`` (``instance``: of series
    without a host label); one selector per label, joined with ``or``."""
    parts = []
    for label, values in nodes.items():
        if values:
            rest = ',Hostname="",hostname=""' if label not in F.LABELS_HOSTNAME else ""
            parts.append(f'{{__name__=~"{"|".join(JUDGE_NAMES)}",{label}=~{_values_regex(values)}{rest}}}')
    return " or ".join(parts)


class ClusterReader:
    """The cluster as one Prometheus server sees it."""

    def __init__(self, client: PrometheusClient):
        self.client = client
        self._judged: dict[tuple, tuple] = {}  # the last window's verdicts of the GPUs judged here ...
        self._judged_at: float | None = None  # ... and the step of the grid they were judged in

    def snapshot(self, now: float | None = None) -> list[C.ClusterGpu]:
        """Every GPU now, most wasted first (``analysis.cluster.order``). Raises SourceError (NoGpu: none)."""
        now = time.time() if now is None else now
        slot = now - now % JUDGE_STEP_S  # the refreshes within one step of the grid reuse the first one's verdicts
        fresh = slot != self._judged_at
        calls = [lambda: self.client.query(ROW_SELECTOR, at=now),
                 lambda: self.client.query("gputop_verdict_confidence", at=now),
                 lambda: self.client.query('gputop_bottleneck{subclass!=""}', at=now)]
        if fresh:  # the last minute of the nodes that export no verdict (the label index names them), meanwhile
            calls.append(lambda: self._history_meanwhile(now))
        answers = _concurrently(calls)
        gpus = _groups(answers[0])
        verdict_rows: dict[tuple, dict] = {}  # GPU -> the labels of its exported class
        verdict_jobs: dict[tuple, list[str]] = defaultdict(list)
        confidence = {}
        for r in answers[1]:
            if C.whole_gpu(r["metric"]):
                key, job = C.gpu_key(r["metric"]), C.job_of(r["metric"])
                if key not in verdict_rows:
                    verdict_rows[key], confidence[key] = r["metric"], _number(r["value"][1])
                if job and job not in verdict_jobs[key]:
                    verdict_jobs[key].append(job)
        subclass = {}
        for r in answers[2]:
            if C.whole_gpu(r["metric"]):
                subclass.setdefault((C.gpu_key(r["metric"]), r["metric"].get("class")), r["metric"]["subclass"])
        if not gpus and not verdict_rows:
            raise NoGpu(self._empty(now))
        rows, labels_of = {}, {}
        for key in list(gpus) + [k for k in verdict_rows if k not in gpus]:
            g = gpus.get(key) or {"labels": verdict_rows[key], "series": {}, "jobs": []}
            labels_of[key] = g["labels"]
            rows[key] = self._row(key, g, verdict_jobs.get(key, []))
            if key in verdict_rows:
                cls = verdict_rows[key].get("class")
                rows[key].cls, rows[key].subclass = cls, subclass.get((key, cls)) or None
                rows[key].confidence = confidence.get(key)
        unjudged = [k for k in rows if k not in verdict_rows]
        judged = {} if fresh else self._judged
        todo = [k for k in unjudged if k not in judged]
        if todo:
            asked, history = answers[3] if fresh else (set(), {})
            rest: dict[str, set[str]] = defaultdict(set)  # GPUs of nodes not asked for yet (a node with both kinds)
            for key in todo:
                label = C.node_label(labels_of[key])
                if label and (label, key[0]) not in asked:
                    rest[label].add(key[0])
            if rest:
                history.update(self._history(rest, now)[1])
            judged.update(self._verdicts(todo, history))
        self._judged, self._judged_at = judged, slot
        for key in unjudged:
            row = rows[key]
            row.judged_by = C.JUDGED
            row.cls, row.subclass, row.confidence, missing = judged[key]
            row.missing = list(missing)
        return C.order(list(rows.values()))

    def _history_meanwhile(self, now: float) -> tuple[set[tuple[str, str]], dict[tuple, dict]]:
        """``_history`` of the nodes the label index says export no verdict; nothing where the index cannot say
        (a server without ``match[]`` on label values, an error: the rows' reading then asks, and reports it)."""
        try:
            return self._history(self._unexported_nodes(now - JUDGE_WINDOW_S, now), now)
        except SourceError:
            return set(), {}

    def _unexported_nodes(self, start: float, end: float) -> dict[str, set[str]]:
        """The nodes with DCGM series and no gputop verdict over [start, end] by the label index, ``{host label:
        {values}}`` (a node named only by ``instance`` is not there)."""
        nodes = {}
        for label in F.LABELS_HOSTNAME:
            dcgm = set(self.client.label_values(label, SELECTOR, start=start, end=end))
            if dcgm:
                nodes[label] = dcgm - set(self.client.label_values(label, "gputop_bottleneck", start=start, end=end))
        return nodes

    def _history(self, nodes: dict[str, set[str]], end: float) -> tuple[set[tuple[str, str]], dict[tuple, dict]]:
        """The nodes' DCGM series over the judging window ending at ``end``, by GPU; and the ``(label, node)``
        pairs asked for."""
        asked = {(label, v) for label, values in nodes.items() for v in values}
        if not asked:
            return asked, {}
        return asked, _groups(self.client.query_range(_on_nodes(nodes), end - JUDGE_WINDOW_S, end, JUDGE_STEP_S))

    @staticmethod
    def _verdicts(keys: list[tuple], history: dict[tuple, dict]) -> dict[tuple, tuple]:
        """GPUs without an exported verdict judged here on their window of series: ``{key: (class, subclass,
        confidence, missing)}`` (the nodes' GPUs with a verdict may be in ``history`` too: not judged here)."""
        out = {}
        for key in keys:
            g = history.get(key)
            if g is None:  # series now, none over the last minute at the step's marks: nothing to judge
                out[key] = (None, None, None, (f"no DCGM_FI_* series over the last {JUDGE_WINDOW_S:g} s to judge",))
                continue
            verdict, missing = C.judge(_samples(g), _static(g), set(g["series"]))
            out[key] = (verdict.cls, verdict.subclass, verdict.confidence, tuple(missing))
        return out

    def _empty(self, now: float) -> str:
        """Why the fleet is empty, in words: nothing ever, or nothing now of series seen in the last hour."""
        seen = self.client.series(SELECTOR, "gputop_bottleneck", start=now - EMPTY_LOOKBACK_S, end=now)
        gpus = {C.gpu_key(s) for s in seen if C.whole_gpu(s)}
        if gpus:
            return (f"{self.client.url}: no GPU series now ({count(len(gpus), 'GPU')} exported in the last hour, none "
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
        by = "sum by (hpc_job, namespace, pod, class, subclass) "
        judge_step = max(step, float(round(range_s / ACCOUNT_JUDGE_POINTS)))
        selectors = self._not_exported(now - range_s, now)
        judged = [lambda q=q: self.client.query_range(q, now - range_s, now, judge_step)  # the largest answers first
                  for q in selectors]
        counted = [lambda o=o, w=w: self.client.query(
            f"{by}(count_over_time(gputop_verdict_confidence[{int(w) - 1}s:{int(step)}s]))", at=now - o)
            for o, w in _slices(range_s, step)]
        answers = _concurrently(judged + counted + [lambda: self.client.query(
            f'{by}(count_over_time(gputop_bottleneck{{subclass!=""}}[{int(range_s) - 1}s:{int(step)}s]))', at=now)])
        classes = [(C.job_of(r["metric"]), r["metric"].get("class", "?"), float(r["value"][1]))
                   for answer in answers[len(judged):-1] for r in answer]
        subclasses = [(C.job_of(r["metric"]), r["metric"].get("class", "?"), r["metric"].get("subclass"),
                       float(r["value"][1])) for r in answers[-1]]
        entries = list(C.exported_hours(classes, subclasses, step))
        history = _groups([r for answer in answers[:len(judged)] for r in answer], with_job=True)
        window_s = max(range_s / ACCOUNT_WINDOWS, 2 * judge_step)
        for key, g in history.items():
            for cls, sub, hours in C.judged_hours(_samples(g), _static(g), judge_step, window_s):
                entries.append((key[2], cls, sub, hours))
        return C.account(entries), step

    def _not_exported(self, start: float, end: float) -> list[str]:
        """Selectors of the DCGM series of the nodes that exported no gputop verdict over [start, end] (the nodes
        named by the label index: a node whose gputop exported verdicts at any time of the range is counted from
        those alone), and of series without a host label where no verdict was exported (``unless``, matched by
        GPU). Each is asked for apart, the nodes in ``PARALLEL`` shares: ``or`` would match every series against the
        others at every step, and a query's series are read on one core."""
        parts = []
        for label in F.LABELS_HOSTNAME:
            dcgm = set(self.client.label_values(label, SELECTOR, start=start, end=end))
            if dcgm:
                dcgm -= set(self.client.label_values(label, "gputop_bottleneck", start=start, end=end))
                nodes = sorted(dcgm)
                parts += [_on_nodes({label: set(nodes[i::PARALLEL])}) for i in range(PARALLEL)]
        # series without a host label: by the scrape's instance, as a row's node
        parts.append(f'{JUDGE_SELECTOR[:-1]},Hostname="",hostname=""}} {NOT_JUDGED}{{Hostname="",hostname=""}}')
        return [p for p in parts if p]
