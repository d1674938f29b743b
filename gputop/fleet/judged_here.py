"""The GPUs of the cluster that export no verdict (dcgm-exporter's nodes), judged in this process: their
``DCGM_FI_*`` series the classifier reads (``series.JUDGE_NAMES``) at the marks of a grid of ``JUDGE_STEP_S`` over
the last ``JUDGE_WINDOW_S``, asked for of their nodes only, judged with the classifier (``analysis/cluster.judge``).

The grid's marks fall every ``JUDGE_STEP_S`` from the first read: the reads within one step reuse the step's
verdicts, and the window is rolled on, not read again: a mark once read does not change, so a step asks only for
the marks since the last one held (one instant query) and for the whole window of a node not held yet.

A step's verdicts are made by the first read within it (``verdicts``), or before it by :meth:`HereJudge.ahead`,
called when a mark has passed (the cluster page's refresher calls it then, between its refreshes): the judging's
~0.4 s of Prometheus' CPU and ~0.7 s of this process' at 2,048 such GPUs then happen once a step, off a refresh's
path (docs/benchmarks.md, "The judged GPUs judged ahead of the refresh"). ``ahead`` judges the GPUs the last read
had to judge; a GPU new since is judged by the next read.
"""

from __future__ import annotations

from collections import defaultdict

from gputop.analysis import cluster as C
from gputop.analysis import cluster_identity as I
from gputop.fleet import series as S
from gputop.format import count
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.errors import SourceError

JUDGE_WINDOW_S = 60.0  # a dcgm-exporter GPU is judged on its last minute ...
JUDGE_STEP_S = 30.0  # ... one sample every 30 s (dcgm-exporter collects every 30 s by default: a finer step only
# repeats the same scrapes, and each sample costs the classifier ~70 us); one judging per step of this grid

Verdict = tuple  # (class, subclass, confidence, missing, the last sample's numbers a job is judged on)


