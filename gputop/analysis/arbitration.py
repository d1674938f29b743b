"""Which class suppresses which: one table, read in order, and the choice of the main class.

Each rule scores a window on its own (gputop/analysis/rules/). Classes then compete for the same evidence: a copy
keeps NVML's duty cycle up as kernels do, NCCL's waiting kernels look like tiny ones, a quiet GPU fits both a busy
host and input starvation. :data:`TABLE` says, row by row, which class damps which, by how much and why: the target
score (or a named part of it) is multiplied by the row's factor, by default ``1 - max(what the row reads)``.

A row reads a class's score as it stands (``Cls``), a part of it (:class:`Part`), or its own score before the table
(:class:`Own`). The rows are applied in their order, and the table is checked at import: no row reads a score or a
part that a later row changes, so the order is the one in which what each row reads is final. A rule's score is its
parts settled (the rule's ``settle``) times the factors of the rows that target the whole score.

:func:`judge` scores every rule and applies the table (a :class:`Board`); :func:`pick` chooses the main class: the
best base class (ties: :data:`TIES`; hysteresis: ``prefer``), unless an overlay (throttled, memory-capacity) takes
over. Pure: no NVML, no Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gputop.analysis import thresholds as T
from gputop.analysis.rules import RULES, WINDOW_RULES
from gputop.analysis.rules.base import Score
from gputop.analysis.vocabulary import Cls

COMPUTE, MEMORY, LATENCY = Cls.COMPUTE_BOUND, Cls.MEMORY_BOUND, Cls.LATENCY_BOUND
STARVED, HOST, PCIE, COMMS = Cls.INPUT_STARVED, Cls.HOST_BOUND, Cls.PCIE_BOUND, Cls.COMMS_BOUND

# A nearly idle GPU fed in rare bursts fits input-starved too; the more idle the GPU, the more the host is the
# whole story: input-starved's score is scaled by 1 - 0.5 x (how nearly idle the GPU is), so it stays listed
# as mixed while host-bound wins.
HOST_OVER_STARVED = 0.5


@dataclass(frozen=True)
class Part:
    """A named part of a class's score (the rule's ``Score.parts``), as it stands."""

    cls: Cls
    name: str


@dataclass(frozen=True)
class Own:
    """A class's own score, before the table."""

    cls: Cls


@dataclass(frozen=True)
class Row:
    """``target`` (a class's score, or a :class:`Part`) is multiplied by ``factor(board)`` (default: 1 - the
    highest of what it ``reads``); ``how`` says the factor for people, ``why`` the reason."""

    reads: tuple
    target: Cls | Part
    why: str
    factor: Callable | None = None
    how: str = ""

    def __post_init__(self):  # the default factor, made once: the table runs for every sample judged
        if self.factor is None:
            getters = [_getter(r) for r in self.reads]
            object.__setattr__(self, "factor", lambda board: 1 - max([g(board) for g in getters]))
            if not self.how:
                object.__setattr__(self, "how", "x (1 - max(" + ", ".join(map(_name, self.reads)) + "))")

    def apply(self, board: "Board") -> None:
        target = self.target
        if target.__class__ is Part:
            if target.name in board.parts[target.cls]:  # (memory-bound has no parts without GPM)
                board.damp_part(target.cls, target.name, self.factor(board))
        else:
            board.damp(target, self.factor(board))


def _name(ref) -> str:
    if isinstance(ref, Part):
        return f"{ref.cls}'s {ref.name} part"
    if isinstance(ref, Own):
        return f"{ref.cls} before the table"
    return str(ref)


def _getter(ref) -> Callable:
    if isinstance(ref, Part):
        return lambda board: board.parts[ref.cls].get(ref.name, 0.0)
    if isinstance(ref, Own):
        return lambda board: board.own(ref.cls)
    return lambda board: board.value(ref)


def _host_over_starved(b: "Board") -> float:
    if b.value(HOST) > 0 and not b.part(STARVED, "report") > 0:
        return 1 - HOST_OVER_STARVED * b.own_score(HOST).facts["quiet"]
    return 1.0


