"""How a TUI session starts, goes and ends: the one object the app holds for it (``GputopApp.lifecycle``).

It starts sampling before Textual runs (``start_sampling``: the first tick that comes once the app runs is drawn at
once, not at the timer's next frame), settles the garbage collector a few seconds in (gputop's own process), and
watches the stop signals. The app hands it the frame timer's ticks, q, the stop signals and the loss of the
terminal; it stops what runs and leaves with the exit code the README's table gives. ``Lifecycle`` is the monitor's
own:

- q (or ctrl+c): the workload runs stopped through their supervisor (on a worker thread, each within its grace
  period), then exit 0;
- SIGINT, SIGTERM or SIGHUP to gputop: the runs cancelled with that signal (the supervisor kills them on a second
  one), then as q, and exit 128+N; those that came while gputop started up (``pending_signals``: ``main_tui`` notes
  them) count the same;
- the terminal or the browser gone (``TerminalLost``, gputop/tui/terminal.py): as SIGHUP, exit 129. The SIGHUP the
  kernel sends with a hang-up is that loss, not a second stop (which would kill the runs at once).

``gputop --tui --run`` and ``--watch`` hold a command's lifecycle instead (gputop/tui/command/lifecycle.py): the same
ends, with the command polled from the frame timer and its exit code.
"""

from __future__ import annotations

import asyncio
import gc
import signal

from gputop import exitcodes
from gputop.runner.stop_signals import STOP_SIGNALS
from gputop.tui.messages import Redraw

SETTLE_GC_S = 3.0  # after start-up (the first frames drawn): settle_gc


def settle_gc() -> None:
    """Collect once, then keep start-up's objects (modules, widgets, styles: 57-94k) out of the collector's full
    scans, which took 21-76 ms each at random moments (bench/perf/tui_gc.py). Later objects are collected as usual
    (gputop's start-up runs with the collector off: main_tui)."""
    gc.collect()
    gc.freeze()
    gc.enable()


