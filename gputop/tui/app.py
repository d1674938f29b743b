"""The gputop Textual app: it composes two pages (monitor, workloads) over one model and routes keys and messages.

State lives in the model (gputop/tui/model), whose changes announce themselves: the app then draws a frame of the page
shown (also from a timer at ``fps``, when a tick came). The pages own their work: each draws itself and carries out
the keys routed to it (``BINDINGS``). How a session starts and ends is the lifecycle's (gputop/tui/lifecycle.py).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import ContentSwitcher

from gputop.tui.config import TuiConfig, config_from_args
from gputop.tui.crash import LoggedApp
from gputop.tui.header import GpuSummary, InfoBar
from gputop.tui.help import HelpScreen
from gputop.tui.lifecycle import Lifecycle
from gputop.tui.messages import Noted, Redraw, ShowPage, TerminalLost
from gputop.tui.model import TuiModel
from gputop.tui.monitor.page import MonitorPage
from gputop.tui.screen_text import svg_text
from gputop.tui.terminal import driver_for
from gputop.tui.widgets.containers import MainScreen, Pages
from gputop.tui.widgets.keybar import KeyBar
from gputop.tui.workloads.page import WorkloadsPage

NARROW_W, SHORT_H = 110, 32
LIVE_RESULTS_KEEP_S = 30.0  # the monitor page keeps a finished run's results this long


def make_app(args_or_config) -> "GputopApp":
    config = args_or_config if isinstance(args_or_config, TuiConfig) else config_from_args(args_or_config)
    return GputopApp(config)


class GputopApp(LoggedApp):
    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [  # the app's own keys, and those it routes (``to``) to a page, the model or the lifecycle
        Binding("1", "page('monitor')", "monitor"), Binding("2", "page('workloads')", "workloads"),
        Binding("question_mark", "help", "help"), Binding("q", "to('lifecycle', 'quit')", "quit"),
        Binding("ctrl+c", "to('lifecycle', 'quit')", "quit", show=False, priority=True),
        Binding("g", "to('monitor', 'step_gpu', 1)", "GPU"), Binding("k", "to('monitor', 'show_stacks')", "stacks"),
        Binding("G", "to('monitor', 'step_gpu', -1)", "prev GPU", show=False),
        Binding("p", "to('monitor', 'toggle_pause')", "pause"),
        Binding("plus,equals_sign", "to('monitor', 'step_rate', 1)", "rate+"),
        Binding("minus", "to('monitor', 'step_rate', -1)", "rate-"),
        Binding("r", "to('workloads', 'run_key')", "run"), Binding("c", "to('workloads', 'cancel_run')", "cancel"),
        Binding("d", "to('workloads', 'toggle_device')", "cpu/gpu", show=False),
        Binding("s", "to('workloads', 'save_shown')", "save"),
        Binding("n", "to('workloads', 'tour_next')", "next stop", show=False),
        Binding("left_square_bracket", "to('model', 'step_run', -1)", "older run", show=False),
        Binding("right_square_bracket", "to('model', 'step_run', 1)", "newer run", show=False),
        Binding("v", "to('shown_results', 'toggle_whole_verdict')", "verdict", show=False),
        Binding("w", "to('lifecycle', 'ask_window')", "window", show=False),
        Binding("a", "to('lifecycle', 'toggle_attribution')", "attribution", show=False),
    ]

    def __init__(self, config: TuiConfig, lifecycle: Lifecycle | None = None):
        super().__init__()
        self.model = TuiModel(config)
        self.model.observe(self._model_changed)
        self.lifecycle = lifecycle or Lifecycle()
        self.lifecycle.attach(self)
        self.page = "monitor"
        self.frames = 0  # redraws done (for the benchmark and tests)
        self.notes: list[str] = []  # the notifications so far, oldest first (the last 100)
        self._last_tick, self._dirty = None, True
        self.info, self.summary, self.keybar = InfoBar(id="info"), GpuSummary(id="summary"), KeyBar(id="keys")
        self.monitor = MonitorPage(self.model, config.span_s, id="monitor")
        self.workloads = WorkloadsPage(self.model, id="workloads")

    def compose(self) -> ComposeResult:
        yield from (self.info, self.summary)
        with Pages(initial="monitor", id="pages"):
            yield from (self.monitor, self.workloads)
        yield self.keybar

    def get_driver_class(self):
        return driver_for(super().get_driver_class())  # one that survives losing the terminal (tui.terminal)

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def on_mount(self) -> None:
        self._set_size_classes(self.size.width, self.size.height)
        self.lifecycle.start()  # sampling, the frame timer, the stop signals, --replay's run played along
        self.frame(force=True)

    def on_resize(self, event) -> None:
        self._set_size_classes(event.size.width, event.size.height)
        self._dirty = True

    def _set_size_classes(self, w: int, h: int) -> None:
        self.set_class(w < NARROW_W, "-narrow")
        if (h < SHORT_H) != self.has_class("-short"):
            self.set_class(h < SHORT_H, "-short")
            self.monitor.short_changed()

    # -- redraw --------------------------------------------------------------------------------------------------
    def _model_changed(self, change: str) -> None:
        """The model changed: draw soon (after every observer has heard it)."""
        self._dirty = True
        if self.is_running:  # (before, on_mount's first frame draws it)
            self.post_message(Redraw())

    @on(Redraw)
    def redraw(self, event: Redraw | None = None) -> None:
        """Draw now what a key, a message or an event changed (not at the timer's next frame)."""
        if self.is_running:
            self._dirty = True
            self.frame()

    def frame(self, force: bool = False) -> None:
        """Redraw what is visible if a new tick (or run event) arrived since the last frame."""
        if not self.is_running:  # shutting down: the timer may fire while widgets go away
            return
        self.lifecycle.frame()
        model, on_monitor = self.model, self.page == "monitor"
        tick = model.sampler.latest()
        model.controller.trim()
        live = model.controller.recent(LIVE_RESULTS_KEEP_S)
        if live != self.has_class("-running"):
            self.set_class(live, "-running")
            self._dirty = True
        results_shown = not on_monitor or (live and not self.has_class("-narrow"))
        run_moved = results_shown and (self.shown_results.behind(model.shown_state())
                                       or model.controller.active)  # (a quiet run's elapsed time moves too)
        self.keybar.expire()
        if not (force or self._dirty or run_moved or tick is not self._last_tick):
            return
        self._last_tick, self._dirty = tick, False
        self.frames += 1
        self.info.show(model.header_parts(tick), "1 monitor" if on_monitor else "2 workloads")
        self.keybar.show_keys(self.key_items(), model.tour.line if model.tour is not None else "")
        samples = [model.sample(tick, i) for i in range(len(model.statics))]
        self.summary.show(model.statics, samples, model.selected)
        if on_monitor:
            self.monitor.draw(tick, samples, results_shown)
        else:
            self.workloads.draw()

    @property
    def shown_results(self):
        """The results view of the page shown (the monitor's shows while a run goes, and a while after)."""
        return self.monitor.live_results if self.page == "monitor" else self.workloads.results

    def key_items(self) -> list[tuple[str, str]]:
        """The key bar's keys (key, label) for what is shown."""
        keys = self.keybar.keys_for(self.page, len(self.model.statics), self.model.tour is not None)
        return self.lifecycle.key_items(keys)

    def notify(self, message: str, *, title: str = "", severity: str = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """In the key bar, never over the screen (no toasts); ``notes`` keeps every one (the tests read them)."""
        self.notes.append(str(message))
        del self.notes[:-100]
        self.post_message(Noted(str(message), severity))

    def on_noted(self, event: Noted) -> None:  # (any thread may notify: the bar redraws on the app's)
        self.keybar.message(event.text, event.severity)

    def screen_text(self) -> str:
        """The screen as plain text (tests, and the screenshots script's .txt copies)."""
        return svg_text(self.export_screenshot(), self.size.width)

    # -- the keys and messages ---------------------------------------------------------------------------------
    def action_to(self, part: str, method: str, *args) -> None:
        """A key the app routes (``BINDINGS``): ``part`` (a page, the model, the lifecycle) carries it out."""
        getattr(getattr(self, part), method)(*args)

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

    def on_show_page(self, event: ShowPage) -> None:
        if self.page != event.name:
            self.action_page(event.name)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def on_terminal_lost(self, event: TerminalLost) -> None:
        self.lifecycle.terminal_lost()

    def on_unmount(self) -> None:
        self.lifecycle.unmount()  # (a command: stopped before the model closes its source)
        self.model.close()
