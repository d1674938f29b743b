"""What a rule is made of: :class:`Rule` (one per class, built at the bottom of its module), :class:`Score` (what
its score function returns), :class:`Example` (a real trace snippet that must, or must not, fire it), and the soft
threshold :func:`ramp` every rule scores with; what several rules share (the no-GPM fallback, the words of a
percentage). Pure: no NVML, no Textual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import Key
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import pct


TRACES = "tests/data/traces/"  # where the examples' traces are (paths under the checkout)
MULTI2, MULTI4 = TRACES + "corpus_multi_h100x2/", TRACES + "corpus_multi_h100x4/"  # the multi-GPU corpora


def ramp(x: float | None, lohi: tuple[float, float]) -> float:
    """0 at or below lo, 1 at or above hi, linear between (None -> 0): a value near a boundary gives a middling
    score and a lower confidence instead of a flip."""
    lo, hi = lohi
    if x is None:
        return 0.0
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (x - lo) / (hi - lo)


def has_gpm(ev: dict) -> bool:
    """Did the window have GPM's counters (SM activity, the pipes, DRAM)? Hopper or newer."""
    return ev.get("sm_active_pct") is not None


def no_gpm(ev: dict) -> tuple[float, float, float]:
    """(busy, real, memory share) of a window without GPM (pre-Hopper): kernels resident nearly all the time,
    board power high enough for real SM work (1 where power is unknown), the memory controller's share
    (thresholds.FALLBACK_*: shared by compute-, memory- and latency-bound)."""
    busy = ramp(ev.get("util_gpu_pct"), T.FALLBACK_BUSY_UTIL_PCT)
    pf = ev.get("power_fraction")
    real = ramp(pf, T.FALLBACK_POWER_FRACTION) if pf is not None else 1.0
    return busy, real, ramp(ev.get("util_mem_pct"), T.FALLBACK_MEM_UTIL_PCT)


def pct_text(v, digits=0):
    """A percentage for a sentence: two decimals below 1% ('0.03%'), whole numbers above."""
    if v is not None and 0.01 <= v < 1 and digits == 0:
        return pct(v, 2)
    return pct(v, digits)


def power_pct(ev: dict) -> float | None:
    """Board power as % of its limit (None where unknown)."""
    return 100 * ev["power_fraction"] if ev.get("power_fraction") is not None else None


def watts(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


@dataclass
class Score:
    """A rule's own score of a window (0..1), before the arbitration table (gputop/analysis/arbitration.py).

    ``parts``: named parts of the score that a row of the table reads or damps (latency-bound's "launch"); the
    rule's ``settle`` makes its score and subclass of them once the table has damped them. ``strength``: how near
    its peak the rule's unit is (compute- and memory-bound), which breaks a tie between equal scores. ``facts``:
    what the rule found on the way, for its own notes."""

    value: float
    sub: Sub | None = None
    parts: dict = field(default_factory=dict)
    strength: float = 0.0
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Example:
    """A window of a recorded trace that must fire its rule (``fires``: the classifier's verdict is the rule's class,
    of subclass ``sub`` where given), or must not. ``trace``: a path under the checkout (tests/data/traces/ or
    gputop/data/); ``gpu``: the GPU's position in the trace; ``t0``, ``t1``: the span of tick times [t0, t1);
    ``hints``: what the run knew besides the ticks (``{"oom": True}``, ``{"on_gpu": True}``). ``judged``: "window"
    (the classifier on that window), or "run": the GPU's verdict in the trace's run document (``gputop --replay F
    --json``: its timeline, and the job's GPUs judged together), how a job-level rule's examples are read; then
    ``t0``/``t1`` are not used."""

    trace: str
    gpu: int
    t0: float
    t1: float
    fires: bool
    why: str
    sub: Sub | None = None
    hints: dict | None = None
    judged: str = "window"


def _none(*_args, **_kw):
    return []


def _no_measure(*_args, **_kw) -> dict:
    return {}


def _one_part(parts: dict, score: Score) -> tuple[float, Sub | None]:
    return parts["score"], score.sub


def _trusted(_ev: dict, _score: Score) -> float:
    return 1.0


def _never(*_args) -> bool:
    return False


@dataclass(frozen=True)
class Rule:
    """A class's rule: how the classifier scores, words and advises it (each field: the module's own function or
    table). The optional hooks default to nothing to add.

    score(ev, hints) -> Score             the rule's own score (:class:`Score`)
    describe(sub, ev) -> str              the evidence sentence of a verdict of this class
    advice                                {subclass or None: advice}; None: the class's own
    evidence                              the evidence keys the rule adds (:class:`gputop.analysis.evidence.Key`)
    examples                              real trace windows that must and must not fire it (tests/test_rules.py)
    measure(samples, peaks, hints) -> {}  the numbers it adds to a window's evidence
    settle(parts, score) -> (value, sub)  its score and subclass from its parts once the table damped them
    notes(ev, board, main) -> [str]       what it says about a window (main: the verdict's class)
    footnotes(ev, board, main) -> [str]   the same, after the window's own notes
    missing(ev, board) -> [str]           the evidence it had to do without
    also_mixed(ev, board, main) -> [Cls]  classes to list as mixed besides those scoring high enough
    trust(ev, score) -> float             its confidence factor (1: as scored)
    takes_over(ev, board, base, hints)    an overlay's test: does it take the verdict from the base class?
    overlay                               throttled, memory-capacity: they overlay the class of what the GPU does
    needs_gpm                             judged less surely without GPM (NO_GPM_CONFIDENCE)
    per_sample                            one sample alone can show it (a window is also judged sample by sample)
    private                               evidence keys kept only in a verdict of this class
    job_level                             judged on a job's GPUs together (gputop/analysis/collectives.py), never on
                                          one window: no window score, not among a window's classes
    no_recorded_example                   why no recorded window fires it yet ("" when one does)
    """

    cls: Cls
    score: Callable[..., Score]
    describe: Callable[..., str]
    advice: dict
    evidence: tuple[Key, ...] = ()
    examples: tuple[Example, ...] = ()
    measure: Callable[..., dict] = _no_measure
    settle: Callable[..., tuple] = _one_part
    notes: Callable[..., list] = _none
    footnotes: Callable[..., list] = _none
    missing: Callable[..., list] = _none
    also_mixed: Callable[..., list] = _none
    trust: Callable[..., float] = _trusted
    takes_over: Callable[..., bool] = _never
    overlay: bool = False
    needs_gpm: bool = False
    per_sample: bool = False
    private: tuple[str, ...] = ()
    no_recorded_example: str = ""
    job_level: bool = False

    def advise(self, sub) -> str:
        """The advice for a subclass (the class's own when the subclass has none)."""
        return self.advice.get(sub) or self.advice[None]