class Lifecycle:
    """The monitor's own (see the module's text). ``attach`` gives it the app (``GputopApp.__init__``)."""

    def __init__(self):
        self.app = None
        self.on_demand = None  # the windows w asked of running processes (gputop.session.profile_on_demand)
        self.stop_signal: int | None = None  # the first SIGINT/SIGTERM/SIGHUP gputop got, if any
        self.pending_signals: list[int] = []  # stop signals that came before the app watched them (main_tui)
        self.terminal_gone = False  # the terminal (or the browser) went away (tui.terminal)
        self.quitting = False
        self._sampling = False

    def attach(self, app) -> None:
        self.app = app

    # -- the start ----------------------------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """Start the model's sampler (once). ``gputop`` calls this before ``run()``: the first ticks are read while
        Textual starts up, and the first frame shows them; the first tick to come after the first frame draws at
        once."""
        if self._sampling:
            return
        self._sampling = True
        model = self.app.model
        model.sampler.listeners += [model.sticky.observe, self._first_tick]
        if model.config.start_sampler:
            model.sampler.start()

    def _first_tick(self, tick: dict) -> None:
        """(Sampler thread) the first tick while the app runs: a frame now, not at the timer's next. A tick read
        before (sampling starts before Textual) is drawn by the app's first frame; posting then, with no event loop
        yet, would put the message into the queue from this thread unguarded."""
        if self.app.is_running:
            self.app.model.sampler.listeners.remove(self._first_tick)
            self.app.post_message(Redraw())  # with the loop running, post_message hands it over thread-safely

    def start(self) -> None:
        """The app is mounted: sampling goes on (or starts), the frame timer ticks at the config's ``fps`` (0: the
        caller draws with ``frame()``: tests), start-up's objects leave the collector's scans ``SETTLE_GC_S`` later
        (gputop's own process: ``settle_gc``), the stop signals are watched, and a recorded run given to
        ``--replay`` plays along."""
        app, config = self.app, self.app.model.config
        self.start_sampling()
        if config.fps > 0:
            app.set_interval(1.0 / config.fps, app.frame)
        if config.settle_gc:
            app.set_timer(SETTLE_GC_S, settle_gc)
        self.watch_signals()
        if config.autoplay:  # gputop --replay RUN.jsonl.gz: the run plays along with the telemetry
            app.workloads.autoplay(config.autoplay)

    def watch_signals(self) -> None:
        """gputop's SIGINT, SIGTERM and SIGHUP end the TUI as q does, exit 128+N (under a test's headless driver,
        tests call ``stop_for_signal``)."""
        app = self.app
        if app.is_headless:
            return
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.signal_arrived, sig)
        for sig in self.pending_signals:  # those that came while gputop started up (tui.main_tui noted them)
            self.signal_arrived(sig)

    # -- the session going on ------------------------------------------------------------------------------------
    def frame(self) -> None:
        """Each frame, before the app draws it: a profiler window asked with w that has come, as a notice."""
        if self.on_demand is not None:
            for line in self.on_demand.news():
                self.app.notify(line, timeout=12)

    def key_items(self, items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The key bar's keys, with this lifecycle's own."""
        return items

    def ask_window(self) -> None:
        """w: a profiler window now of the process on the selected GPU (one started with gputop's loader, gputop
        --profile-env; on Python 3.14+ any) and of its job's other ranks (gputop/session/profile_on_demand.py)."""
        model = self.app.model
        pids = sorted(p for p in model.pids_on_selected() if p)
        if model.source.kind != "live" or not pids:
            self.app.notify("w asks the process on the selected GPU for a profiler window: "
                            + ("a live GPU's only" if model.source.kind != "live" else "no process on this GPU"),
                            severity="warning")
            return
        from gputop.session.profile_on_demand import OnDemand
        from gputop.session.profile_whom import gpu_pids

        if self.on_demand is None:
            self.on_demand = OnDemand()
        lines = []
        for pid in pids:
            ok, line = self.on_demand.ask(pid, gpu_pids(model.sampler.window(5.0)))
            if ok:
                self.app.notify(line)
                return
            lines.append(line)
        self.app.notify(lines[0], severity="warning", timeout=12)

    def toggle_attribution(self) -> None:
        """a: the latest profiler window in the pages' place, and back (a command's, with --profile)."""

    def unmount(self) -> None:
        """The app is going away (before it closes the model's sources)."""

    # -- the ends -----------------------------------------------------------------------------------------------
    def signal_arrived(self, signum: int) -> None:
        """SIGINT, SIGTERM or SIGHUP to gputop. The SIGHUP the kernel sends when the terminal goes is the loss
        already acted on (``terminal_lost``), not a second stop (which would kill the runs at once)."""
        if not (signum == signal.SIGHUP and self.terminal_gone):
            self.stop_for_signal(signum)

    def terminal_lost(self) -> None:
        """The terminal or the browser is gone (tui.terminal): stop as SIGHUP does, exit 129; a quit already
        under way (q, a signal) goes on as it was."""
        self.terminal_gone = True
        if self.stop_signal is None and not self.quitting:
            self.stop_for_signal(signal.SIGHUP)

    def stop_for_signal(self, signum: int) -> None:
        """A stop signal: stop what runs with it (a second one kills), then leave as q does, with 128+N."""
        self.stop_signal = self.stop_signal or signum
        self.cancel(signum)
        self.quit()

    def quit(self) -> None:
        """q: stop what runs (on a worker thread, each within its grace period), then exit."""
        if self.quitting:
            return
        self.quitting = True
        note = self.stopping_note()
        if note is None:
            self.app.exit(self.exit_code())
            return
        if note:
            self.app.notify(note)
        self.app.run_worker(self._stop_then_exit, thread=True, group="quit")

    def _stop_then_exit(self) -> None:
        code = self.stop()
        self.app.call_from_thread(self.app.exit, code)

    # -- what differs with a command ----------------------------------------------------------------------------
    def cancel(self, signum: int) -> None:
        """A stop signal came: the workload runs cancelled with it."""
        self.app.model.controller.cancel(signum=signum)

    def stopping_note(self) -> str | None:
        """What q says while it stops what runs ("": nothing); None: nothing runs, exit at once."""
        return "stopping the workload..." if self.app.model.controller.active else None

    def stop(self) -> int:
        """(A worker thread) stop what runs and wait for it; the exit code."""
        self.app.model.controller.stop_all()
        return self.exit_code()

    def exit_code(self) -> int:
        return exitcodes.for_signal(self.stop_signal) if self.stop_signal is not None else exitcodes.OK
