"""What gputop's keys do: the actions of the TUI's bindings (``GputopApp.BINDINGS``), and quitting on a key
or a stop signal. A mixin of ``GputopApp``: the actions act on the app's pages, sampler, runs and tour."""

from __future__ import annotations

import signal

from textual.widgets import ContentSwitcher

from gputop import exitcodes
from gputop.telemetry.sampler import MAX_RATE_HZ, MIN_RATE_HZ
from gputop.tui.help import HelpScreen

RATES = (0.5, 1.0, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0)  # the sampling rates + and - step through


class KeyActions:
    """The app's actions (mixed into ``GputopApp``, which holds the state they use)."""

    terminal_gone = False  # the terminal (or the browser) went away (tui.terminal)

    def action_page(self, name: str) -> None:
        if name == "workloads":
            self.load_specs()
        self.page = name
        self.query_one(ContentSwitcher).current = name
        if name == "workloads" and self.specs:
            self.workloads.focus_list()
        else:
            self.set_focus(None)
        self.redraw()

    def action_gpu(self, step: int) -> None:
        if len(self.statics) > 1:
            self.selected = (self.selected + step) % len(self.statics)
            self.monitor.forget_verdict()
            self.frame(force=True)
        else:  # g / G with one GPU (or none): say why nothing moved
            self.notify("this source has one GPU: g / G switch between GPUs" if self.statics
                        else "this source has no GPU: g / G switch between GPUs", severity="warning")

    def action_pause(self) -> None:
        self.sampler.paused = not self.sampler.paused
        self.frame(force=True)

    def action_rate(self, step: int) -> None:
        if self.source.kind == "replay":
            self.notify("a replay plays at its recorded rate (use --speed)", severity="warning")
            return
        cur = self.sampler.rate_hz
        if step > 0:
            nxt = next((r for r in RATES if r > cur + 1e-9), MAX_RATE_HZ)
        else:
            nxt = next((r for r in reversed(RATES) if r < cur - 1e-9), MIN_RATE_HZ)
        self.sampler.set_rate(nxt)
        self.frame(force=True)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_device(self) -> None:
        self.workloads.toggle_device()

    def action_run(self) -> None:
        if self.page != "workloads":
            self.action_page("workloads")
            return
        self.workloads.start_run()

    def action_cancel(self) -> None:
        self.workloads.cancel_run()

    def action_select_run(self, step: int) -> None:
        self.workloads.select_run(step)

    def action_tour_next(self) -> None:
        if self.tour is None:
            self.notify("n steps through gputop --tour (start gputop with --tour)", severity="warning")
            return
        self.load_specs()
        self.tour.next(self)

    def action_save(self) -> None:
        self.workloads.save_shown()

    def signal_arrived(self, signum: int) -> None:
        """SIGINT, SIGTERM or SIGHUP to gputop. The SIGHUP the kernel sends when the terminal goes is the loss
        already acted on (on_terminal_lost), not a second stop (which would kill the runs at once)."""
        if not (signum == signal.SIGHUP and self.terminal_gone):
            self.stop_for_signal(signum)

    def on_terminal_lost(self, event) -> None:
        """The terminal or the browser is gone (tui.terminal.TerminalLost): stop as SIGHUP does, exit 129;
        a quit already under way (q, a signal) goes on as it was."""
        self.terminal_gone = True
        if self.stop_signal is None and not self._quitting:
            self.stop_for_signal(signal.SIGHUP)

    def stop_for_signal(self, signum: int) -> None:
        """A stop signal: stop the runs (the supervisor kills them on a second one) and leave with 128+N."""
        self.stop_signal = self.stop_signal or signum
        self.controller.cancel(signum=signum)
        self.action_quit_clean()

    def exit_code(self) -> int:
        return exitcodes.for_signal(self.stop_signal) if self.stop_signal is not None else exitcodes.OK

    def action_quit_clean(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        if self.controller.active:
            self.notify("stopping the workload...")
            self.run_worker(self._stop_then_exit, thread=True)
        else:
            self.exit(self.exit_code())

    def _stop_then_exit(self) -> None:
        self.controller.stop_all()
        self.call_from_thread(self.exit, self.exit_code())
