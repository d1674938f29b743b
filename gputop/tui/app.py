"""The gputop Textual app: two pages (monitor, workloads) over one sampler.

Sampling runs on the sampler's thread; the app redraws from a timer at ``fps`` (default 4) and only
when a new tick arrived (or a run changed, or a key changed what is shown), and only the page that is
shown: each page draws itself (``MonitorPage.draw``, ``WorkloadsPage.draw``). The app holds what the
pages share (the source, the selected GPU, the run controller, where workloads run), the key bindings (what
they do: ``key_actions``), and the frame timer. ``make_app`` builds it from command-line args or a
``TuiConfig`` (tests).
"""

from __future__ import annotations

import asyncio
import gc

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from gputop.runner.stop_signals import STOP_SIGNALS
from gputop.telemetry.sampler import Sampler
from gputop.tui import view
from gputop.tui.config import TuiConfig, config_from_args
from gputop.tui.containers import MainScreen, Pages
from gputop.tui.help import HelpScreen
from gputop.tui.key_actions import KeyActions
from gputop.tui.keybar import KeyBar
from gputop.tui.monitor_page import CHARTS, HOST_CHART, MonitorPage
from gputop.tui.panels import GpuStrip, InfoBar
from gputop.tui.runs import RunController, load_registry, no_live_gpu, with_recordings
from gputop.tui.terminal import driver_for
from gputop.tui.tour import Tour
from gputop.tui.workloads_page import WorkloadsPage

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


class Redraw(Message):
    """Draw now (posted from the sampler's thread)."""


class Noted(Message):
    """A notification, for the key bar."""

    def __init__(self, text: str, severity: str):
        super().__init__()
        self.text, self.severity = text, severity


def make_app(args_or_config) -> "GputopApp":
    config = args_or_config if isinstance(args_or_config, TuiConfig) else config_from_args(args_or_config)
    return GputopApp(config)


