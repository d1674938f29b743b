"""The cluster: one row per GPU of many nodes, and each job's GPU-hours by class (pure; no HTTP here).

``fleet/reader.py`` asks a Prometheus server (``telemetry/prometheus.py``) and hands this module label sets,
values and windows of samples; this module decides what a row is, what a GPU's job is, which GPUs waste the most,
and judges the GPUs no gputop exported a verdict for (dcgm-exporter's nodes) with the one classifier
(:func:`gputop.analysis.classify.classify`) over samples made from their ``DCGM_FI_*`` series.

Words used throughout:

* a GPU is keyed by its node (the ``Hostname`` label, ``hostname`` after dcgm-exporter #655, else the scrape's
  ``instance``) and its ``gpu`` index label;
* its job is dcgm-exporter's ``hpc_job`` label (gputop --export writes the same), else Kubernetes'
  ``namespace/pod`` (dcgm-exporter's pod mapping); a GPU shared by two jobs is counted in full for each;
* ``judged_by`` says who named the class: ``"gputop --export"`` (the node's own gputop, its ``gputop_bottleneck``
  series) or ``"gputop"`` (this process, from the node's dcgm-exporter series; ``missing`` then lists what the
  classifier had to do without);
* waste: the share of the GPU's time its SMs sat idle now (1 - SM activity), or, where SM activity is not
  exported, 1 for a class in which the GPU waits (:data:`WAITING`) and 0 otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from gputop.analysis.classify import classify
from gputop.analysis.cluster_text import duration_text
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import CLASSES, Cls
from gputop.telemetry.dcgm_fields import LABEL_GPU, LABELS_HOSTNAME

EXPORTED, JUDGED = "gputop --export", "gputop"  # ClusterGpu.judged_by
# Classes in which the GPU does the work it was given at the pace of its own hardware; every other class (idle,
# input-starved, host-bound, latency-bound, PCIe- and comms-bound, a stalled collective) is a GPU waiting.
WORKING = (Cls.COMPUTE_BOUND, Cls.MEMORY_BOUND, Cls.MEMORY_CAPACITY, Cls.THROTTLED)
WAITING = tuple(c for c in CLASSES if c not in WORKING)
NODE_LABELS = (*LABELS_HOSTNAME, "instance")
NOT_WHOLE = frozenset(("GPU_I_PROFILE", "GPU_I_ID", "nvlink", "nvswitch"))  # labels of a part of a GPU  # the labels that name a series' node, the first present
# The classifier's inputs from a dcgm-exporter that decide a class: a GPU without one is judged with less.
KEY_FIELDS = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
              "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
              "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_DEV_GPU_UTIL",
              "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE")


def node_label(labels: dict) -> str | None:
    """The label that names a series' node: a host label, else ``instance``; None for neither."""
    for name in NODE_LABELS:
        if labels.get(name):
            return name
    return None


def node_of(labels: dict) -> str:
    """The node a series comes from: its host label, else the scrape's ``instance``."""
    name = node_label(labels)
    return labels[name] if name else "?"


def gpu_key(labels: dict) -> tuple[str, str]:
    """(node, gpu index label): one GPU of the cluster."""
    return node_of(labels), labels.get(LABEL_GPU, "?")


def job_of(labels: dict) -> str | None:
    """The job a series is labelled with: ``hpc_job``, else ``namespace/pod`` (or the pod alone); None for none."""
    if labels.get("hpc_job"):
        return labels["hpc_job"]
    pod, ns = labels.get("pod"), labels.get("namespace")
    if pod:
        return f"{ns}/{pod}" if ns else pod
    return None


def whole_gpu(labels: dict) -> bool:
    """A series of a whole GPU: a ``gpu`` label, no MIG instance, no NVLink or NVSwitch entity."""
    return LABEL_GPU in labels and not labels.keys() & NOT_WHOLE


@dataclass
class ClusterGpu:
    """One GPU of the cluster, as the cluster page and ``--once --json`` show it (None: not exported)."""

    node: str
    gpu: str  # dcgm-exporter's ``gpu`` label: the node's NVML index
    uuid: str | None = None
    model: str | None = None
    jobs: list[str] = field(default_factory=list)
    cls: str | None = None  # None: no verdict (no series to judge)
    subclass: str | None = None
    confidence: float | None = None
    judged_by: str = EXPORTED
    missing: list[str] = field(default_factory=list)  # evidence the verdict lacked (JUDGED only)
    sm_pct: float | None = None
    dram_pct: float | None = None
    tensor_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None

    @property
    def waste(self) -> float | None:
        """The share (0-1) of this GPU's time wasted now: 1 - SM activity, else by class (module text)."""
        if self.sm_pct is not None:
            return min(1.0, max(0.0, 1.0 - self.sm_pct / 100.0))
        if self.cls is None:
            return None
        return 1.0 if self.cls in WAITING else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["class"] = d.pop("cls")
        d["job"] = ", ".join(self.jobs) or None
        d["waste"] = None if self.waste is None else round(self.waste, 3)
        return d


def order(rows: list[ClusterGpu]) -> list[ClusterGpu]:
    """Most wasted GPU-time first; among equals, GPUs a job holds first, then by node and index."""
    def key(r: ClusterGpu):
        w = r.waste
        return (w is None, -(w or 0.0), not r.jobs, r.node, int(r.gpu) if r.gpu.isdigit() else 1 << 30, r.gpu)
    return sorted(rows, key=key)


def select(rows: list[ClusterGpu], job: str | None = None, node: str | None = None,
           cls: str | None = None) -> list[ClusterGpu]:
    """The rows of ``job`` (one of its jobs), ``node`` and class ``cls`` (each exact; None: any)."""
    return [r for r in rows if (job is None or job in r.jobs) and (node is None or r.node == node)
            and (cls is None or r.cls == cls)]


