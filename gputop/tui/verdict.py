"""The verdict panel's data: the diagnosis engine (gputop.analysis.classify), imported guarded.

The engine is optional for the TUI: without it the panel says "diagnosis: n/a". Whatever shape the
engine returns (a dict like the run document's ``verdict`` or an object), it is read here only.
"""

from __future__ import annotations

from dataclasses import dataclass

IDLE_CLASSES = ("idle", "ok", "none", "healthy", "balanced", "unknown", "n/a")


@dataclass
class Verdict:
    label: str
    evidence: str
    advice: str
    cls: str = ""

    @property
    def bound(self) -> bool:
        return (self.cls or self.label).lower() not in IDLE_CLASSES


def _get(v, *names):
    for n in names:
        if isinstance(v, dict) and v.get(n) is not None:
            return v[n]
        if not isinstance(v, dict) and getattr(v, n, None) is not None:
            return getattr(v, n)
    return None


def to_verdict(raw) -> Verdict | None:
    if raw is None:
        return None
    if hasattr(raw, "to_dict"):
        raw = raw.to_dict()
    label = _get(raw, "label", "class", "cls", "name", "kind")
    if label is None:
        return None
    evidence_first = str(_get(raw, "evidence_text") or "")
    if ": " in evidence_first and evidence_first.split(":")[0].lower().startswith(str(_get(raw, "class") or label).lower()[:6]):
        label = evidence_first.split(": ", 1)[0]  # the engine's own "class (subclass)" wording
        raw = dict(raw, evidence_text=evidence_first.split(": ", 1)[1], subclass=None)
    sub = _get(raw, "subclass")
    if sub:
        label = f"{label} ({sub})"
    evidence = _get(raw, "evidence_text", "evidence", "why") or ""
    if isinstance(evidence, (list, tuple)):
        evidence = "; ".join(str(e) for e in evidence)
    elif isinstance(evidence, dict):
        evidence = ", ".join(f"{k} {v}" for k, v in evidence.items())
    conf = _get(raw, "confidence")
    if isinstance(conf, (int, float)):
        evidence = f"{evidence}  (confidence {conf:.0%})" if evidence else f"confidence {conf:.0%}"
    return Verdict(str(label), str(evidence), str(_get(raw, "advice", "hint") or ""),
                   str(_get(raw, "class", "cls") or label))


class Diagnosis:
    """Calls the classifier on a window of ticks; remembers whether it exists at all."""

    def __init__(self):
        try:
            from gputop.analysis.classify import classify
        except ImportError:
            classify = None
        self.classify = classify
        self.params: set[str] = set()
        if classify is not None:
            import inspect

            try:
                self.params = set(inspect.signature(classify).parameters)
            except (TypeError, ValueError):
                pass
        self.error: str | None = None

    @property
    def available(self) -> bool:
        return self.classify is not None

    def __call__(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
                 watched_pid: int | None = None) -> Verdict | None:
        """The verdict for GPU position ``gpu_pos`` over a window of ticks (None: n/a)."""
        if self.classify is None or not window:
            return None
        try:
            extra = {"gpu": gpu_pos, "watched_pid": watched_pid}
            raw = self.classify(window, static, peaks, **{k: v for k, v in extra.items() if k in self.params})
        except Exception as exc:  # the panel shows n/a, the monitor keeps running
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        return to_verdict(raw)
