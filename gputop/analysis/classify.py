"""The bottleneck classifier: a window of telemetry samples of one GPU -> a :class:`Verdict` with evidence.

Pure functions over samples (the dicts of ``gputop.telemetry.sample``), no NVML, no Textual.

:func:`classify` measures the window (:mod:`.evidence`, and each rule's own numbers), scores every class by its
rule (:mod:`.rules`, each score 0..1) and lets the classes suppress each other (:mod:`.arbitration`'s table),
picks the main class, lists the other classes that also fit as ``mixed``, says which evidence was missing (no
GPM on pre-Hopper GPUs, no watched process), and words it all by the main class's rule. :mod:`.timeline`
classifies a run window by window.
"""

from __future__ import annotations

from collections import OrderedDict

from gputop.analysis import thresholds as T
from gputop.analysis.arbitration import BASES, best, judge, pick, rank
from gputop.analysis.evidence import (Evidence, busy_elsewhere, feeder_pid, is_busy, measure, number, rounded,
                                      split_window)
from gputop.analysis.rules import RULES, WINDOW_RULES
from gputop.analysis.rules.base import has_gpm, pct_text
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import CLASSES, Cls


def classify(window: list[dict], static: dict | None = None, peaks: dict | None = None,
             host: list[dict] | dict | None = None, watched_pid=None, hints: dict | None = None,
             gpu: int = 0, prefer: str | None = None) -> Verdict:
    """Verdict for a window of samples of one GPU (or of whole ticks: then GPU position ``gpu``).

    ``host``: host dicts of the same ticks (``procs`` gives the watched tree's CPU%); ``watched_pid``
    picks the tree; ``hints``: a workload's own numbers (``data_wait_fraction``) or events (``oom``, ``on_gpu``);
    ``prefer``: the class shown so far for this stretch of work (hysteresis, :func:`.arbitration.pick`).
    """
    hints = hints or {}
    samples, hosts = split_window(window, gpu, host)
    stretch = one_busy_stretch(samples)
    if stretch is not None:  # set-up on the CPU, then the work: judge the work, say the rest was idle
        lo, hi = stretch
        inner = classify(samples[lo:hi], static, peaks, hosts[lo:hi] if len(hosts) == len(samples) else hosts,
                         watched_pid, hints, prefer=prefer)
        if inner.cls not in (Cls.IDLE, Cls.INPUT_STARVED):
            share = (hi - lo) / len(samples)
            inner.notes.insert(0, f"the GPU worked in one stretch of {pct_text(100 * share)} of this window and was "
                                  "idle for the rest (set-up or teardown): this verdict is for that stretch")
            inner.confidence = round(inner.confidence * (0.5 + 0.5 * share), 2)
            return inner
    ev = measure(samples, static or {}, peaks or {}, hosts, watched_pid)
    ev["feeder_busy_elsewhere_fraction"] = busy_elsewhere(window, gpu, feeder_pid(hosts, watched_pid))
    for rule in WINDOW_RULES.values():  # the numbers a rule measures itself (NVLink, the stall fingerprint, a report)
        ev.update(rule.measure(samples, peaks, hints))
    board = judge(ev, hints)
    s, sub = board.scores, board.subs
    main = pick(board, ev, hints, prefer)
    hidden = {k for c, r in WINDOW_RULES.items() if c != main for k in r.private}  # a rule's own fingerprint: its verdicts'
    ev = {k: v for k, v in ev.items() if k not in hidden}
    weak = main in BASES and max(s[c] for c in BASES) < T.WEAK_SCORE
    gpm = has_gpm(ev)
    split = {}
    if gpm and len(samples) >= T.MIN_SAMPLES and (weak or (RULES[main].per_sample and main != Cls.IDLE)):
        split = sample_split(samples, static or {}, peaks or {}, ev)  # an idle window's busy samples are bursts
    if weak and split:  # nothing fits the window as a whole: what most of its samples look like
        main = max(split, key=lambda c: (split[c], -rank(c)))
    rule = RULES[main]
    others = [c for c in s if c != main and s[c] >= T.MIXED_MIN_SCORE]
    for r in WINDOW_RULES.values():
        others += [c for c in r.also_mixed(ev, board, main) if c not in others]
    # overlays: the class underneath is listed in mixed, it does not compete
    second = 0.0 if rule.overlay else max((s[c] for c in BASES if c != main), default=0.0)
    absent = _missing(ev, static or {}) + [m for r in WINDOW_RULES.values() for m in r.missing(ev, board)]
    factor = T.NO_GPM_CONFIDENCE if rule.needs_gpm and not gpm else 1.0
    factor *= rule.trust(ev, board.own_score(main))
    conf = min(T.MAX_CONFIDENCE, s[main] * factor * (1 - T.SECOND_CLASS_PENALTY * second))
    if weak and split:
        conf = T.WEAK_SCORE * split[main]
    if ev["samples"] < T.MIN_SAMPLES:
        conf *= 0.5
    said = [n for r in reversed(WINDOW_RULES.values()) for n in r.notes(ev, board, main)]  # the overlays' first
    if main in BASES and max(s[c] for c in BASES) < T.WEAK_SCORE:
        said.append("no class fits this window well; the verdict is a best guess")
    if ev["samples"] < T.MIN_SAMPLES:
        said.append(f"only {ev['samples']} samples in this window")
    said += [n for r in WINDOW_RULES.values() for n in r.footnotes(ev, board, main)]
    if split:
        share_main = split.get(main, 0.0)
        for c, share in sorted(split.items(), key=lambda x: -x[1]):
            if c != main and share >= T.MIXED_SAMPLE_FRACTION:
                if c == Cls.IDLE:
                    said.append(f"the GPU was idle in {pct_text(100 * share)} of this window's samples")
                    continue
                if c not in others:
                    others.append(c)
                said.append(f"the window changes: {pct_text(100 * share)} of its samples look {c.label}")
        conf *= 0.5 + 0.5 * share_main
    evidence = Evidence({k: rounded(v) for k, v in ev.items()})  # the numbers the sentence quotes, as kept
    ts = [smp["t"] for smp in samples if number(smp.get("t")) is not None]
    return Verdict(
        cls=main, subclass=sub.get(main), confidence=round(max(0.0, conf), 2),
        evidence=evidence, evidence_text=rule.describe(sub.get(main), evidence),
        advice=rule.advise(sub.get(main)), mixed=others, missing=absent, notes=said, scores=s,
        t_start=min(ts) if ts else None, t_end=max(ts) if ts else None,
    )


