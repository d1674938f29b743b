"""Prometheus' answers turned into GPUs: the series of each GPU (by the cluster's identity,
``analysis/cluster_identity.gpu_id``), their newest values, samples and static facts, and the few query helpers the
readers share (``reader.py``, ``accounting.py``, ``gpu_history.py``). No HTTP here beyond the calls handed in.
"""

from __future__ import annotations

import re
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor

from gputop.analysis import cluster as C
from gputop.analysis.cluster_identity import gpu_id
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import to_sample, to_static
from gputop.telemetry.errors import SourceError

PARALLEL = 4  # queries in flight at once (Prometheus evaluates a query on one core; here threads wait on sockets)
NAMES = tuple(dict.fromkeys([row[0] for row in F.FIELDS] + list(F.MEM_TOTAL_PARTS)))  # the DCGM series read
SELECTOR = '{__name__=~"%s"}' % "|".join(NAMES)
# the series a GPU is judged on: all but those the classifier never reads (so many fewer series to ask for)
JUDGE_NAMES = tuple(n for n in NAMES if n not in ("DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"))
JUDGE_SELECTOR = '{__name__=~"%s"}' % "|".join(JUDGE_NAMES)
# The labels a GPU's numbers are asked for with (``max by``): who it is (cluster_identity), where, what part of a GPU
# (whole_gpu); the rest of an exporter's labels (PCI bus, device, driver version, ...) is a third of a fleet's answer
# and read once a GPU (``META``), its model and jobs with it.
ID_LABELS = ("UUID", "uuid", "instance", "job", "gpu", "Hostname", "hostname", "GPU_I_PROFILE", "GPU_I_ID", "nvlink",
             "nvswitch")
META_LABELS = ID_LABELS + ("modelName", "hpc_job", "namespace", "pod")


def by_gpu(selector: str, labels: tuple[str, ...] = ID_LABELS) -> str:
    """``selector``'s series with only ``labels`` (and their name), one per GPU and name."""
    return f"max by (__name__, {', '.join(labels)}) ({selector})"


def groups(result: list[dict], with_job: bool = False) -> dict[tuple, dict]:
    """Series of whole GPUs grouped by GPU (and by job too: ``with_job``): ``{key: {"labels", "series": {name:
    [(t, v), ...]}, "jobs"}}``; an instant vector's one value is a one-point series. Where a GPU has two series of
    one name (a job that changed within the look-back), the first is kept. (A fleet's answer holds 10^5 series:
    this loop is written for that.)"""
    out: dict[tuple, dict] = {}
    part = C.NOT_WHOLE
    for r in result:
        labels = r["metric"]
        if "gpu" not in labels or not part.isdisjoint(labels):
            continue
        job = labels.get("hpc_job") or (C.job_of(labels) if "pod" in labels else None)
        key = gpu_id(labels)
        if with_job:
            key += (job,)
        g = out.get(key)
        if g is None:
            g = out[key] = {"labels": labels, "series": {}, "jobs": []}
        if job and job not in g["jobs"]:
            g["jobs"].append(job)
        name = labels.get("__name__")
        if name and name not in g["series"]:
            if "value" in r:
                t, v = r["value"]
                g["series"][name] = [(float(t), number(v))]
            else:
                g["series"][name] = [(float(t), number(v)) for t, v in r["values"]]
    return out


def skipped(result: list[dict]) -> int:
    """The series of an answer without a ``gpu`` label (not a GPU's)."""
    return sum(1 for r in result if "gpu" not in r["metric"])


def add_series(gpus: dict[tuple, dict], other: dict[tuple, dict], new: bool = False) -> None:
    """``other``'s series (more of the same GPUs' numbers) into ``gpus``, where a GPU has none of that name; ``new``:
    a GPU ``gpus`` does not have yet is added (its numbers read apart)."""
    for key, g in other.items():  # (8,192 GPUs an answer: written for that)
        mine = gpus.get(key)
        if mine is None:
            if new:
                gpus[key] = g
            continue
        series = mine["series"]
        for name, points in g["series"].items():
            if name not in series:
                series[name] = points
        if g["jobs"]:
            mine["jobs"] += [j for j in g["jobs"] if j not in mine["jobs"]]


def append_points(gpus: dict[tuple, dict], other: dict[tuple, dict]) -> None:
    """``other``'s points (later marks of the same series) after ``gpus``' (a GPU or a series new to ``gpus`` added)."""
    for key, g in other.items():
        mine = gpus.get(key)
        if mine is None:
            gpus[key] = g
            continue
        for name, points in g["series"].items():
            mine["series"][name] = mine["series"].get(name, []) + points
        mine["jobs"] += [j for j in g["jobs"] if j not in mine["jobs"]]