TABLE = (
    Row((COMPUTE, Part(MEMORY, "dram")), Part(MEMORY, "cache"),
        "SMs full of warps wait on on-chip memory only where no pipe and not DRAM is near its peak",
        how="x (1 - max(compute-bound, memory-bound's DRAM part))"),
    Row((COMPUTE,), Part(MEMORY, "mix"),
        "a kernel mix whose pipes are near their peak is compute work: fusing its kernels would not help"),
    Row((COMPUTE, MEMORY), PCIE,
        "copies overlapped with kernels at a unit's peak are not the limit, the kernels are (said in a note)"),
    Row((Own(PCIE),), Part(LATENCY, "launch"),
        "NVML's duty cycle counts copies too: a copy with no kernel running is not a launch problem"),
    Row((COMPUTE, MEMORY, Own(PCIE)), Part(LATENCY, "busy"),
        "busy with nothing near a peak: not where a pipe, DRAM or the PCIe link is"),
    Row((Part(LATENCY, "launch"),), Part(STARVED, "bursts"),
        "kernels in nearly every sample with the SMs barely busy for their time are a steady trickle of tiny "
        "kernels (a decode loop), not a GPU waiting for input between bursts"),
    Row((Own(PCIE),), Part(STARVED, "bursts"), "the gaps between kernels are copies: the GPU is transferring"),
    Row((Part(LATENCY, "launch"),), Part(HOST, "host"), "the host's busy loop is launching tiny kernels"),
    Row((Own(PCIE),), Part(HOST, "host"), "a GPU copying is not idle"),
    Row((HOST, Part(STARVED, "report")), STARVED,
        "a GPU idle nearly all the time: the host is the story, not the bursts it feeds (input-starved stays "
        "listed as mixed); a workload's own report of its data wait stands",
        factor=_host_over_starved,
        how=f"x (1 - {HOST_OVER_STARVED} x how nearly idle the GPU is) where host-bound scores at all and the "
            "workload reported no data wait"),
    Row((Own(PCIE),), Cls.IDLE, "a GPU copying is not idle"),
    Row((HOST,), Cls.IDLE, "the GPU waits on a busy host: host-bound, not idle"),
    Row((COMPUTE, MEMORY), COMMS,
        "NVLink busy under a pipe or DRAM near its peak: the communication is hidden behind the GPU's own work "
        "(said in a note, comms listed as mixed)"),
    Row((COMMS,), LATENCY, "NCCL's kernels keep a few SMs busy while they wait on the link"),
    Row((COMMS,), STARVED, "gaps while peers exchange data (and a job's tree: every rank's CPU)"),
    Row((Cls.STALLED,), LATENCY, "NCCL's kernels waiting for a peer that never comes look like tiny kernels"),
)

# Which class wins a tie of scores (and strengths): the first. A class not listed loses every tie.
TIES = (Cls.THROTTLED, Cls.MEMORY_CAPACITY, COMMS, Cls.STALLED, PCIE, MEMORY, COMPUTE, HOST, STARVED, LATENCY,
        Cls.IDLE)


def rank(cls) -> int:
    """A class's place in :data:`TIES` (lower wins a tie)."""
    return TIES.index(cls) if cls in TIES else len(TIES)


def _check(table) -> None:
    """No row reads a score (or a part) that a later row changes: the order makes what each row reads final."""
    for i, row in enumerate(table):
        for r in row.reads:
            for later in table[i + 1:]:
                t = later.target
                changed = (t == r if isinstance(r, Part) else
                           isinstance(r, Cls) and (t == r or (isinstance(t, Part) and t.cls == r)))
                if changed:
                    raise ValueError(f"arbitration row {i} ({row.why[:40]}...) reads {r}, which a later row changes")


_check(TABLE)


