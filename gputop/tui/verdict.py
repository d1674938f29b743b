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

    @property
    def bound(self) -> bool:
        return self.label.lower() not in IDLE_CLASSES


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
    label = _get(raw, "class", "cls", "label", "name", "kind")
    if label is None:
        return None
    evidence = _get(raw, "evidence", "evidence_text", "why") or ""
    if isinstance(evidence, (list, tuple)):
        evidence = "; ".join(str(e) for e in evidence)
    elif isinstance(evidence, dict):
        evidence = ", ".join(f"{k} {v}" for k, v in evidence.items())
    return Verdict(str(label), str(evidence), str(_get(raw, "advice", "hint") or ""))


class Diagnosis:
    """Calls the classifier on a window of ticks; remembers whether it exists at all."""

    def __init__(self):
        try:
            from gputop.analysis.classify import classify
        except ImportError:
            classify = None
        self.classify = classify
        self.takes_gpu = False
        if classify is not None:
            import inspect

            try:
                self.takes_gpu = "gpu" in inspect.signature(classify).parameters
            except (TypeError, ValueError):
                pass
        self.error: str | None = None

    @property
    def available(self) -> bool:
        return self.classify is not None

    def __call__(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
                 host: dict | None = None) -> Verdict | None:
        if self.classify is None or not window:
            return None
        try:
            extra = {"gpu": gpu_pos} if self.takes_gpu else {}
            raw = self.classify(window, static, peaks, host=host, **extra)
        except Exception as exc:  # the panel shows n/a, the monitor keeps running
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        return to_verdict(raw)
