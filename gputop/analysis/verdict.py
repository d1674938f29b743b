"""The verdict: one type for every bottleneck verdict gputop gives.

The classifier returns one, the workloads build their own, the monitor and the TUI read them, and every
JSON document holds ``Verdict.to_dict()``:

  class          one of :data:`gputop.analysis.vocabulary.CLASSES` (a :class:`Cls`)
  label          that class for people ("latency/launch-bound")
  subclass       a :class:`Sub` of the classifier's, a workload's own nuance (free text), or None
  confidence     0..1, or None where the verdict is a measured fact rather than a score
  evidence       the numbers the verdict cites, by name ({"dram_bw_pct": 88.1, "tensor_pct": 0.0}); None = n/a
  evidence_text  one readable sentence quoting those numbers (rounded)
  advice         what to do about it
  mixed          other classes that also fit
  missing        evidence that was not there (and what that costs the verdict)
  notes          anything else worth saying
  scores         the classifier's score of every class (empty for a workload's verdict)
  window         {"t_start", "t_end", "seconds"} judged, or None for a verdict not judged on a window
  job            (only where set) the GPUs of the job this verdict names, by NVML index: a stalled collective's
                 "waiting", "left" and "idle" GPUs, a straggler's "waiting" GPUs and "why", a waiter's
                 "waits_for" (gputop/analysis/collectives.py)

A :class:`RunVerdict` (a run's verdict over its timeline) adds ``share`` and ``time_by_class_s``, and ``gpu``
for the run's own verdict.

The classifier's verdicts (those with scores, or whose evidence is an :class:`Evidence`) hold an
:class:`Evidence`: every key declared (gputop.analysis.evidence); a verdict refuses an undeclared one (KeyError).
A workload's own verdict (no scores) names its own numbers. The analysis hands out and edits verdicts only as
these objects; documents are built from them (``to_dict``). :func:`display_name` gives "label (subclass)", the
one way a verdict is named to people, of a verdict or a document's verdict.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields, replace

from gputop.analysis.evidence import Evidence
from gputop.analysis.vocabulary import CLASSES, LABELS, SUBCLASS_LABELS, Cls, subclass


def display_name(v: Verdict | dict) -> str:
    """"label (subclass)" of a verdict, or of a verdict dict (a document's verdict, a timeline segment):
    'compute-bound (tensor cores)', 'latency/launch-bound (launch overhead)', 'idle'."""
    if isinstance(v, Verdict) or hasattr(v, "verdict"):
        cls, sub, label = v.cls, v.subclass, None
    else:
        cls, sub, label = v.get("class"), v.get("subclass"), v.get("label")
    name = LABELS.get(cls) or label or str(cls)
    return f"{name} ({SUBCLASS_LABELS.get(sub, sub)})" if sub else name


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass
class Verdict:
    cls: Cls
    subclass: str | None = None
    confidence: float | None = None
    evidence: dict = field(default_factory=dict)
    evidence_text: str = ""
    advice: str = ""
    mixed: list = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scores: dict = field(default_factory=dict)
    t_start: float | None = None  # the window judged, in the time base of what was judged
    t_end: float | None = None
    window_s: float | None = None  # its length (t_end - t_start unless given)
    job: dict = field(default_factory=dict)  # the job's GPUs this verdict names (lists: not evidence numbers)

    def __post_init__(self):
        try:
            self.cls = Cls(self.cls)
        except ValueError:
            raise ValueError(f"verdict class {self.cls!r} is not one of {', '.join(CLASSES)}") from None
        self.subclass = subclass(self.subclass)
        if self.confidence is not None and not (_is_number(self.confidence) and 0.0 <= self.confidence <= 1.0):
            raise ValueError(f"verdict confidence {self.confidence!r} is not a number in 0..1 (or None)")
        bad = {k: v for k, v in self.evidence.items() if v is not None and not _is_number(v)}
        if bad:
            raise TypeError(f"verdict evidence holds numbers only (None = n/a); not numbers: {bad}")
        if self.scores or isinstance(self.evidence, Evidence):  # the classifier's: every key declared
            self.evidence = Evidence(self.evidence)
        self.mixed = [Cls(c) for c in self.mixed]
        if not isinstance(self.advice, str):
            raise TypeError(f"verdict advice is one string, not {type(self.advice).__name__}")
        if self.window_s is None and self.t_start is not None and self.t_end is not None:
            self.window_s = self.t_end - self.t_start

    @property
    def label(self) -> str:
        return LABELS[self.cls]

    def display_name(self) -> str:
        """'label (subclass)': see :func:`display_name`."""
        return display_name(self)

    @property
    def window(self) -> dict | None:
        if self.t_start is None and self.t_end is None:
            return None
        return {"t_start": self.t_start, "t_end": self.t_end, "seconds": self.window_s}

    def copy(self, **changes) -> Verdict:
        """A copy that shares no list or dict with this one (``changes``: fields set on the copy)."""
        return replace(self, **{f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
                                if f.name not in changes and isinstance(getattr(self, f.name), (dict, list))},
                       **changes)

    def to_dict(self) -> dict:
        d = {
            "class": self.cls, "label": self.label, "subclass": self.subclass,
            "confidence": self.confidence, "evidence": dict(self.evidence), "evidence_text": self.evidence_text,
            "advice": self.advice, "mixed": list(self.mixed), "missing": list(self.missing),
            "notes": list(self.notes), "scores": dict(self.scores), "window": self.window,
        }
        d.update(self._extras())
        if self.job:
            d["job"] = copy.deepcopy(self.job)
        return d

    def _extras(self) -> dict:
        return {}

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        """The verdict of a ``to_dict()`` dict (extra keys, such as an overall verdict's ``share``, are
        left out). Raises ValueError or TypeError on a dict of another shape."""
        w = d.get("window") or {}
        return cls(d["class"], d.get("subclass"), d.get("confidence"), dict(d.get("evidence") or {}),
                   d.get("evidence_text") or "", d.get("advice") or "", list(d.get("mixed") or []),
                   list(d.get("missing") or []), list(d.get("notes") or []), dict(d.get("scores") or {}),
                   w.get("t_start"), w.get("t_end"), w.get("seconds"), copy.deepcopy(d.get("job") or {}))


@dataclass
class RunVerdict(Verdict):
    """A verdict over a whole run's timeline (gputop/analysis/timeline.py's ``overall``): its class's ``share`` of
    the time (of the busy time unless idle), the run's seconds by class; ``gpu``: the GPU a run's own verdict is
    of (gputop/session/monitor.py)."""

    share: float | None = None
    time_by_class_s: dict = field(default_factory=dict)
    gpu: int | None = None

    def _extras(self) -> dict:
        out = {}
        if self.share is not None:
            out["share"] = self.share
            out["time_by_class_s"] = dict(self.time_by_class_s)
        return out

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.gpu is not None:
            d["gpu"] = self.gpu
        return d