class Board:
    """Every class's score while the table is applied: the parts of each, and the factors on its whole score (a
    score is its parts settled by its rule, times those factors in the table's order)."""

    def __init__(self, own: dict[Cls, Score]):
        self.scored = own
        self.parts = {c: dict(s.parts) if s.parts else {"score": s.value} for c, s in own.items()}
        self.factors: dict[Cls, list[float]] = {c: [] for c in own}
        self._own = {c: RULES[c].settle(self.parts[c], s) for c, s in own.items()}
        self._settled: dict[Cls, tuple] = dict(self._own)
        self._value = {c: v for c, (v, _) in self._own.items()}  # each score as it stands
        self._dirty: set = set()  # classes whose parts changed since they were settled
        self._scores: dict | None = None

    def own_score(self, cls: Cls) -> Score:
        """The rule's :class:`Score` (its facts, its strength)."""
        return self.scored[cls]

    def own(self, cls: Cls) -> float:
        return self._own[cls][0]

    def part(self, cls: Cls, name: str) -> float:
        return self.parts[cls].get(name, 0.0)

    def value(self, cls: Cls) -> float:
        if self._dirty:
            self._settle()
        return self._value[cls]

    def sub(self, cls: Cls):
        if self._dirty:
            self._settle()
        return self._settled[cls][1]

    def read(self, ref) -> float:
        kind = ref.__class__
        if kind is Part:
            return self.parts[ref.cls].get(ref.name, 0.0)
        if kind is Own:
            return self._own[ref.cls][0]
        return self.value(ref)

    def damp(self, cls: Cls, factor: float) -> None:
        """The class's whole score times ``factor``."""
        if self._dirty:
            self._settle()
        self.factors[cls].append(factor)
        self._value[cls] *= factor
        self._scores = None

    def damp_part(self, cls: Cls, name: str, factor: float) -> None:
        """A part of the class's score times ``factor``: the rule settles its parts again (when next read)."""
        self.parts[cls][name] *= factor
        self._dirty.add(cls)
        self._scores = None

    def _settle(self) -> None:
        for cls in self._dirty:
            self._settled[cls] = RULES[cls].settle(self.parts[cls], self.scored[cls])
            v = self._settled[cls][0]
            for f in self.factors[cls]:
                v *= f
            self._value[cls] = v
        self._dirty.clear()

    @property
    def scores(self) -> dict:
        """{class: score} rounded as a verdict keeps them, in the vocabulary's order."""
        if self._scores is None:
            if self._dirty:
                self._settle()
            self._scores = {c: round(v, 3) for c, v in self._value.items()}
        return self._scores

    @property
    def subs(self) -> dict:
        if self._dirty:
            self._settle()
        return {c: s for c, (_, s) in self._settled.items()}

    def strength(self, cls: Cls) -> float:
        return self.scored[cls].strength


def judge(ev: dict, hints: dict | None = None) -> Board:
    """Every rule's score of the window's evidence ``ev``, then the table: the :class:`Board`."""
    hints = hints or {}
    board = Board({c: r.score(ev, hints) for c, r in WINDOW_RULES.items()})
    for row in TABLE:
        row.apply(board)
    return board


BASES = tuple(c for c, r in WINDOW_RULES.items() if not r.overlay)  # what the GPU does; the overlays qualify it
OVERLAYS = tuple(sorted((c for c, r in WINDOW_RULES.items() if r.overlay), key=rank))


def best(board: Board, classes) -> Cls:
    """The highest-scoring of ``classes``; ties: the higher strength, then :data:`TIES`."""
    s = board.scores
    return max(classes, key=lambda c: (s[c], board.strength(c), -rank(c)))


def pick(board: Board, ev: dict, hints: dict, prefer=None) -> Cls:
    """The main class: an overlay that takes over (in :data:`TIES` order), else the best base class.

    ``prefer``: the class shown so far for this segment (hysteresis): it stays while it scores within
    ``STICKY_MARGIN`` of the best base class and fits (>= ``MIXED_MIN_SCORE``)."""
    s = board.scores
    base = best(board, BASES)
    if (prefer in BASES and prefer != base and s.get(prefer, 0.0) >= T.MIXED_MIN_SCORE
            and s[prefer] >= s[base] - T.STICKY_MARGIN):
        base = Cls(prefer)
    for c in OVERLAYS:
        if RULES[c].takes_over(ev, board, base, hints):
            return c
    return base
