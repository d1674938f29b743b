"""The gputop Textual app: two pages (monitor, workloads) over one model, and the keys.

The model (``TuiModel``: the source, its sampler, the GPUs, the runs, where they go) is what the pages read;
its changes announce themselves, and the app draws the next frame. Sampling runs on the sampler's thread;
the app redraws from a timer at ``fps`` (default 4) and only when a new tick arrived (or a run or the model
changed, or a key changed what is shown), and only the page that is shown: each page draws itself
(``MonitorPage.draw``, ``WorkloadsPage.draw``). The keys are the app's (``BINDINGS``); a workload key is
carried out by the workloads page. ``make_app`` builds the app from command-line args or a ``TuiConfig`` (tests).
"""

from __future__ import annotations

import asyncio
import gc
import signal

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import ContentSwitcher

from gputop import exitcodes
from gputop.runner.stop_signals import STOP_SIGNALS
from gputop.tui.config import TuiConfig, config_from_args
from gputop.tui.header import GpuSummary, InfoBar
from gputop.tui.help import HelpScreen
from gputop.tui.messages import Noted, Redraw, ShowPage, TerminalLost
from gputop.tui.model import SOURCE, TuiModel
from gputop.tui.monitor.page import MonitorPage
from gputop.tui.screen_text import svg_text
from gputop.tui.terminal import driver_for
from gputop.tui.widgets.containers import MainScreen, Pages
from gputop.tui.widgets.keybar import KeyBar
from gputop.tui.workloads.page import WorkloadsPage

__all__ = ["GputopApp", "TuiConfig", "HelpScreen", "make_app", "config_from_args"]

NARROW_W, SHORT_H = 110, 32
LIVE_RESULTS_KEEP_S = 30.0  # the monitor page keeps a finished run's results this long
SETTLE_GC_S = 3.0  # after start-up (the first frames drawn): settle_gc


def settle_gc() -> None:
    """Collect once, then keep start-up's objects (modules, widgets, styles: 57-94k) out of the collector's full
    scans, which took 21-76 ms each at random moments (bench/perf/tui_gc.py). Later objects are collected as usual
    (gputop's start-up runs with the collector off: main_tui)."""
    gc.collect()
    gc.freeze()
    gc.enable()


def make_app(args_or_config) -> "GputopApp":
    config = args_or_config if isinstance(args_or_config, TuiConfig) else config_from_args(args_or_config)
    return GputopApp(config)