def _missing(ev: dict, static: dict) -> list[str]:
    """The window's missing GPM counters (no rule's own): what that costs every verdict."""
    if has_gpm(ev):
        return []
    why = ("not supported on this GPU (needs Hopper or newer)" if not static.get("gpm_supported")
           else "no GPM values in this window")
    out = [f"GPM counters (SM activity, tensor/FP pipes, DRAM bandwidth): {why}; judged from NVML duty "
           "cycles, clocks and power, so compute vs memory vs launch-bound is less certain"]
    if ev.get("power_fraction") is None:
        out.append("board power or power limit (the no-GPM fallback uses it to tell real work from tiny kernels)")
    return out


def one_busy_stretch(samples: list[dict]) -> tuple[int, int] | None:
    """(start, end) of the one long run of busy samples in a window that is otherwise idle, or None.

    Recurring bursts are input starvation; one stretch of work after (or before) a long idle stretch is
    a change of regime (a phase that starts with set-up on the CPU), to be judged on the work alone."""
    flags = [is_busy(s) for s in samples]
    busy = sum(flags)
    longest, start = (0, 0, 0), None
    for i, f in enumerate(flags + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            longest = max(longest, (i - start, start, i))
            start = None
    length, lo, hi = longest
    if (length >= T.MIN_SAMPLES and length >= T.ONE_STRETCH_SHARE * busy
            and 1 - busy / len(samples) >= T.ONE_STRETCH_IDLE_FRACTION):
        return lo, hi
    return None


SAMPLE_CLASSES = tuple(c for c, r in RULES.items() if r.per_sample)  # what one sample alone can show
SAMPLE_CLASS_CACHE = 4096  # per-sample classes kept: a live monitor judges each tick in ~3 windows in a row
_sample_classes: OrderedDict = OrderedDict()


def sample_split(samples: list[dict], static: dict, peaks: dict, ev: dict) -> dict:
    """Share of the window's samples whose own GPU-side class (no CPU, no bursts) is each class."""
    fill = {k: ev.get(k) for k in ("pcie_rx_bps", "pcie_tx_bps")}
    counts: dict[str, int] = {}
    for smp in samples:
        c = _sample_class(smp, static, peaks, fill)
        counts[c] = counts.get(c, 0) + 1
    n = sum(counts.values())
    return {c: k / n for c, k in counts.items()}


def _sample_class(smp: dict, static: dict, peaks: dict, fill: dict) -> str:
    """One sample's GPU-side class, remembered by the sample's values (its process list aside), the PCIe fill
    and the GPU's static facts and peaks: a monitor that judges the last few seconds every second meets each
    sample again, and the answer cannot change."""
    filled = tuple(v if smp.get(k) is None else None for k, v in fill.items())  # only what fills a gap counts
    key = (tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in smp.items() if k != "processes"
                 and not isinstance(v, dict)), filled, id(static), id(peaks))
    try:
        hit = _sample_classes.get(key)
    except TypeError:  # a value that cannot be hashed (a list of dicts): no memo
        key, hit = None, None
    if hit is not None and hit[1] is static and hit[2] is peaks:
        return hit[0]
    one = dict(smp)
    for k, v in fill.items():
        if one.get(k) is None:
            one[k] = v
    c = best(judge(measure([one], static, peaks)), SAMPLE_CLASSES)
    if key is not None:
        _sample_classes[key] = (c, static, peaks)  # the objects too: an id is only unique while they live
        if len(_sample_classes) > SAMPLE_CLASS_CACHE:
            _sample_classes.popitem(last=False)
    return c
