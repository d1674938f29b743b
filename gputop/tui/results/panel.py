"""The results of one run (``ResultsView``), the one view both pages show: the monitor page while a run goes (and
for a while after), the workloads page for the run picked. A status line, then the run's plot or bars and its
verdict, as ``gputop.tui.results.view`` draws them (pure functions) for the widget's size."""

from __future__ import annotations

import time

from rich.text import Text

from gputop.tui.results import view as results
from gputop.tui.widgets.lines import Lines


class ResultsView(Lines):
    """The results of one run: roofline plot or throughput bars, sized to the widget."""

    DEFAULT_CSS = "ResultsView { height: 1fr; min-height: 3; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.doc: dict | None = None
        self.progress: dict | None = None
        self._seen: tuple | None = None  # (run state, its event count) last shown
        self.recorded_on: str | None = None  # a replayed recording's host (None: a run of this session)
        self.whole_verdict = False  # key v: the verdict alone, whole, in the plot's place

    def behind(self, state) -> bool:
        """True when ``state`` (a RunState, or None) has news this view has not shown yet."""
        return state is not None and (self._seen is None or self._seen[0] is not state
                                      or self._seen[1] != state.events)

    def show_run(self, state) -> None:
        """Show a run (a RunState; None: none yet): its document again only after new events, else
        the same document with the wall time moving while it runs."""
        rec = getattr(state.run, "rec", None) if state is not None else None  # a RecordedRun's recording
        self.recorded_on = (rec["header"].get("hostname") or "") if rec else None
        if state is None:
            self._seen = None
            self.show(None)
        elif self.doc is None or self.behind(state):
            self._seen = (state, state.events)
            self.show(self._now(state, state.document()), state.progress if state.active else None)
        elif state.active:
            self.show(self._now(state, self.doc), state.progress)

    @staticmethod
    def _now(state, doc: dict) -> dict:
        """The document as the status line shows it now: while the run goes, its elapsed time counts on
        between events (a quiet workload's clock does not freeze); once over, no phase (nor progress) is
        "current"."""
        if state.active:
            t0 = getattr(state.run, "t0", None) or state.started
            return {**doc, "wall_time_s": max(doc.get("wall_time_s") or 0.0, time.monotonic() - t0)}
        return {**doc, "phases": []} if doc.get("phases") else doc

    def toggle_whole_verdict(self) -> None:
        self.whole_verdict = not self.whole_verdict
        self.rebuild()

    def show(self, doc: dict | None, progress: dict | None = None) -> None:
        self.doc, self.progress = doc, progress
        self.rebuild()

    def rebuild(self) -> None:
        w, h = self.wh
        if w <= 0 or h <= 0:
            return
        if self.doc is None:
            self.set_lines([Text("no run yet: pick a workload and press r (or Enter on its name)", style="dim")])
            return
        status = results.status_line(self.doc, self.progress, self.recorded_on)  # an error in it wraps, not cut
        lines = list(status.wrap(self.app.console, w, overflow="fold"))[:max(1, h - 3)]
        lines += results.results_lines(self.doc, w, h - len(lines), self.whole_verdict)
        self.set_lines(lines)
