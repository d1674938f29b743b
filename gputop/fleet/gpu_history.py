"""One GPU of the cluster over time, for the cluster page's detail view (``tui/cluster/detail.py``).

:func:`read_gpu` asks Prometheus (``query_range``) for one GPU's ``DCGM_FI_*`` series over the last ``window_s``
(its charts) and, where its node runs ``gputop --export``, for the class it exported at each step (its verdict over
time). The verdict's evidence and advice come from the one classifier (``analysis/cluster.judge``) over the last
``JUDGE_WINDOW_S`` of those series, as ``fleet/judged_here.py`` judges a dcgm-exporter GPU. The GPU is the row's
(``ClusterGpu.key``, ``analysis/cluster_identity.gpu_id``): its UUID through its scrape target, else its target's
GPU of that index; the selector asks for that (either spelling of the UUID label; a row without a target by its
node's labels) and keeps only the series of that GPU: another GPU that shares its host name or index is never
drawn in. Raises what the client raises (:mod:`gputop.telemetry.errors`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gputop.analysis import cluster as C
from gputop.analysis.cluster_identity import gpu_id
from gputop.analysis.verdict import Verdict
from gputop.fleet import series as S
from gputop.fleet.judged_here import JUDGE_WINDOW_S
from gputop.telemetry.dcgm_fields import LABEL_GPU, LABELS_HOSTNAME, LABELS_UUID
from gputop.telemetry.prometheus import PrometheusClient

WINDOW_S = 900.0  # the detail's charts: the last 15 minutes ...
POINTS = 300  # ... in about this many steps (3 s each), at least one a second


@dataclass
class GpuHistory:
    """One GPU over the window: its samples (``telemetry.dcgm.to_sample``, oldest first), the class its node's
    gputop exported at each step (``(t, class, subclass)``; empty on dcgm-exporter's nodes), and the classifier's
    verdict over the last ``JUDGE_WINDOW_S`` with the evidence it had to do without."""

    node: str
    gpu: str
    t_end: float
    window_s: float
    step_s: float
    samples: list[dict] = field(default_factory=list)
    static: dict = field(default_factory=dict)
    classes: list[tuple[float, str, str | None]] = field(default_factory=list)
    verdict: Verdict | None = None
    missing: list[str] = field(default_factory=list)

    def class_shares(self) -> list[tuple[str, str | None, float]]:
        """The exported classes over the window, the most frequent first: (class, subclass, share 0-1)."""
        counts: dict[tuple[str, str | None], int] = {}
        for _, cls, sub in self.classes:
            counts[(cls, sub)] = counts.get((cls, sub), 0) + 1
        total = sum(counts.values()) or 1
        order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))
        return [(c, s, n / total) for (c, s), n in order]


def one_gpu(selector: str, key: tuple) -> str:
    """``selector`` (``{...}`` or ``name{...}``, without matchers of its own beyond ``__name__``) kept to the GPU
    ``key`` (``cluster_identity.gpu_id``)."""
    head, _, inner = selector.partition("{")
    inner = inner.rstrip("}")
    lead = f"{head}{{{inner + ',' if inner else ''}"
    if key[0] == "uuid":
        _, uuid, instance, job = key
        where = "".join(f',{n}="{S.escape(v)}"' for n, v in (("instance", instance), ("job", job)) if v)
        return " or ".join(f'{lead}{name}="{S.escape(uuid)}"{where}}}' for name in LABELS_UUID)
    _, node, job, gpu = key
    where = f',{LABEL_GPU}="{S.escape(gpu)}"' + (f',job="{S.escape(job)}"' if job else "")
    return " or ".join(f'{lead}{name}="{S.escape(node)}"{where}}}' for name in ("instance", *LABELS_HOSTNAME))


def step_for(window_s: float) -> float:
    return float(max(1, round(window_s / POINTS)))


def read_gpu(client: PrometheusClient, row: C.ClusterGpu, window_s: float = WINDOW_S,
             now: float | None = None) -> GpuHistory:
    """The GPU of a cluster row over the last ``window_s`` (see the module's text). A GPU with no series over the
    window has no samples and no verdict."""
    now = time.time() if now is None else now
    step = step_for(window_s)
    out = GpuHistory(row.node, row.gpu, now, window_s, step)
    g = S.groups(client.query_range(one_gpu(S.SELECTOR, row.key), now - window_s, now, step)).get(row.key)
    if g is not None:
        out.samples, out.static = S.samples(g), S.static(g)
        recent = [s for s in out.samples if s["t"] >= now - JUDGE_WINDOW_S]
        if recent:
            out.verdict, out.missing = C.judge(recent, out.static, set(g["series"]))
    for r in client.query_range(f"({one_gpu('gputop_bottleneck', row.key)}) == 1", now - window_s, now, step):
        if C.whole_gpu(r["metric"]) and gpu_id(r["metric"]) == row.key:
            cls, sub = r["metric"].get("class", "?"), r["metric"].get("subclass") or None
            out.classes += [(float(t), cls, sub) for t, _ in r["values"]]
    out.classes.sort(key=lambda c: (c[0], c[1], c[2] or ""))  # (a row two GPUs fill: a subclass beside none)
    return out