class GputopApp(KeyActions, App):
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
        Binding("n", "tour_next", "next stop", show=False),
        Binding("left_square_bracket", "select_run(-1)", "older run", show=False),
        Binding("right_square_bracket", "select_run(1)", "newer run", show=False),
        Binding("ctrl+c", "quit_clean", "quit", show=False, priority=True),
    ]

    def __init__(self, config: TuiConfig):
        super().__init__()
        self.config = config
        self.source = config.source
        self.sampler = config.sampler or Sampler(self.source, rate_hz=config.rate_hz)
        all_static = self.source.static()
        self.positions = config.gpus if config.gpus is not None else list(range(len(all_static)))
        self.statics = [all_static[p] for p in self.positions]
        self.peaks = [view.peaks_for(st) for st in self.statics]
        self.na_reasons = self.source.na_reasons  # why fields are n/a (live: fills as NVML fails)
        self.selected = 0
        self.page = "monitor"
        self.sticky = view.Sticky()
        self._last_tick = None
        self._dirty = True
        self._sampling = False
        self.frames = 0  # redraws done (for the benchmark and tests)
        # the workloads are loaded when first needed (the workloads page, the tour): loading runs every
        # workload module, CPU the monitor alone never needs
        self.specs, self.spec_errors = (config.specs, config.spec_errors) if config.specs is not None else ([], [])
        self.specs_loaded = config.specs is not None
        self.controller = RunController(self.sampler, nvml=self.source.nvml)
        self.no_gpu = no_live_gpu(self.source, self.statics, config.na_reason)  # why runs stay on the CPU
        self.device = "cpu" if self.no_gpu else config.device  # where workloads run: "cuda" or "cpu"
        self.shown_run: int | None = None  # index into controller.runs; None: the latest
        self.tour = Tour() if config.tour else None  # gputop --tour: n steps to the next stop
        self.touring = self.tour is not None
        self.notes: list[str] = []  # the notifications so far, oldest first (the last 100)
        self.home_source = None  # the session's own source while the monitor follows a recording (tui.follow)
        self._quitting = False
        self.stop_signal: int | None = None  # the first SIGINT/SIGTERM/SIGHUP gputop got, if any
        self.pending_signals: list[int] = []  # stop signals that came before the app watched them (main_tui)
        self.info = InfoBar(id="info")
        self.strip = GpuStrip(id="strip")
        self.keybar = KeyBar(id="keys")
        self.monitor = MonitorPage(CHARTS if self.statics else [HOST_CHART], config.span_s, id="monitor")
        self.workloads = WorkloadsPage(id="workloads")
        if self.specs_loaded:
            self._add_recordings()

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.info
        yield self.strip
        with Pages(initial="monitor", id="pages"):
            yield self.monitor
            yield self.workloads
        yield self.keybar

    def start_sampling(self) -> None:
        """Start the sampler (once). ``gputop`` calls this before ``run()``: the first ticks are read while Textual
        starts up, and the first frame shows them; the first tick to come after the first frame draws at once."""
        if self._sampling:
            return
        self._sampling = True
        self.sampler.listeners += [self.sticky.observe, self._first_tick]
        if self.config.start_sampler:
            self.sampler.start()

    def _first_tick(self, tick: dict) -> None:
        """(Sampler thread) the first tick while the app runs: a frame now, not at the timer's next. A tick read
        before (sampling starts before Textual) is drawn by on_mount's frame; posting then, with no event loop
        yet, would put the message into the queue from this thread unguarded."""
        if not self.is_running:
            return
        self.sampler.listeners.remove(self._first_tick)
        self.post_message(Redraw())  # with the loop running, post_message hands it over thread-safely

    def on_redraw(self, event: "Redraw") -> None:
        if self.is_running:
            self.redraw()

    def load_specs(self) -> None:
        """The workloads (the registry's, and the recorded runs to offer), on first need."""
        if self.specs_loaded:
            return
        self.specs_loaded = True
        self.specs, self.spec_errors = load_registry()
        self._add_recordings()
        if self.workloads.is_mounted:
            self.workloads.show_specs()

    def _add_recordings(self) -> None:
        from gputop.runner.recording import shipped as shipped_runs

        shipped = shipped_runs() if self.config.specs is None and self.no_gpu else []  # the GPU runs gputop ships
        if self.config.recordings or shipped:
            self.specs, errors = with_recordings(self.specs, list(self.config.recordings) + shipped)
            self.spec_errors = list(self.spec_errors) + errors

    def get_driver_class(self):
        return driver_for(super().get_driver_class())  # one that survives losing the terminal (tui.terminal)

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def on_mount(self) -> None:
        self._set_size_classes(self.size.width, self.size.height)
        self.strip.display = len(self.statics) > 1
        self.start_sampling()
        if self.config.fps > 0:
            self.set_interval(1.0 / self.config.fps, self.frame)
        if self.config.settle_gc:
            self.set_timer(SETTLE_GC_S, settle_gc)
        self._watch_stop_signals()
        if self.config.autoplay:  # gputop --replay RUN.jsonl.gz: the run plays along with the telemetry
            self.load_specs()
            spec = next((s for s in self.specs if getattr(s, "path", None) == str(self.config.autoplay)), None)
            if spec is not None:
                self.workloads.replay(spec)
        self.frame(force=True)

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
    def frame(self, force: bool = False) -> None:
        """Redraw what is visible if a new tick (or run event) arrived since the last frame."""
        if not self.is_running:  # shutting down: the timer may fire while widgets go away
            return
        tick = self.sampler.latest()
        self.controller.trim()
        live = self.controller.recent(LIVE_RESULTS_KEEP_S)
        if live != self.has_class("-running"):
            self.set_class(live, "-running")
            self._dirty = True
        on_monitor = self.page == "monitor"
        results_shown = not on_monitor or (live and not self.has_class("-narrow"))
        results = self.monitor.live_results if on_monitor else self.workloads.results
        run_changed = results_shown and results.behind(self.shown_state())
        ticking = results_shown and self.controller.active  # a quiet run's elapsed time still moves
        self.keybar.expire()
        if not (force or self._dirty or run_changed or ticking or tick is not self._last_tick):
            return
        self._last_tick = tick
        self._dirty = False
        self.frames += 1
        self.info.show(self._header(), "1 monitor" if on_monitor else "2 workloads")
        self.keybar.show_keys(self.keybar.keys_for(self.page, len(self.statics), self.touring))
        if self.tour is not None:
            self.keybar.show_banner(self.tour.line)
        samples = [self._sample(tick, i) for i in range(len(self.statics))]
        if len(self.statics) > 1:
            self.strip.show(self.statics, samples, self.selected)
        if on_monitor:
            self.monitor.draw(tick, samples, results_shown)
        else:
            self.workloads.draw()

    def notify(self, message: str, *, title: str = "", severity: str = "information", timeout: float | None = None,
               markup: bool = True) -> None:
        """A notification shows in the key bar (wrapped, above the keys), never over the screen (Textual's
        toasts are not used); ``notes`` keeps every one (the tests read them)."""
        self.notes.append(str(message))
        del self.notes[:-100]
        self.post_message(Noted(str(message), severity))  # any thread may notify; the bar redraws on the app's

    def on_noted(self, event: "Noted") -> None:
        self.keybar.message(event.text, event.severity)

    def redraw(self) -> None:
        """Draw now what a key or an event changed (not at the timer's next frame)."""
        self._dirty = True
        self.frame()

    def _sample(self, tick: dict | None, i: int) -> dict | None:
        if tick is None:
            return None
        gpus = tick["gpus"]
        pos = self.positions[i]
        return self.sticky.apply(pos, gpus[pos]) if pos < len(gpus) else None

    def _header(self) -> list[str]:
        host = self.source.hostname if self.home_source is not None else self.config.hostname  # a followed replay's
        parts = view.source_header(self.source, self.statics, self.sampler.rate_hz, host, self.sampler.paused)
        if self.config.read_only:
            parts.append("read-only")
        tick = self._last_tick
        if tick and tick.get("phase"):
            parts.append(f"phase: {tick['phase']}")
        return parts

    def refuse_control(self, what: str) -> bool:
        """A browser's read-only view (gputop --serve without --serve-control): say so, and True (refused)
        for a key that would start, stop or save a run."""
        if not self.config.read_only:
            return False
        self.notify(f"read-only view: cannot {what} here (gputop --serve --serve-control allows it)", severity="warning")
        return True

    def watched_pid(self) -> int | None:
        """The process the verdict diagnoses as the feeding one: a running workload's."""
        own = [r.run.pid for r in self.controller.active if getattr(r.run, "pid", None) is not None]
        return own[0] if own else None

    def tagged_pids(self) -> dict[int, str]:
        """Other processes to tag in the process table ({pid: tag}); the command app's."""
        return {}

    def shown_state(self):
        """The run the results show (the latest unless [ ] picked another); None before any run."""
        runs = self.controller.runs
        if not runs:
            return None
        i = len(runs) - 1 if self.shown_run is None else max(0, min(self.shown_run, len(runs) - 1))
        return runs[i]

    def nvml_index(self) -> int | None:
        """The NVML index of the selected GPU (None without a GPU)."""
        if not self.statics:
            return None
        return self.statics[self.selected].get("index")

    def screen_text(self) -> str:
        """The screen as plain text (tests, and the screenshots script's .txt copies)."""
        import io

        from rich.console import Console

        w, h = self.size
        console = Console(width=w, height=h, file=io.StringIO(), force_terminal=True, color_system=None,
                          record=True, legacy_windows=False, safe_box=False)
        console.print(self.screen._compositor.render_update(full=True, screen_stack=self._background_screens))
        return console.export_text()

    def on_unmount(self) -> None:
        self.controller.stop_all(timeout=5.0)
        self.sampler.stop()
        for source in {id(s): s for s in (self.source, self.home_source) if s is not None}.values():
            source.close()
