"""The verdict panel's data: the selected GPU's entry of the node's live verdicts.

The verdicts are judged on the sampler's thread, once per tick, by the model's
:class:`gputop.analysis.live.LiveNode` (the current regime of each GPU's work, since the last change its detector
saw, at most ``LIVE_MAX_S``); a frame only reads their latest snapshot. :class:`Diagnosis` is the selected GPU's
part of it: the one :class:`gputop.analysis.verdict.Verdict`, and ``words`` for which window it judged ("last
5.1 s", or the previous phase while a new one is too young to judge), which the panel shows and the charts mark.
A classifier error leaves the panel at "diagnosis: n/a" with the reason kept in ``error``, and the monitor keeps
running.
"""

from __future__ import annotations

from gputop.analysis.live import Judged, NodeSnapshot
from gputop.analysis.verdict import Verdict


class Diagnosis:
    """GPU ``i``'s live verdict (``i``: its index in the node's GPUs) in ``snapshot`` (none yet: an empty one)."""

    def __init__(self, snapshot: NodeSnapshot | None = None, i: int = 0):
        self.snapshot = snapshot if snapshot is not None else NodeSnapshot()
        self.i = i

    @property
    def judged(self) -> Judged | None:
        gpus = self.snapshot.gpus
        return gpus[self.i] if 0 <= self.i < len(gpus) else None

    @property
    def verdict(self) -> Verdict | None:
        return self.judged.verdict if self.judged is not None else None

    @property
    def previous(self) -> bool:
        return self.judged is not None and self.judged.previous

    @property
    def error(self) -> str | None:
        return self.judged.error if self.judged is not None else None

    @property
    def now(self) -> float | None:
        """Time of the newest tick the node was fed."""
        return self.snapshot.t

    def words(self) -> str:
        """Which window the verdict judged: 'last 5.1 s', 'previous phase: 3.5 s, until 0.3 s ago'."""
        return self.snapshot.words(self.i)

    def span(self) -> tuple[float, float] | None:
        """(t_start, t_end) of the window the verdict judged, in tick time (None: no verdict)."""
        return self.judged.span() if self.judged is not None else None