def class_problem(name: str) -> str | None:
    """Why ``--class NAME`` names no class (the classes listed), or None."""
    if name in CLASSES:
        return None
    return f"--class {name}: no such class (the classes: {', '.join(CLASSES)})"


NAMES_SHOWN = 8  # a line that lists what the cluster has names at most this many


def unmatched(rows: list[ClusterGpu], jobs: list["JobHours"], range_s: float, job: str | None = None,
              node: str | None = None) -> str | None:
    """One line for a ``--node`` the cluster has no GPU on, or a ``--job`` it has neither now nor in the accounting
    over ``range_s`` (naming the nodes or jobs it has); None where both match."""
    def some(names) -> str:
        names = sorted(names)
        more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
        return ", ".join(names[:NAMES_SHOWN]) + more if names else "none"
    if node is not None and not any(r.node == node for r in rows):
        return f"--node {node}: no such node in the cluster now (nodes: {some({r.node for r in rows})})"
    held = {j for r in rows for j in r.jobs} | {j.job for j in jobs if j.job is not None}
    if job is not None and job not in held:
        return (f"--job {job}: no such job in the cluster, now or over the last {duration_text(range_s)} (jobs: "
                f"{some(held)})")
    return None


def accounted(jobs: list["JobHours"], shown: list[ClusterGpu], filtered: bool,
              job: str | None = None) -> list["JobHours"]:
    """The accounting that goes with the rows ``shown``: every job's without a filter (``filtered`` False), else
    the jobs whose GPUs are shown ("no job" for a GPU no job holds) and ``--job``'s own (a job that ended within the
    range has GPU-hours and no GPU now)."""
    if not filtered:
        return list(jobs)
    held = {j for r in shown for j in r.jobs or [None]} | ({job} if job is not None else set())
    return [j for j in jobs if j.job in held]


def judge(samples: list[dict], static: dict, exported: set[str]) -> tuple[Verdict, list[str]]:
    """A GPU's verdict from samples made of its dcgm-exporter series (oldest first), and what it missed: the
    key DCGM fields not in ``exported`` (the series names the GPU has), then the classifier's own list."""
    verdict = classify(samples, static, {})
    absent = [f"{name} (not exported)" for name in KEY_FIELDS if name not in exported]
    return verdict, absent + list(verdict.missing)


# -- job accounting ------------------------------------------------------------------------------------------------
@dataclass
class JobHours:
    """One job's GPU-hours over the range, by (class, subclass)."""

    job: str | None  # None: GPUs no job held
    hours: dict[tuple[str, str | None], float] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> float:
        return sum(self.hours.values())

    @property
    def wasted_gpu_hours(self) -> float:
        return sum(h for (c, _), h in self.hours.items() if c in WAITING)

    def shares(self) -> list[tuple[str, str | None, float, float]]:
        """(class, subclass, GPU-hours, share 0-1), the largest first."""
        total = self.gpu_hours or 1.0
        return [(c, s, h, h / total) for (c, s), h in sorted(self.hours.items(), key=lambda kv: (-kv[1], kv[0][0]))]

    def to_dict(self) -> dict:
        return {"job": self.job, "gpu_hours": self.gpu_hours, "wasted_gpu_hours": self.wasted_gpu_hours,
                "classes": [{"class": c, "subclass": s, "gpu_hours": h, "share": share}
                            for c, s, h, share in self.shares()]}


def account(entries) -> list[JobHours]:
    """``(job, class, subclass, GPU-hours)`` entries -> one :class:`JobHours` per job, the most wasted GPU-hours
    first (then the most GPU-hours)."""
    jobs: dict[str | None, JobHours] = {}
    for job, cls, sub, hours in entries:
        if hours <= 0:
            continue
        j = jobs.setdefault(job, JobHours(job))
        j.hours[(cls, sub or None)] = j.hours.get((cls, sub or None), 0.0) + hours
    return sorted(jobs.values(), key=lambda j: (-j.wasted_gpu_hours, -j.gpu_hours, j.job is None, j.job or ""))


def exported_hours(classes, subclasses, step_s: float):
    """The GPU-hours of the verdicts the nodes' gputop exported, from counts of steps (``step_s`` apart) per job:
    ``classes`` ``(job, class, steps)`` (a verdict of that class at each step; a job and class may come more than
    once: the counts of the range's slices) and ``subclasses`` ``(job, class, subclass, steps)`` (of those, the
    steps that named a subclass). Yields ``(job, class, subclass, GPU-hours)``, a class's steps without a
    subclass as subclass None."""
    rest: dict[tuple, float] = defaultdict(float)
    for job, cls, steps in classes:
        rest[(job, cls)] += steps
    for job, cls, sub, steps in subclasses:
        rest[(job, cls)] -= steps
        yield job, cls, sub or None, steps * step_s / 3600.0
    for (job, cls), steps in rest.items():
        if steps > 0:
            yield job, cls, None, steps * step_s / 3600.0


def judged_hours(samples: list[dict], static: dict, step_s: float, window_s: float):
    """A GPU's samples (one every ``step_s``, oldest first, gaps where it was not exported) cut into windows of
    ``window_s``, each judged by the classifier: ``(class, subclass, GPU-hours)`` per window."""
    by_window: dict[int, list[dict]] = defaultdict(list)
    for s in samples:
        by_window[int(s["t"] // window_s)].append(s)
    for _, window in sorted(by_window.items()):
        v = classify(window, static, {})
        yield v.cls, v.subclass, len(window) * step_s / 3600.0
