"""The verdict panel's data: the classifier (gputop.analysis.classify) over a window of ticks.

It returns the one :class:`gputop.analysis.verdict.Verdict`; the panel shows its display name, its
evidence sentence and its advice. A classifier error leaves the panel at "diagnosis: n/a" with the
reason kept in ``error``, and the monitor keeps running.
"""

from __future__ import annotations

from gputop.analysis.classify import classify
from gputop.analysis.verdict import Verdict


class Diagnosis:
    """Calls the classifier on a window of ticks for one GPU position."""

    def __init__(self):
        self.error: str | None = None

    def __call__(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
                 watched_pid: int | None = None) -> Verdict | None:
        """The verdict for GPU position ``gpu_pos`` over a window of ticks (None: n/a)."""
        if not window:
            return None
        try:
            return classify(window, static, peaks, gpu=gpu_pos, watched_pid=watched_pid)
        except Exception as exc:  # a classifier bug on odd data: the panel shows n/a, the monitor goes on
            self.error = f"{type(exc).__name__}: {exc}"
            return None