class HereJudge:
    """The judging grid, the kept window of series and the step's verdicts of one Prometheus server's GPUs that
    export none (``client``: ``telemetry/prometheus.PrometheusClient``)."""

    def __init__(self, client):
        self.client = client
        self._phase: float | None = None  # where the grid's marks fall (the first read's time)
        self._judged: dict[tuple, Verdict] = {}  # the step's verdicts ...
        self._judged_at: float | None = None  # ... and the step they were made in
        self._labels: dict[tuple, dict] = {}  # the GPUs the last read judged, with their labels (for ``ahead``)
        self._ahead_notes: list[str] = []  # what ``ahead`` could not read, for the step's first read to say
        self._window: dict[tuple, dict] = {}  # the series at the grid's marks of the judging window ...
        self._window_at: float | None = None  # ... up to this mark ...
        self._window_nodes: set[tuple[str, str]] = set()  # ... of these nodes (label, value)

    def slot(self, now: float) -> float:
        """The grid's mark that starts the step ``now`` is in (the first call sets where marks fall)."""
        if self._phase is None:
            self._phase = now % JUDGE_STEP_S
        return now - (now - self._phase) % JUDGE_STEP_S

    def fresh(self, slot: float) -> bool:
        """Whether the step that starts at ``slot`` has no verdicts yet."""
        return slot != self._judged_at

    def next_mark_in(self, now: float) -> float | None:
        """Seconds from ``now`` to the grid's next mark (None before the first read)."""
        if self._phase is None:
            return None
        return JUDGE_STEP_S - (now - self._phase) % JUDGE_STEP_S

    def meanwhile(self, slot: float) -> tuple[set[tuple[str, str]], dict[tuple, dict]]:
        """The judging window ending at the grid's mark ``slot`` of the nodes the label index says export no verdict
        (rolled on from the one kept); nothing where the index cannot say (a server without ``match[]`` on label
        values, an error: the read's own GPUs are then asked for, and it is said)."""
        try:
            return self._rolled(self._unexported_nodes(slot - JUDGE_WINDOW_S, slot), slot)
        except SourceError:
            self._window_at = None
            return set(), {}

    def verdicts(self, labels_of: dict[tuple, dict], slot: float, meanwhile, notes: list[str]) -> dict[tuple, Verdict]:
        """The verdicts of the GPUs ``labels_of`` (``{key: labels}``) in the step ``slot``: the step's kept ones, the
        others judged on ``meanwhile`` (what :meth:`meanwhile` read beside the read, or None) and their nodes it
        missed. What could not be read is added to ``notes``."""
        fresh = self.fresh(slot)
        judged = {} if fresh else self._judged
        if not fresh and self._ahead_notes:
            notes += self._ahead_notes
        self._ahead_notes = []
        todo = [k for k in labels_of if k not in judged]
        if todo:
            history = self._history_for(todo, labels_of, meanwhile if fresh else None, slot, notes)
            judged.update(self._judge(todo, history))
        self._judged, self._judged_at, self._labels = judged, slot, labels_of
        return judged

    def ahead(self, now: float) -> bool:
        """Judge the GPUs the last read judged for the step ``now`` is in, if not yet: True if it did."""
        if self._phase is None or not self._labels:
            return False
        slot = self.slot(now)
        if not self.fresh(slot):
            return False
        notes: list[str] = []
        keys = list(self._labels)
        history = self._history_for(keys, self._labels, self.meanwhile(slot), slot, notes)
        self._judged, self._judged_at, self._ahead_notes = self._judge(keys, history), slot, notes
        return True

    def _history_for(self, todo, labels_of, meanwhile, end: float, notes: list[str]) -> dict[tuple, dict]:
        """The judging window of the GPUs ``todo``: what was asked for meanwhile, and their nodes it missed."""
        asked, history = meanwhile if meanwhile else (set(), {})
        history = dict(history)  # (the rolling window keeps its own)
        rest: dict[str, set[str]] = defaultdict(set)  # GPUs of nodes not asked for yet (a node with both kinds)
        for key in todo:
            label = I.node_label(labels_of[key])
            if label and (label, labels_of[key][label]) not in asked:
                rest[label].add(labels_of[key][label])
        if rest:
            try:
                history.update(self._history(rest, end - JUDGE_WINDOW_S, end)[1])
            except SourceError as exc:
                notes.append(f"the series of {count(len(todo), 'GPU')} to judge here not read: {exc}")
        return history

    def _rolled(self, nodes: dict[str, set[str]], end: float) -> tuple[set[tuple[str, str]], dict[tuple, dict]]:
        """The nodes' judging window ending at ``end``, rolled on from the one kept: only the grid's marks since
        the kept window's last are asked for of the nodes it holds (one instant query where reads fall within a
        step), the whole window of the others; the marks before the window dropped."""
        first = end - JUDGE_WINDOW_S
        asked = {(label, v) for label, values in nodes.items() for v in values}
        held = self._window_at is not None and first <= self._window_at <= end  # (a clock set back: read it whole)
        kept = asked & self._window_nodes if held else set()
        since = (self._window_at or end) + JUDGE_STEP_S
        history: dict[tuple, dict] = {}
        if kept:
            for key, g in self._window.items():
                label = I.node_label(g["labels"])
                if (label, g["labels"].get(label)) in kept:
                    series = {n: [p for p in points if p[0] >= first] for n, points in g["series"].items()}
                    history[key] = {**g, "series": {n: points for n, points in series.items() if points},
                                    "jobs": list(g["jobs"])}
            if since <= end:
                S.append_points(history, self._history(_nodes_of(kept), since, end)[1])
        if asked - kept:
            S.append_points(history, self._history(_nodes_of(asked - kept), first, end)[1])
        self._window, self._window_at, self._window_nodes = history, end, asked
        return asked, history

    def _unexported_nodes(self, start: float, end: float) -> dict[str, set[str]]:
        """The nodes with DCGM series and no gputop verdict over [start, end] by the label index, ``{host label:
        {values}}`` (a node named only by ``instance`` is not there)."""
        nodes = {}
        for label in F.LABELS_HOSTNAME:
            dcgm = set(self.client.label_values(label, S.SELECTOR, start=start, end=end))
            if dcgm:
                nodes[label] = dcgm - set(self.client.label_values(label, "gputop_bottleneck", start=start, end=end))
        return nodes

    def _history(self, nodes: dict[str, set[str]], start: float, end: float) -> tuple[set[tuple[str, str]],
                                                                                      dict[tuple, dict]]:
        """The nodes' DCGM series at the grid's marks from ``start`` to ``end`` (one mark: an instant query), by
        GPU; and the ``(label, node)`` pairs asked for."""
        asked = {(label, v) for label, values in nodes.items() for v in values}
        if not asked:
            return asked, {}
        promql = S.by_gpu(S.on_nodes(nodes), S.ID_LABELS + ("modelName",))
        if end - start < JUDGE_STEP_S:
            return asked, S.groups(self.client.query(promql, at=end))
        return asked, S.groups(self.client.query_range(promql, start, end, JUDGE_STEP_S))

    @staticmethod
    def _judge(keys: list[tuple], history: dict[tuple, dict]) -> dict[tuple, Verdict]:
        """GPUs without an exported verdict judged here on their window of series: ``{key: (class, subclass,
        confidence, missing, the last sample's numbers a job is judged on)}`` (the nodes' GPUs with a verdict may be in
        ``history`` too: not judged here)."""
        out = {}
        for key in keys:
            g = history.get(key)
            if g is None:  # series now, none over the last minute at the step's marks: nothing to judge
                out[key] = (None, None, None, (f"no DCGM_FI_* series over the last {JUDGE_WINDOW_S:g} s to judge",),
                            {})
                continue
            samples = S.samples(g)
            verdict, missing = C.judge(samples, S.static(g), set(g["series"]))
            last = samples[-1]  # what a job is judged on that the rows do not ask for (EXTRAS)
            nvlink = [last.get("nvlink_tx_bps"), last.get("nvlink_rx_bps")]
            extras = {"sm_clock_mhz": last.get("sm_clock_mhz"), "pcie_tx_bps": last.get("pcie_tx_bps"),
                      "pcie_rx_bps": last.get("pcie_rx_bps"), "nvlink_bps": None if None in nvlink else sum(nvlink)}
            out[key] = (verdict.cls, verdict.subclass, verdict.confidence, tuple(missing), extras)
        return out


def _nodes_of(pairs: set[tuple[str, str]]) -> dict[str, set[str]]:
    """``{label: {values}}`` of ``(label, value)`` pairs."""
    out: dict[str, set[str]] = defaultdict(set)
    for label, value in pairs:
        out[label].add(value)
    return out
