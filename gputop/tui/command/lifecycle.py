"""A command's run in the TUI (``gputop --tui --run -- CMD`` / ``--tui --watch PID``), from the first frame to its
exit code: the lifecycle the app holds for a :class:`gputop.session.command.Session`.

- Each frame (the app's timer) polls the session: once the command has ended, its document is written on a worker
  thread (sampling stops, the final timeline shows); the verdict timeline so far (:meth:`Monitor.analyze`) is
  recomputed on a thread every ``ANALYSIS_EVERY_S`` (longer when the analysis itself takes long); the model selects
  the GPU the command shows up on (once); the panel on top and, with ``--profile``, the attribution view are drawn.
- q stops the command (SIGINT, killed after its grace period; a watched process is left running), waits for it,
  writes its document, then exits with the command's exit code. SIGINT, SIGTERM and SIGHUP to gputop (or the
  terminal gone) stop it with that signal and leave the same way: the exit code is then 128+N (once the command
  has ended by itself, its own code stands). However the app ends, the command does not outlive it.
- w asks the command for a profiler window now, a shows the latest in the pages' place (``--profile``).
"""

from __future__ import annotations

import time

from gputop.session.command import Session
from gputop.tui.command.attribution import AttributionPanel
from gputop.tui.command.panel import CommandPanel, job_culprit
from gputop.tui.lifecycle import Lifecycle
from gputop.tui.messages import Redraw

ANALYSIS_EVERY_S = 2.0  # the live timeline's refresh (longer when the analysis itself takes long)


class CommandLifecycle(Lifecycle):
    """The command's run (see the module's text); ``analysis``: the timeline so far (None before the first)."""

    def __init__(self, session: Session):
        super().__init__()
        self.session = session
        self.panel = CommandPanel(id="command")
        self.attribution = AttributionPanel(id="attribution")
        self.attribution.display = False
        self.analysis: dict | None = None
        self._analysis_t = float("-inf")
        self._analysis_cost = 0.0
        self._analysing = False
        self._finishing = False

    def start(self) -> None:
        app = self.app
        app.mount(self.panel, after="#summary")
        app.mount(self.attribution, after="#pages")
        super().start()

    def key_items(self, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return items[:2] + [("w", "window"), ("a", "attribution")] + items[2:] if self.session.profile else items

    # -- each frame ---------------------------------------------------------------------------------------------
    def frame(self) -> None:
        app, s = self.app, self.session
        if not self.quitting and s.poll() and not self._finishing:
            self._finishing = True
            app.run_worker(self._finish, thread=True, group="command")
        app.model.follow_command_gpu()
        now = time.monotonic()
        if (s.doc is None and not self._analysing
                and now - self._analysis_t >= max(ANALYSIS_EVERY_S, 10 * self._analysis_cost)):
            self._analysing = True
            self._analysis_t = now
            app.run_worker(self._analyse, thread=True, group="analysis")
        if self.panel.is_mounted:
            culprit = job_culprit(app.model.live.snapshot().verdicts(), app.model.tagged_pids)
            self.panel.show(s, self.analysis, app.model.nvml_index(), app.has_class("-short"), culprit)
        self.attribution.follow(s, app.model.pids_on_selected, now)

    def _analyse(self) -> None:
        t = time.perf_counter()
        try:
            self.analysis = self.session.monitor.analyze()
        finally:
            self._analysis_cost = time.perf_counter() - t
            self._analysing = False

    def _finish(self) -> None:
        self.session.document()
        self.app.post_message(Redraw())

    # -- the profiler windows (--profile) -----------------------------------------------------------------------
    def ask_window(self) -> None:
        s = self.session
        if s.profile is None:
            self.app.notify("profiler windows need --profile: gputop --tui --run --profile -- CMD (or --watch PID "
                            "--profile of a process started with gputop's loader)", severity="warning")
        elif s.over:
            self.app.notify("the command has ended: no more windows", severity="warning")
        else:
            self.app.notify(s.profile.ask_now(time.monotonic() - s.t_start))

    def toggle_attribution(self) -> None:
        if self.session.profile is None:
            self.ask_window()
            return
        shown = not self.attribution.display
        self.attribution.display = shown
        self.app.query_one("#pages").display = not shown
        self.attribution.read_soon()
        self.app.redraw()

    # -- the ends -----------------------------------------------------------------------------------------------
    def cancel(self, signum: int) -> None:
        """A stop signal to gputop stops the command with it (the supervisor kills it on a second one)."""
        self.session.stop(signum)

    def stopping_note(self) -> str:
        s = self.session
        if s.mode == "run" and not s.over:
            return f"stopping the command (SIGINT, killed after {s.grace_s:g} s)..."
        return ""

    def stop(self) -> int:
        s = self.session
        if not s.stopping:  # a signal may have stopped it already: a second stop would kill at once
            s.stop()
        s.wait()
        s.document()
        self.app.model.controller.stop_all()
        return s.exit_code

    def unmount(self) -> None:
        s = self.session
        if not s.over:  # the app ended without q (an error): do not leave the command running
            if not s.stopping:
                s.stop()
            s.wait()
