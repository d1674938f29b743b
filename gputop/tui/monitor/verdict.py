"""The verdict panel's data: the live verdict (gputop.analysis.live) over the monitor's recent ticks.

It returns the one :class:`gputop.analysis.verdict.Verdict`, judged on the current regime of the work (since
the last change the detector saw, at most ``LIVE_MAX_S``); ``words`` says which window that was ("last
5.1 s", or the previous phase while a new one is too young to judge), which the panel shows and the charts
mark. A classifier error leaves the panel at "diagnosis: n/a" with the reason kept in ``error``, and the
monitor keeps running.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.live import LiveVerdict, window_words
from gputop.analysis.verdict import Verdict


class Diagnosis:
    """The live verdict for one GPU position; called at every frame with the monitor's recent ticks."""

    def __init__(self):
        self.error: str | None = None
        self.live = LiveVerdict()
        self.now: float | None = None  # time of the newest tick judged

    def reset(self) -> None:
        """Judge afresh (another GPU, another watched process)."""
        self.live.reset()

    @property
    def previous(self) -> bool:
        return self.live.previous

    def words(self) -> str:
        """Which window the verdict judged: 'last 5.1 s', 'previous phase: 3.5 s, until 0.3 s ago'."""
        return window_words(self.live.verdict, self.now, self.live.previous)

    def span(self) -> tuple[float, float] | None:
        """(t_start, t_end) of the window the verdict judged, in tick time (None: no verdict)."""
        v = self.live.verdict
        return None if v is None or v.t_start is None or v.t_end is None else (v.t_start, v.t_end)

    def __call__(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
                 watched_pid: int | None = None, every_s: float = T.LIVE_EVERY_S) -> Verdict | None:
        """The verdict for GPU position ``gpu_pos`` after the ticks of ``window`` (None: n/a); a steady
        regime is judged again every ``every_s``."""
        if not window:
            return None
        try:
            self.now = window[-1]["t"]
            return self.live.update(window, static, peaks, gpu_pos=gpu_pos, watched_pid=watched_pid, every_s=every_s)
        except Exception as exc:  # a classifier bug on odd data: the panel shows n/a, the monitor goes on
            self.error = f"{type(exc).__name__}: {exc}"
            self.live.reset()
            return None
