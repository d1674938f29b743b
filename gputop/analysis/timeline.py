"""A run's verdicts over time: consecutive windows classified and merged into segments, and one verdict
for the whole run.

:func:`timeline` classifies consecutive windows of a run and merges equal neighbours into :class:`Segment`s
(:func:`merge`: duration-weighted evidence and confidence), each holding its :class:`Verdict` until a document is
built (``Segment.to_dict``); :func:`overall` turns a timeline into one :class:`RunVerdict` for the whole run;
:func:`format_timeline` writes a timeline (its segments, or a document's) as readable lines.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from gputop.analysis import thresholds as T
from gputop.analysis.arbitration import rank
from gputop.analysis.classify import classify
from gputop.analysis.evidence import Evidence, rounded
from gputop.analysis.rules import advise, describe
from gputop.analysis.rules.base import ramp
from gputop.analysis.rules.input_starved import FEEDER_CPU_PCT
from gputop.analysis.segments import segment_starts, split
from gputop.analysis.verdict import RunVerdict, Verdict, display_name
from gputop.analysis.vocabulary import CLASSES, Cls, Sub


@dataclass
class Segment:
    """A stretch of a run in one class: its span (seconds since the run's start, rounded to the millisecond), how
    many windows it merged, and its :class:`Verdict` (whose window is in the ticks' own clock)."""

    t_start: float
    t_end: float
    windows: int
    verdict: Verdict

    @property
    def cls(self) -> Cls:
        return self.verdict.cls

    @property
    def subclass(self):
        return self.verdict.subclass

    @property
    def confidence(self):
        return self.verdict.confidence

    @property
    def evidence_text(self) -> str:
        return self.verdict.evidence_text

    def to_dict(self) -> dict:
        v = self.verdict
        return {"class": v.cls, "label": v.label, "subclass": v.subclass, "t_start": self.t_start,
                "t_end": self.t_end, "windows": self.windows, "confidence": v.confidence,
                "evidence_text": v.evidence_text, "verdict": v.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> Segment:
        """A document's segment (its verdict as a :class:`Verdict`)."""
        return cls(d["t_start"], d["t_end"], d["windows"], Verdict.from_dict(d["verdict"]))


def _segments(ticks: list[dict], gpu_pos: int, peaks: dict, watched_pid, window_s: float) -> list[list[dict]]:
    """The ticks cut where the work changed (:mod:`.segments`, the live verdict's detector). A piece
    shorter than ``LIVE_MIN_S`` (the onset of a change) joins the piece after it (the last: the one before);
    a piece longer than ``window_s`` is judged in about equal windows of about ``window_s`` (their equal
    neighbours merge again into one segment), so a segment begins where the work changed."""
    pieces = split(ticks, segment_starts(ticks, gpu_pos, peaks, watched_pid))
    out: list[list[dict]] = []
    carry: list[dict] = []
    for p in pieces:
        p = carry + p
        carry = []
        if p[-1]["t"] - p[0]["t"] < T.LIVE_MIN_S and p is not pieces[-1]:
            carry = p
            continue
        out.append(p)
    if carry:
        if out:
            out[-1].extend(carry)
        else:
            out.append(carry)
    if len(out) > 1 and out[-1][-1]["t"] - out[-1][0]["t"] < T.LIVE_MIN_S:
        out[-2].extend(out.pop())
    chunks: list[list[dict]] = []  # a long piece of one regime: judged in windows of about window_s
    for p in out:
        n = max(1, round((p[-1]["t"] - p[0]["t"]) / window_s))
        size = -(-len(p) // n)
        chunks += [p[i:i + size] for i in range(0, len(p), size)]
    return chunks


def _windows(ticks: list[dict], window_s: float) -> list[list[dict]]:
    out: list[list[dict]] = []
    start = None
    for t in ticks:
        if start is None or t["t"] - start >= window_s:
            out.append([])
            start = t["t"]
        out[-1].append(t)
    if len(out) > 1 and out[-1][-1]["t"] - out[-1][0]["t"] < window_s * T.MIN_LAST_WINDOW_FRACTION:
        out[-2].extend(out.pop())
    return out


def _span(ticks: list[dict], nxt: dict | None) -> tuple[float, float]:
    """A window's [start, end): it ends where the next window starts (or one sample after its last)."""
    t0 = ticks[0]["t"]
    if nxt is not None:
        return t0, nxt["t"]
    step = (ticks[-1]["t"] - t0) / (len(ticks) - 1) if len(ticks) > 1 else 0.1
    return t0, ticks[-1]["t"] + step


def _startup_verdict(ticks: list[dict], t_end: float) -> Verdict:
    ev = Evidence(samples=len(ticks))
    return Verdict(Cls.IDLE, Sub.STARTUP, 1.0, ev, describe(Cls.IDLE, Sub.STARTUP, ev), advise(Cls.IDLE, Sub.STARTUP),
                   t_start=ticks[0]["t"], t_end=t_end)


def timeline(ticks: list[dict], gpu_pos: int, static: dict, peaks: dict, window_s: float = T.WINDOW_S,
             watched_pid=None, hints=None, t_on_gpu: float | None = None, t0: float | None = None,
             fixed: bool = False) -> list[Segment]:
    """Classify ``ticks`` (GPU position ``gpu_pos``) piece by piece into segments: the pieces begin where
    the work changed (:mod:`.segments`, the same detector as the live verdict's), or with ``fixed``
    every ``window_s``. Equal neighbours are merged.

    ``hints``: a dict for every window, or ``f(t_start, t_end) -> dict``. ``t_on_gpu``: when the command
    first showed up on this GPU; the ticks before it form one "startup" segment. Segment times are
    seconds since ``t0`` (default: the first tick).
    """
    ticks = [t for t in ticks if gpu_pos < len(t.get("gpus") or [])]
    if not ticks:
        return []
    t0 = ticks[0]["t"] if t0 is None else t0
    items: list[tuple[float, float, Verdict]] = []
    if t_on_gpu is not None:
        before = [t for t in ticks if t["t"] < t_on_gpu]
        ticks = [t for t in ticks if t["t"] >= t_on_gpu]
        if before:
            end = ticks[0]["t"] if ticks else _span(before, None)[1]
            items.append((before[0]["t"], end, _startup_verdict(before, end)))
    wins = _windows(ticks, window_s) if fixed else _segments(ticks, gpu_pos, peaks, watched_pid, window_s)
    for i, w in enumerate(wins):
        a, b = _span(w, wins[i + 1][0] if i + 1 < len(wins) else None)
        h = hints(a, b) if callable(hints) else hints
        if t_on_gpu is not None:  # after it showed up on this GPU the command holds a CUDA context there
            h = dict(h or {}, on_gpu=True)
        v = classify(w, static, peaks, watched_pid=watched_pid, hints=h, gpu=gpu_pos)
        items.append((a, b, dataclasses.replace(v, t_start=a, t_end=b, window_s=b - a)))
    _smooth(items)
    segs: list[list] = []
    for a, b, v in items:
        prev = segs[-1][2][-1] if segs else None
        if prev is not None and prev.cls == v.cls and (prev.subclass == Sub.STARTUP) == (v.subclass == Sub.STARTUP):
            segs[-1][1] = b
            segs[-1][2].append(v)
            segs[-1][3].append(b - a)
        else:
            segs.append([a, b, [v], [b - a]])
    return [Segment(round(a - t0, 3), round(b - t0, 3), len(vs), merge(vs, ds)) for a, b, vs, ds in segs]


def _smooth(items: list) -> None:
    """An idle window with a busy feeder between two input-starved windows is an input gap, not idleness."""
    for i in range(1, len(items) - 1):
        v = items[i][2]
        busy_feeder = ramp(v.evidence.get("feeder_cpu_pct"), FEEDER_CPU_PCT) >= 0.5
        if (v.cls == Cls.IDLE and v.subclass != Sub.STARTUP and items[i - 1][2].cls == Cls.INPUT_STARVED
                and items[i + 1][2].cls == Cls.INPUT_STARVED and busy_feeder):
            ev = v.evidence.copy()
            items[i] = (items[i][0], items[i][1], dataclasses.replace(
                v, cls=Cls.INPUT_STARVED, subclass=None, confidence=round(v.confidence * 0.7, 2), evidence=ev,
                evidence_text=describe(Cls.INPUT_STARVED, None, ev), advice=advise(Cls.INPUT_STARVED, None), mixed=[],
                notes=v.notes + ["an idle gap between input-starved windows while the process was busy on the CPU"]))


def merge(verdicts: list[Verdict], weights: list[float]) -> Verdict:
    """One verdict for consecutive windows of the same class: duration-weighted evidence and confidence."""
    if len(verdicts) == 1:
        return verdicts[0]
    if not sum(weights):
        weights = [1.0] * len(weights)
    total = sum(weights)
    cls = verdicts[0].cls
    subs: dict = {}
    for v, w in zip(verdicts, weights):
        subs[v.subclass] = subs.get(v.subclass, 0.0) + w
    sub = max(subs, key=subs.get)
    ev = Evidence()
    keys = [k for k in verdicts[0].evidence]
    for k in keys:
        vals = [(v.evidence.get(k), w) for v, w in zip(verdicts, weights)]
        nums = [(x, w) for x, w in vals if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if k == "samples":
            ev[k] = sum(x for x, _ in nums)
        elif k == "duration_s":
            ev[k] = rounded(float(total))
        elif k.endswith("max_fraction"):
            ev[k] = max((x for x, _ in nums), default=None)
        elif nums:
            ev[k] = rounded(sum(x * w for x, w in nums) / sum(w for _, w in nums))
        else:
            ev[k] = next((x for x, _ in vals if x is not None), None)
    mixed_w: dict = {}
    for v, w in zip(verdicts, weights):
        for c in v.mixed:
            mixed_w[c] = mixed_w.get(c, 0.0) + w
    mixed = [c for c in CLASSES if mixed_w.get(c, 0.0) >= 0.5 * total and c != cls]
    conf = sum(v.confidence * w for v, w in zip(verdicts, weights)) / total
    missing, notes, kinds = [], [], set()
    for v in verdicts:
        missing += [m for m in v.missing if m not in missing]
        for n in v.notes:
            kind = re.sub(r"[\d.]+", "#", n)  # the same note with other numbers: keep the first
            if kind not in kinds and not n.startswith("only "):
                kinds.add(kind)
                notes.append(n)
    scores = {c: round(sum(v.scores.get(c, 0.0) * w for v, w in zip(verdicts, weights)) / total, 3)
              for c in verdicts[0].scores}
    starts = [v.t_start for v in verdicts if v.t_start is not None]
    ends = [v.t_end for v in verdicts if v.t_end is not None]
    return Verdict(cls, sub, round(conf, 2), ev, describe(cls, sub, ev), advise(cls, sub), mixed, missing,
                   notes[:6], scores, t_start=min(starts, default=None), t_end=max(ends, default=None))


def _setup(seg: Segment) -> bool:
    """Does the segment look like a process setting up on the CPU: its GPU idle, host-bound, or input-starved
    with (next to) no kernels (not the bursts of a starved loop)?"""
    if seg.cls in (Cls.IDLE, Cls.HOST_BOUND):
        return True
    util = seg.verdict.evidence.get("util_gpu_pct")
    return seg.cls == Cls.INPUT_STARVED and util is not None and util < T.SETUP_UTIL_PCT


def overall(segments: list[Segment]) -> RunVerdict | None:
    """One verdict for a whole run from its timeline (startup segments left out, and the set-up on the CPU
    before the GPU's first work: host-bound segments, or input-starved ones with kernels active under
    ``SETUP_UTIL_PCT``, before the first segment of any other class
    but idle, such as imports, model building, DDP's set-up, torch.compile or XLA compilation, are not the work's
    bottleneck: a GPU that has done no work yet is not starved of input; likewise the teardown after its last
    work: results written, process groups destroyed, the interpreter exiting). It shares nothing with the
    segments' verdicts."""
    segs = [s for s in segments if s.subclass != Sub.STARTUP]
    work = [s for s in segs if not _setup(s)]
    if work:
        first, last = min(s.t_start for s in work), max(s.t_end for s in work)
        segs = [s for s in segs if not (_setup(s) and s.cls != Cls.IDLE
                                        and (s.t_end <= first or s.t_start >= last))]
    if not segs:
        return None
    time_by: dict[Cls, float] = {}
    for s in segs:
        time_by[s.cls] = time_by.get(s.cls, 0.0) + max(0.0, s.t_end - s.t_start)
    total = sum(time_by.values()) or 1.0
    busy = {c: d for c, d in time_by.items() if c != Cls.IDLE}
    busy_total = sum(busy.values())
    if not busy or time_by.get(Cls.IDLE, 0.0) / total > T.OVERALL_IDLE_FRACTION:
        main = Cls.IDLE
    else:
        main = max(busy, key=lambda c: (busy[c], -rank(c)))
    chosen = [s for s in segs if s.cls == main]
    v = merge([s.verdict for s in chosen], [s.t_end - s.t_start for s in chosen])
    starts = [s.verdict.t_start for s in segs if s.verdict.t_start is not None]  # the window judged: the whole
    ends = [s.verdict.t_end for s in segs if s.verdict.t_end is not None]  # run after startup
    window = {"t_start": min(starts), "t_end": max(ends), "window_s": None} if starts and ends else {}
    share = time_by[main] / (total if main == Cls.IDLE else busy_total)
    mixed = [c for c in CLASSES if c != main and c != Cls.IDLE and busy_total
             and busy.get(c, 0.0) / busy_total >= T.OVERALL_MIXED_FRACTION]
    mixed += [c for c in v.mixed if c not in mixed and c != main]
    run = v.copy(**window)
    return RunVerdict(**{f: getattr(run, f) for f in _FIELDS}, confidence=round(v.confidence * share ** 0.5, 2),
                      mixed=mixed, share=round(share, 3),
                      time_by_class_s={c: round(d, 2) for c, d in sorted(time_by.items(), key=lambda x: -x[1])})


_FIELDS = [f.name for f in dataclasses.fields(Verdict) if f.name not in ("confidence", "mixed")]


def format_timeline(segments: list) -> list[str]:
    """Readable lines: '  0.0-  3.1 s  compute-bound (tensor)  0.90  tensor 94% busy, ...', of a timeline's
    :class:`Segment`s or a document's segments."""
    lines = []
    for s in segments:
        s = s.to_dict() if isinstance(s, Segment) else s
        name = display_name(s)
        lines.append(f"  {s['t_start']:6.1f}-{s['t_end']:6.1f} s  {name:<44} {s['confidence']:.2f}  {s['evidence_text']}")
    return lines