class GputopApp(App):
    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "quit_clean", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("1", "page('monitor')", "monitor"),
        Binding("2", "page('workloads')", "workloads"),
        Binding("g", "gpu(1)", "GPU"),
        Binding("G", "gpu(-1)", "prev GPU", show=False),
        Binding("p", "pause", "pause"),
        Binding("plus,equals_sign", "rate(1)", "rate+"),
        Binding("minus", "rate(-1)", "rate-"),
        Binding("r", "run", "run"),
        Binding("c", "cancel", "cancel"),
        Binding("d", "device", "cpu/gpu", show=False),
        Binding("s", "save", "save"),
        Binding("v", "whole_verdict", "verdict", show=False),
        Binding("n", "tour_next", "next stop", show=False),
        Binding("left_square_bracket", "select_run(-1)", "older run", show=False),
        Binding("right_square_bracket", "select_run(1)", "newer run", show=False),
        Binding("ctrl+c", "quit_clean", "quit", show=False, priority=True),
    ]

    def __init__(self, config: TuiConfig, model: TuiModel | None = None):
        super().__init__()
        self.model = model or TuiModel(config)
        self.model.observe(self._model_changed)
        self.page = "monitor"
        self.frames = 0  # redraws done (for the benchmark and tests)
        self.notes: list[str] = []  # the notifications so far, oldest first (the last 100)
        self.stop_signal: int | None = None  # the first SIGINT/SIGTERM/SIGHUP gputop got, if any
        self.pending_signals: list[int] = []  # stop signals that came before the app watched them (main_tui)
        self.terminal_gone = False  # the terminal (or the browser) went away (tui.terminal)
        self._last_tick = None
        self._dirty = True
        self._sampling = False
        self._quitting = False
        self.info = InfoBar(id="info")
        self.summary = GpuSummary(id="summary")
        self.keybar = KeyBar(id="keys")
        self.monitor = MonitorPage(self.model, config.span_s, id="monitor")
        self.workloads = WorkloadsPage(self.model, id="workloads")

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.info
        yield self.summary
        with Pages(initial="monitor", id="pages"):
            yield self.monitor
            yield self.workloads
        yield self.keybar

    def get_driver_class(self):
        return driver_for(super().get_driver_class())  # one that survives losing the terminal (tui.terminal)

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def start_sampling(self) -> None:
        """Start the sampler (once). ``gputop`` calls this before ``run()``: the first ticks are read while Textual
        starts up, and the first frame shows them; the first tick to come after the first frame draws at once."""
        if self._sampling:
            return
        self._sampling = True
        model = self.model
        model.sampler.listeners += [model.sticky.observe, self._first_tick]
        if model.config.start_sampler:
            model.sampler.start()

    def _first_tick(self, tick: dict) -> None:
        """(Sampler thread) the first tick while the app runs: a frame now, not at the timer's next. A tick read
        before (sampling starts before Textual) is drawn by on_mount's frame; posting then, with no event loop
        yet, would put the message into the queue from this thread unguarded."""
        if not self.is_running:
            return
        self.model.sampler.listeners.remove(self._first_tick)
        self.post_message(Redraw())  # with the loop running, post_message hands it over thread-safely

    def on_mount(self) -> None:
        config = self.model.config
        self._set_size_classes(self.size.width, self.size.height)
        self.summary.display = len(self.model.statics) > 1
        self.start_sampling()
        if config.fps > 0:
            self.set_interval(1.0 / config.fps, self.frame)
        if config.settle_gc:
            self.set_timer(SETTLE_GC_S, settle_gc)
        self._watch_stop_signals()
        if config.autoplay:  # gputop --replay RUN.jsonl.gz: the run plays along with the telemetry
            self.model.load_specs()
            spec = next((s for s in self.model.specs if getattr(s, "path", None) == str(config.autoplay)), None)
            if spec is not None:
                self.workloads.replay(spec)
        self.frame(force=True)

    def on_resize(self, event) -> None:
        self._set_size_classes(event.size.width, event.size.height)
        self._dirty = True

    def _set_size_classes(self, w: int, h: int) -> None:
        self.set_class(w < NARROW_W, "-narrow")
        if (h < SHORT_H) != self.has_class("-short"):
            self.set_class(h < SHORT_H, "-short")
            self.monitor.verdict_panel.rebuild()  # compact (80x24) or full evidence
            self.monitor.device.rebuild()  # 80x24: pairs of rows merged

    # -- redraw ------------------------------------------------------------------------------------
    def _model_changed(self, change: str) -> None:
        """The model changed: draw soon (after every observer has heard it)."""
        if change == SOURCE:
            self.summary.display = len(self.model.statics) > 1
        self._dirty = True
        if self.is_running:  # (before, on_mount's first frame draws it)
            self.post_message(Redraw())

    def on_redraw(self, event: Redraw) -> None:
        if self.is_running:
            self.redraw()

    def redraw(self) -> None:
        """Draw now what a key or an event changed (not at the timer's next frame)."""
        self._dirty = True
        self.frame()

    def frame(self, force: bool = False) -> None:
        """Redraw what is visible if a new tick (or run event) arrived since the last frame."""
        if not self.is_running:  # shutting down: the timer may fire while widgets go away
            return
        model = self.model
        tick = model.sampler.latest()
        model.controller.trim()
        live = model.controller.recent(LIVE_RESULTS_KEEP_S)
        if live != self.has_class("-running"):
            self.set_class(live, "-running")
            self._dirty = True
        on_monitor = self.page == "monitor"
        results_shown = not on_monitor or (live and not self.has_class("-narrow"))
        results = self.monitor.live_results if on_monitor else self.workloads.results
        run_changed = results_shown and results.behind(model.shown_state())
        ticking = results_shown and model.controller.active  # a quiet run's elapsed time still moves
        self.keybar.expire()
        if not (force or self._dirty or run_changed or ticking or tick is not self._last_tick):
            return
        self._last_tick = tick
        self._dirty = False
        self.frames += 1
        self.info.show(self._header(), "1 monitor" if on_monitor else "2 workloads")
        self.keybar.show_keys(self.key_items())
        if model.tour is not None:
            self.keybar.show_banner(model.tour.line)
        samples = [model.sample(tick, i) for i in range(len(model.statics))]
        if len(model.statics) > 1:
            self.summary.show(model.statics, samples, model.selected)
        if on_monitor:
            self.monitor.draw(tick, samples, results_shown)
        else:
            self.workloads.draw()

    def key_items(self) -> list[tuple[str, str]]:
        """The key bar's keys (key, label) for what is shown."""
        return self.keybar.keys_for(self.page, len(self.model.statics), self.model.tour is not None)

    def _header(self) -> list[str]:
        return self.model.header_parts(self._last_tick)

    def notify(self, message: str, *, title: str = "", severity: str = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A notification shows in the key bar (wrapped, above the keys), never over the screen (Textual's
        toasts are not used); ``notes`` keeps every one (the tests read them)."""
        self.notes.append(str(message))
        del self.notes[:-100]
        self.post_message(Noted(str(message), severity))  # any thread may notify; the bar redraws on the app's

    def on_noted(self, event: Noted) -> None:
        self.keybar.message(event.text, event.severity)

    def screen_text(self) -> str:
        """The screen as plain text (tests, and the screenshots script's .txt copies)."""
        return svg_text(self.export_screenshot(), self.size.width)

    # -- the keys ----------------------------------------------------------------------------------
    def on_show_page(self, event: ShowPage) -> None:
        if self.page != event.name:
            self.action_page(event.name)

    def action_page(self, name: str) -> None:
        if name == "workloads":
            self.model.load_specs()
        self.page = name
        self.query_one(ContentSwitcher).current = name
        if name == "workloads" and self.model.specs:
            self.workloads.focus_list()
        else:
            self.set_focus(None)
        self.redraw()

    def action_gpu(self, step: int) -> None:
        if self.model.select_gpu(step):
            self.frame(force=True)
        else:  # g / G with one GPU (or none): say why nothing moved
            self.notify("this source has one GPU: g / G switch between GPUs" if self.model.statics
                        else "this source has no GPU: g / G switch between GPUs", severity="warning")

    def action_pause(self) -> None:
        self.model.toggle_pause()
        self.frame(force=True)

    def action_rate(self, step: int) -> None:
        if not self.model.step_rate(step):
            self.notify("a replay plays at its recorded rate (use --speed)", severity="warning")
            return
        self.frame(force=True)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_run(self) -> None:
        if self.page != "workloads":
            self.action_page("workloads")
            return
        self.workloads.start_run()

    def action_device(self) -> None:
        self.workloads.toggle_device()

    def action_cancel(self) -> None:
        self.workloads.cancel_run()

    def action_select_run(self, step: int) -> None:
        self.model.step_run(step)

    def action_save(self) -> None:
        self.workloads.save_shown()

    def action_whole_verdict(self) -> None:
        """v: the shown results' verdict whole, in the plot's place (and back)."""
        shown = self.monitor.live_results if self.page == "monitor" else self.workloads.results
        shown.toggle_whole_verdict()

    def action_tour_next(self) -> None:
        self.workloads.tour_next()

    # -- quitting: q, a stop signal, the terminal gone -------------------------------------------
    def _watch_stop_signals(self) -> None:
        """gputop's SIGINT, SIGTERM and SIGHUP end the TUI as q does: runs stopped through their supervisor,
        the terminal restored, exit 128+N. (Under a test's headless driver, tests call stop_for_signal.)"""
        if self.is_headless:
            return
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self.signal_arrived, sig)
        for sig in self.pending_signals:  # those that came while gputop started up (tui.main_tui noted them)
            self.signal_arrived(sig)

    def signal_arrived(self, signum: int) -> None:
        """SIGINT, SIGTERM or SIGHUP to gputop. The SIGHUP the kernel sends when the terminal goes is the loss
        already acted on (on_terminal_lost), not a second stop (which would kill the runs at once)."""
        if not (signum == signal.SIGHUP and self.terminal_gone):
            self.stop_for_signal(signum)

    def on_terminal_lost(self, event: TerminalLost) -> None:
        """The terminal or the browser is gone (tui.terminal): stop as SIGHUP does, exit 129; a quit already
        under way (q, a signal) goes on as it was."""
        self.terminal_gone = True
        if self.stop_signal is None and not self._quitting:
            self.stop_for_signal(signal.SIGHUP)

    def stop_for_signal(self, signum: int) -> None:
        """A stop signal: stop the runs (the supervisor kills them on a second one) and leave with 128+N."""
        self.stop_signal = self.stop_signal or signum
        self.model.controller.cancel(signum=signum)
        self.action_quit_clean()

    def exit_code(self) -> int:
        return exitcodes.for_signal(self.stop_signal) if self.stop_signal is not None else exitcodes.OK

    def action_quit_clean(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        if self.model.controller.active:
            self.notify("stopping the workload...")
            self.run_worker(self._stop_then_exit, thread=True)
        else:
            self.exit(self.exit_code())

    def _stop_then_exit(self) -> None:
        self.model.controller.stop_all()
        self.call_from_thread(self.exit, self.exit_code())

    def on_unmount(self) -> None:
        self.model.close()
