"""The live verdict: the classifier over the current regime of the work, following its changes.

:class:`LiveVerdict` is fed the recent ticks at every tick (``update(window)``, by :class:`LiveNode`); it runs the
change detector (:mod:`.segments`) over the ticks it has not seen and judges the current segment (since
the last change, at most its last ``LIVE_MAX_S``): again once every ``LIVE_EVERY_S`` (every
``LIVE_SLIDING_EVERY_S`` once the regime is older than ``LIVE_MAX_S``: its window then slides, and each
judgement shares all but a second or two of its ticks with the one before), and at once when a change is
confirmed. A segment younger than ``LIVE_MIN_S`` is not judged yet (the previous verdict stays,
marked ``previous``); the first sample after a change is left out (its counters average the two
regimes). Within a segment the class shown is sticky (hysteresis, ``prefer`` of
:func:`.classify.classify`). The verdict's window (``t_start``/``t_end``) is the ticks it judged: a frontend
says so and marks it on its charts, and every number of its evidence is a mean over exactly those ticks.

:class:`LiveNode` holds one per GPU of a node and is what the frontends read: a sampler listener, fed each tick
once on the sampler's thread, judging the node's jobs together (:func:`.comms.judge_node`), and handing out an
immutable :class:`NodeSnapshot` that the TUI (its panel and strip: ``gputop``, ``--serve``) and ``--export``
read at any time from any thread; nothing is judged where it is read.

Pure: no NVML, no Textual.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from gputop.analysis import thresholds as T
from gputop.analysis.classify import classify
from gputop.analysis.comms import job_pids, judge_node, latest_processes
from gputop.analysis.rank_stacks import job_records
from gputop.analysis.rules.stalled import describe as describe_stall
from gputop.analysis.segments import ChangeDetector
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import Cls


class LiveVerdict:
    """The live verdict of one GPU position for one watched process (``reset`` for another)."""

    def __init__(self):
        self.reset()

    def reset(self, key=None) -> None:
        self.key = key
        self.detector: ChangeDetector | None = None
        self.fed_t: float | None = None  # newest tick fed to the detector
        self.verdict: Verdict | None = None
        self.judged_t: float | None = None  # tick time of the last judgement
        self.segment_start: float | None = None  # start of the segment the verdict judged
        self.previous = False  # the verdict is the previous segment's (the current one is too young)
        self.changed_at: float | None = None  # tick time a change was last confirmed

    def update(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
               watched_pid=None, every_s: float = T.LIVE_EVERY_S) -> Verdict | None:
        """The verdict after the ticks of ``window`` (the monitor's last ``LIVE_MAX_S`` or more, oldest
        first; ticks already seen are skipped). A regime that has not changed is judged again every
        ``every_s`` (a change at once)."""
        if not window:
            return self.verdict
        key = (gpu_pos, watched_pid, id(static), id(peaks))
        if key != self.key or (self.fed_t is not None and window[-1]["t"] < self.fed_t):
            self.reset(key)  # another GPU or process, or time went back (a replay restarted)
        if self.detector is None:
            self.detector = ChangeDetector(gpu_pos, peaks, watched_pid)
        changed = False
        new = len(window)  # the ticks not fed yet are at the end: look at those only (called every frame)
        while new > 0 and (self.fed_t is None or window[new - 1]["t"] > self.fed_t):
            new -= 1
        for tick in window[new:]:
            self.fed_t = tick["t"]
            if self.detector.push(tick):
                changed = True
                self.changed_at = tick["t"]
        now = window[-1]["t"]
        start = self.detector.start_t if self.detector.start_t is not None else window[0]["t"]
        young = now - start < T.LIVE_MIN_S and self.verdict is not None and start != self.segment_start
        if young:  # the new regime is too short to judge: the previous one, up to where it ended
            if changed and self.segment_start is not None:
                before = [t for t in window if max(self.segment_start, now - T.LIVE_MAX_S) <= t["t"] < start]
                if before:
                    self.verdict = classify(before, static, peaks, gpu=gpu_pos, watched_pid=watched_pid,
                                            prefer=self.verdict.cls)
            self.previous = True
            return self.verdict
        if now - start > T.LIVE_MAX_S:  # a long steady regime: its window slides, judge it less often
            every_s = max(every_s, T.LIVE_SLIDING_EVERY_S)
        due = (changed or self.judged_t is None or start != self.segment_start
               or not 0 <= now - self.judged_t < every_s)
        if not due:
            return self.verdict
        lo = max(start, now - T.LIVE_MAX_S)
        ticks = [t for t in window if t["t"] >= lo]
        if start in self.detector.changes and len(ticks) > T.MIN_SAMPLES:
            ticks = ticks[1:]  # the first sample of a change straddles it (its counters average both regimes)
        prefer = self.verdict.cls if self.verdict is not None and start == self.segment_start else None
        self.verdict = classify(ticks, static, peaks, gpu=gpu_pos, watched_pid=watched_pid, prefer=prefer)
        if self.verdict.cls == Cls.STALLED:  # since the regime began, however long ago (the window is at most 30 s)
            self.verdict.evidence["stalled_for_s"] = round(now - start, 1)
            self.verdict.evidence_text = describe_stall(self.verdict.subclass, self.verdict.evidence, self.verdict.job)
        self.judged_t, self.segment_start, self.previous = now, start, False
        return self.verdict


def window_words(v: Verdict | None, now: float | None, previous: bool = False, clock=None) -> str:
    """Which window a verdict judged, for people: 'last 2.0 s', 'since 12:03:04, 5.1 s', or
    'previous phase, 4.0 s until 3.2 s ago'. ``clock(t)`` turns a tick time into a wall-clock 'HH:MM:SS'
    (None: the relative form only)."""
    if v is None or v.t_start is None or v.t_end is None:
        return ""
    length = max(0.0, v.t_end - v.t_start)
    if previous and now is not None:
        return f"previous phase: {length:.1f} s, until {max(0.0, now - v.t_end):.1f} s ago"
    if now is not None and now - v.t_end > T.LIVE_CURRENT_S:  # judged again within that: current
        return f"{length:.1f} s, until {now - v.t_end:.1f} s ago"
    if clock is not None:
        return f"since {clock(v.t_start)}, {length:.1f} s"
    return f"last {length:.1f} s"


@dataclass(frozen=True)
class Judged:
    """One GPU of a :class:`NodeSnapshot`: its verdict as the node last judged it (a copy, never changed
    afterwards: the sampler's thread goes on with its own), the tick time of that judgement, whether it is the
    previous phase's (the current one too young to judge), and why there is none (a classifier error)."""

    pos: int  # the GPU's position in the source's ticks
    verdict: Verdict | None = None
    judged_t: float | None = None
    previous: bool = False
    error: str | None = None

    def span(self) -> tuple[float, float] | None:
        """(t_start, t_end) of the window the verdict judged, in tick time (None: no verdict)."""
        v = self.verdict
        return None if v is None or v.t_start is None or v.t_end is None else (v.t_start, v.t_end)


@dataclass(frozen=True)
class NodeSnapshot:
    """What :class:`LiveNode` knew after tick time ``t``: one :class:`Judged` per GPU, in the node's order."""

    t: float | None = None  # the newest tick fed (None: none yet)
    gpus: tuple[Judged, ...] = ()

    def verdicts(self) -> list[Verdict | None]:
        return [g.verdict for g in self.gpus]

    def words(self, i: int, clock=None) -> str:
        """Which window GPU ``i``'s verdict judged, for people (:func:`window_words`)."""
        g = self.gpus[i] if i < len(self.gpus) else None
        return "" if g is None else window_words(g.verdict, self.t, g.previous, clock)


def _carries_processes(tick: dict) -> bool:
    """Whether ``tick`` lists any GPU's processes (they say the node's jobs: NVML's lists come once a second)."""
    gpus = tick.get("gpus")
    return isinstance(gpus, list) and any(isinstance(g, dict) and g.get("processes") is not None for g in gpus)


@dataclass(frozen=True)
class StacksRead:
    """A read of the ranks' stacks that named (or failed to name) the culprit of a stall, as the live node used it
    (``LiveNode.on_stacks``): the tick time ``t`` it was first used at, when the stall began (``since``, tick time:
    the earliest stalled GPU's regime start), the read ({pid: {"stack", "rank"}}), and each GPU's record."""

    t: float
    since: float
    read: dict
    records: dict
    stalled: bool = True  # False: read because the job's GPUs were held idle (no stall)


IDLE_JOB_S = 20.0  # GPUs held by processes and idle this long (a job that waits for a rank): its stacks are read


def node_pids(node, window: list[dict]) -> dict:
    """{GPU name: the pids NVML last listed on it} of the node's GPUs (a rank that exited keeps the pid it had)."""
    procs = latest_processes(window, node.positions, nonempty=True)
    return {name: [int(p["pid"]) for p in procs.get(pos) or [] if p.get("pid") is not None]
            for name, pos in zip(node.names, node.positions)}


def node_job_pids(node, window: list[dict]) -> list[dict]:
    """Each job of the node (gputop/analysis/comms.py's ``job_pids``) as {GPU name: its pids of that job}."""
    return [{node.names[i]: ps for i, ps in job.items()} for job in job_pids(window, node.positions)]


def _held_up_since(verdicts: list, job: dict[int, list[int]], t: float) -> float | None:
    """When this job (``job``: {GPU index: its pids}) began to wait: its stalled GPUs' earliest stall, else, where
    two of its GPUs or more have been idle for ``IDLE_JOB_S`` (a job waiting for a rank that never joined), their
    earliest idle start; None when it does not wait."""
    stalled = [verdicts[i] for i in job if verdicts[i] is not None and verdicts[i].cls == Cls.STALLED]
    if stalled:
        return min(t - (v.evidence.get("stalled_for_s") or 0.0) for v in stalled)
    idle = [verdicts[i] for i in job if verdicts[i] is not None and verdicts[i].cls == Cls.IDLE
            and verdicts[i].t_start is not None and verdicts[i].t_end - verdicts[i].t_start >= IDLE_JOB_S]
    return min(v.t_start for v in idle) if len(idle) >= 2 else None


def _stack_records_of(node, verdicts: list, window: list[dict]) -> dict | None:
    """For each job of the node (its processes' job: gputop/analysis/comms.py's ``job_pids``) that waits (a GPU of
    it stalled, or two GPUs or more of it held idle for ``IDLE_JOB_S``: a job waiting for a rank that never joined):
    ask ``node.stacks`` for the stacks of its processes, and turn what it read since the wait began into each of its
    GPUs' culprit record (gputop/analysis/rank_stacks.py), one job's ranks judged apart from another's; None when no
    job waits or nothing was read yet. A read used for the first time is handed to ``node.on_stacks`` (a run keeps
    it: who was named, and when)."""
    if node.stacks is None:
        return None
    t = window[-1]["t"]
    waiting, held = [], {}
    for job in job_pids(window, node.positions):
        since = _held_up_since(verdicts, job, t)
        if since is None:
            continue
        # the wait began when first seen, while it lasts: a stalled GPU's regime found to start again later (its
        # stall's age then shorter) must not make the read that named the culprit one "from before the wait" (on 4
        # H100s the command's culprit line came and went within a second, 15 s into a stall)
        key = frozenset(p for ps in job.values() for p in ps)
        held[key] = since = min(since, node.waits_since.get(key, since))
        waiting.append((job, since))
    node.waits_since = held
    if not waiting:
        return None
    node.stacks.ask([p for job, _ in waiting for ps in job.values() for p in ps])
    read = node.stacks.latest(t)
    read_at = node.stacks.read_at
    if not read or read_at is None:
        return None
    classes = {name: (v.cls if v is not None else None) for name, v in zip(node.names, verdicts)}
    records: dict = {}
    for job, since in waiting:
        if read_at < since:  # a read from before this job's wait says nothing of it
            continue
        records.update(job_records({node.names[i]: ps for i, ps in job.items()}, classes, read))
    if not records:
        return None
    if node.on_stacks is not None and read_at != node.stacks_used_at:
        node.stacks_used_at = read_at
        stalled = any(v is not None and v.cls == Cls.STALLED for v in verdicts)
        node.on_stacks(StacksRead(t, min(since for _, since in waiting), read, records, stalled))
    return records


def _copied(v: Verdict | None) -> Verdict | None:
    """A copy of ``v`` whose fields may be changed without changing ``v``'s."""
    if v is None:
        return None
    out = copy.copy(v)
    out.evidence, out.scores, out.job = dict(v.evidence), dict(v.scores), copy.deepcopy(v.job)
    out.mixed, out.missing, out.notes = list(v.mixed), list(v.missing), list(v.notes)
    return out


class LiveNode:
    """The live verdicts of a node's GPUs: ``positions`` in the source's ticks, their ``statics`` and ``peaks``,
    ``names`` their NVML indices (default each static's ``index``). A sampler listener (:meth:`attach`): each
    tick is fed once, on the sampler's thread, to one :class:`LiveVerdict` per GPU over the last ``LIVE_MAX_S``
    of ticks; ``watched_pid()`` names the process they diagnose as the feeding one (read at each tick: a
    workload or command that starts). ``selected``: the index of the GPU whose steady regime is judged again
    every ``LIVE_EVERY_S``, the others' every ``LIVE_STRIP_EVERY_S`` (None: every GPU every ``LIVE_EVERY_S``).
    When a GPU was judged, or the tick carries process lists (which say the node's jobs), the node's jobs are
    judged together and a new :meth:`snapshot` is published; any other tick costs the change detectors' step.
    ``stacks``: a reader of processes' stacks (gputop/session/stacks.py's ``StackWatch``: ``ask(pids)`` without
    waiting, ``latest()``), asked for the ranks of every GPU of the node while one of them is stalled; what it
    last read names the culprit (gputop/analysis/rank_stacks.py). None: the telemetry's verdicts alone.
    ``on_stacks(StacksRead)``: called on the sampler's thread with each new read the node names a culprit from."""

    def __init__(self, positions: list[int], statics: list[dict], peaks: list[dict], names: list[int] | None = None,
                 watched_pid: Callable[[], int | None] | None = None, selected: int | None = None, stacks=None,
                 on_stacks: Callable[[StacksRead], None] | None = None):
        self.positions, self.statics, self.peaks = list(positions), list(statics), list(peaks)
        self.names = ([s.get("index", p) for p, s in zip(self.positions, self.statics)] if names is None
                      else list(names))
        self.watched_pid = watched_pid
        self.selected = selected
        self.stacks, self.on_stacks = stacks, on_stacks
        self.stacks_used_at: float | None = None  # the read_at of the last read handed to on_stacks
        self.waits_since: dict[frozenset, float] = {}  # each waiting job's (its pids) wait's start, while it waits
        self.lives = [LiveVerdict() for _ in self.positions]
        self.errors: list[str | None] = [None] * len(self.positions)
        self.node_error: str | None = None  # judging the jobs together failed (the GPUs' own verdicts stand)
        self.ticks_fed = 0
        self.judgements = 0  # ticks on which a GPU was judged
        self._window: deque[dict] = deque()
        self._lock = threading.Lock()  # the sampler's thread feeds, the app's selects
        self._snapshot = NodeSnapshot(None, tuple(Judged(p) for p in self.positions))

    def attach(self, sampler) -> LiveNode:
        """Be fed by ``sampler`` (a :class:`gputop.telemetry.sampler.Sampler`) at each of its ticks from now on,
        after the last ``LIVE_MAX_S`` of ticks it already holds (a sampler already running: a command's session,
        ``--export`` beside ``--run``), judged at once as one batch."""
        with self._lock:  # a tick the sampler's thread delivers meanwhile waits, and is not fed twice (feed)
            sampler.listeners.append(self.feed)
            held = sampler.window(T.LIVE_MAX_S)
            if held and not self._window:
                self._window.extend(held)
                self.ticks_fed += len(held)
                self._judge(True)
        return self

    def snapshot(self) -> NodeSnapshot:
        """The latest verdicts (any thread: the snapshot is replaced whole, never changed)."""
        return self._snapshot

    def feed(self, tick: dict) -> None:
        """One tick (the sampler's listener; also callable by hand, one tick after another)."""
        with self._lock:
            w = self._window
            if w and tick is w[-1]:  # the sampler's tick in flight while attach read the ticks it held
                return
            if w and tick["t"] < w[-1]["t"]:  # time went back (a replay restarted): the verdicts start afresh
                w.clear()
            w.append(tick)
            lo = tick["t"] - T.LIVE_MAX_S
            while w[0]["t"] < lo:
                w.popleft()
            self.ticks_fed += 1
            self._judge(_carries_processes(tick))

    def select(self, i: int) -> None:
        """GPU ``i`` is judged every ``LIVE_EVERY_S`` from now on, and at once if it was last judged longer ago
        than that (as its next tick would: a GPU just selected never shows the strip's older verdict)."""
        with self._lock:
            self.selected = i
            if self._window:
                self._judge(False)

    def _stack_records(self, verdicts: list, window: list[dict]) -> dict | None:
        return _stack_records_of(self, verdicts, window)

    def _judge(self, jobs_changed: bool) -> None:
        """Each GPU's verdict where due, then (where one was judged or ``jobs_changed``) the node's, published."""
        t = self._window[-1]["t"]
        if not self.lives:
            self._snapshot = replace(self._snapshot, t=t)
            return
        window = list(self._window)
        pid = self.watched_pid() if self.watched_pid is not None else None
        judged = False
        for i, live in enumerate(self.lives):
            was = (live.verdict, live.judged_t, live.previous)
            every_s = T.LIVE_EVERY_S if self.selected in (None, i) else T.LIVE_STRIP_EVERY_S
            try:
                live.update(window, self.statics[i], self.peaks[i], gpu_pos=self.positions[i], watched_pid=pid,
                            every_s=every_s)
            except Exception as exc:  # a classifier bug on odd data: this GPU has no verdict, the others go on
                self.errors[i] = f"{type(exc).__name__}: {exc}"
                live.reset()
                judged = True
            judged |= live.verdict is not was[0] or live.judged_t != was[1] or live.previous != was[2]
        if judged:
            self.judgements += 1
        elif not jobs_changed:
            self._snapshot = replace(self._snapshot, t=t)
            return
        # the node's jobs (by process group): a stalled collective's waiting and left GPUs, a straggler, judged
        # afresh each time on copies of the GPUs' own verdicts (it annotates what it is given, once: a verdict
        # annotated by an older judgement of the node would keep that node's groups)
        verdicts = [_copied(live.verdict) for live in self.lives]
        try:
            verdicts = judge_node(verdicts, window, self.positions, self.names, self._stack_records(verdicts, window))
            self.node_error = None
        except Exception as exc:
            self.node_error = f"{type(exc).__name__}: {exc}"
        for i, v in enumerate(verdicts):
            if v is not None:
                self.errors[i] = None
        last = self._snapshot.gpus
        self._snapshot = NodeSnapshot(t, tuple(
            Judged(pos, was.verdict if v is not None and v == was.verdict else v, live.judged_t,
                   live.previous, err)  # an unchanged verdict stays the same object (a reader redraws on a new one)
            for pos, v, live, err, was in zip(self.positions, verdicts, self.lives, self.errors, last)))