def add_meta(gpus: dict[tuple, dict], meta: dict[tuple, dict]) -> None:
    """Each GPU's model and the rest of its labels (``META_LABELS``) from ``meta``'s groups, where its own have no
    model (its jobs come with its series: ``add_series``)."""
    for key, m in meta.items():
        g = gpus.get(key)
        if g is not None and "modelName" not in g["labels"]:
            g["labels"] = {**m["labels"], **{k: v for k, v in g["labels"].items() if k != "hpc_job"}}


def merge(into: dict, other: dict) -> None:
    """``other``'s series (another exporter of the same GPU) where ``into`` has none of that name, and its jobs."""
    for name, points in other["series"].items():
        into["series"].setdefault(name, points)
    into["jobs"] += [j for j in other["jobs"] if j not in into["jobs"]]


def number(v: str) -> float | None:
    x = float(v)
    return None if x != x or abs(x) >= F.FP64_BLANK else x


def index(g: dict) -> int:
    gpu = str(g["labels"].get(F.LABEL_GPU, ""))
    return int(gpu) if gpu.isdigit() else 0


def latest(g: dict) -> dict:
    """Each series' newest value: ``{DCGM name: value}``."""
    return {name: points[-1][1] for name, points in g["series"].items() if points}


def samples(g: dict) -> list[dict]:
    """A GPU's series as gputop samples, one per timestamp (``telemetry.dcgm.to_sample``: the one conversion)."""
    at: dict[float, dict] = defaultdict(dict)
    for name, points in g["series"].items():
        for t, v in points:
            at[t][name] = v
    return [to_sample(index(g), t, values) for t, values in sorted(at.items())]


def static(g: dict) -> dict:
    return to_static(index(g), g["labels"], latest(g))


def concurrently(calls: list, parallel: int = PARALLEL) -> list:
    """Each zero-argument call's result, in order, the calls made ``parallel`` at a time. The first failure is
    raised."""
    if len(calls) <= 1:
        return [c() for c in calls]
    with ThreadPoolExecutor(min(parallel, len(calls))) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


class Once:
    """A zero-argument call whose result another call of the same read waits on (``result``: a Future's): a query
    built from another's answer, the two in flight side by side with the rest. Make it before the calls that wait."""

    def __init__(self, call):
        self._call, self._future = call, Future()

    def __call__(self):
        try:
            value = self._call()
        except BaseException as exc:
            self._future.set_exception(exc)
            raise
        self._future.set_result(value)
        return value

    def result(self):
        return self._future.result()


def each(calls: dict, parallel: int = PARALLEL) -> tuple[dict, dict]:
    """Each named zero-argument call made, ``PARALLEL`` at a time: ``({name: result}, {name: SourceError})``, a
    failed call's error kept beside the others' results (a query that timed out costs its own part of a read)."""
    def kept(call):
        try:
            return True, call()
        except SourceError as exc:
            return False, exc
    names = list(calls)
    results = concurrently([lambda c=calls[n]: kept(c) for n in names], parallel)
    ok = {n: r for n, (good, r) in zip(names, results) if good}
    failed = {n: r for n, (good, r) in zip(names, results) if not good}
    return ok, failed


def values_regex(values) -> str:
    """A PromQL string holding an RE2 alternation that matches exactly ``values``."""
    rx = "|".join(re.sub(r"([\\.^$*+?()\[\]{}|-])", r"\\\1", v) for v in sorted(values))
    return '"' + rx.replace("\\", "\\\\").replace('"', '\\"') + '"'


def of_gpus(names: str, gpus) -> str:
    """A selector of the series named ``names`` (a regex) of the GPUs whose labels ``gpus`` are: by UUID, by scrape
    target where a GPU has none (that target's other GPUs without one too: the caller keeps its own)."""
    by = defaultdict(set)
    for labels in gpus:
        label = next((n for n in ("UUID", "uuid") if labels.get(n)), "instance")
        by[label].add(labels.get(label, ""))
    no_uuid = ',UUID="",uuid=""'
    return " or ".join(f'{{__name__=~"{names}",{label}=~{values_regex(values)}'
                       f'{no_uuid if label == "instance" else ""}}}' for label, values in sorted(by.items()))


def escape(value: str) -> str:
    """A label value inside PromQL's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def on_nodes(nodes: dict[str, set[str]]) -> str:
    """Every DCGM series gputop judges of the given nodes, ``{node label: {values}}`` (``instance``: of series
    without a host label); one selector per label, joined with ``or``."""
    parts = []
    for label, values in nodes.items():
        if values:
            rest = ',Hostname="",hostname=""' if label not in F.LABELS_HOSTNAME else ""
            parts.append(f'{{__name__=~"{"|".join(JUDGE_NAMES)}",{label}=~{values_regex(values)}{rest}}}')
    return " or ".join(parts)
