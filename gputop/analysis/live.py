"""The live verdict: the classifier over the current regime of the work, following its changes.

:class:`LiveVerdict` is fed the monitor's recent ticks at every frame (``update(window)``); it runs the
change detector (:mod:`.segments`) over the ticks it has not seen and judges the current segment (since
the last change, at most its last ``LIVE_MAX_S``): again once every ``LIVE_EVERY_S`` (every
``LIVE_SLIDING_EVERY_S`` once the regime is older than ``LIVE_MAX_S``: its window then slides, and each
judgement shares all but a second or two of its ticks with the one before), and at once when a change is
confirmed. A segment younger than ``LIVE_MIN_S`` is not judged yet (the previous verdict stays,
marked ``previous``); the first sample after a change is left out (its counters average the two
regimes). Within a segment the class shown is sticky (hysteresis, ``prefer`` of
:func:`.classify.classify`). The verdict's window (``t_start``/``t_end``) is the ticks it judged: a frontend
says so and marks it on its charts, and every number of its evidence is a mean over exactly those ticks.

Pure: no NVML, no Textual. The TUI's verdict panel (gputop/tui/monitor/verdict.py) holds one.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.classify import classify
from gputop.analysis.rules.stalled import describe as describe_stall
from gputop.analysis.segments import ChangeDetector
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import Cls


class LiveVerdict:
    """The live verdict of one GPU position for one watched process (``reset`` for another)."""

    def __init__(self):
        self.reset()

    def reset(self, key=None) -> None:
        self.key = key
        self.detector: ChangeDetector | None = None
        self.fed_t: float | None = None  # newest tick fed to the detector
        self.verdict: Verdict | None = None
        self.judged_t: float | None = None  # tick time of the last judgement
        self.segment_start: float | None = None  # start of the segment the verdict judged
        self.previous = False  # the verdict is the previous segment's (the current one is too young)
        self.changed_at: float | None = None  # tick time a change was last confirmed

    def update(self, window: list[dict], static: dict, peaks: dict, gpu_pos: int = 0,
               watched_pid=None, every_s: float = T.LIVE_EVERY_S) -> Verdict | None:
        """The verdict after the ticks of ``window`` (the monitor's last ``LIVE_MAX_S`` or more, oldest
        first; ticks already seen are skipped). A regime that has not changed is judged again every
        ``every_s`` (a change at once)."""
        if not window:
            return self.verdict
        key = (gpu_pos, watched_pid, id(static), id(peaks))
        if key != self.key or (self.fed_t is not None and window[-1]["t"] < self.fed_t):
            self.reset(key)  # another GPU or process, or time went back (a replay restarted)
        if self.detector is None:
            self.detector = ChangeDetector(gpu_pos, peaks, watched_pid)
        changed = False
        new = len(window)  # the ticks not fed yet are at the end: look at those only (called every frame)
        while new > 0 and (self.fed_t is None or window[new - 1]["t"] > self.fed_t):
            new -= 1
        for tick in window[new:]:
            self.fed_t = tick["t"]
            if self.detector.push(tick):
                changed = True
                self.changed_at = tick["t"]
        now = window[-1]["t"]
        start = self.detector.start_t if self.detector.start_t is not None else window[0]["t"]
        young = now - start < T.LIVE_MIN_S and self.verdict is not None and start != self.segment_start
        if young:  # the new regime is too short to judge: the previous one, up to where it ended
            if changed and self.segment_start is not None:
                before = [t for t in window if max(self.segment_start, now - T.LIVE_MAX_S) <= t["t"] < start]
                if before:
                    self.verdict = classify(before, static, peaks, gpu=gpu_pos, watched_pid=watched_pid,
                                            prefer=self.verdict.cls)
            self.previous = True
            return self.verdict
        if now - start > T.LIVE_MAX_S:  # a long steady regime: its window slides, judge it less often
            every_s = max(every_s, T.LIVE_SLIDING_EVERY_S)
        due = (changed or self.judged_t is None or start != self.segment_start
               or not 0 <= now - self.judged_t < every_s)
        if not due:
            return self.verdict
        lo = max(start, now - T.LIVE_MAX_S)
        ticks = [t for t in window if t["t"] >= lo]
        if start in self.detector.changes and len(ticks) > T.MIN_SAMPLES:
            ticks = ticks[1:]  # the first sample of a change straddles it (its counters average both regimes)
        prefer = self.verdict.cls if self.verdict is not None and start == self.segment_start else None
        self.verdict = classify(ticks, static, peaks, gpu=gpu_pos, watched_pid=watched_pid, prefer=prefer)
        if self.verdict.cls == Cls.STALLED:  # since the regime began, however long ago (the window is at most 30 s)
            self.verdict.evidence["stalled_for_s"] = round(now - start, 1)
            self.verdict.evidence_text = describe_stall(self.verdict.subclass, self.verdict.evidence, self.verdict.job)
        self.judged_t, self.segment_start, self.previous = now, start, False
        return self.verdict


def window_words(v: Verdict | None, now: float | None, previous: bool = False, clock=None) -> str:
    """Which window a verdict judged, for people: 'last 2.0 s', 'since 12:03:04, 5.1 s', or
    'previous phase, 4.0 s until 3.2 s ago'. ``clock(t)`` turns a tick time into a wall-clock 'HH:MM:SS'
    (None: the relative form only)."""
    if v is None or v.t_start is None or v.t_end is None:
        return ""
    length = max(0.0, v.t_end - v.t_start)
    if previous and now is not None:
        return f"previous phase: {length:.1f} s, until {max(0.0, now - v.t_end):.1f} s ago"
    if now is not None and now - v.t_end > T.LIVE_CURRENT_S:  # judged again within that: current
        return f"{length:.1f} s, until {now - v.t_end:.1f} s ago"
    if clock is not None:
        return f"since {clock(v.t_start)}, {length:.1f} s"
    return f"last {length:.1f} s"
