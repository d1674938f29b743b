"""The gputop Textual app: the monitor page and the workloads page over one sampler.

Sampling runs on the sampler's thread; the UI redraws from a timer at ``fps`` (default 4) and only
when a new tick arrived (or a run changed), and only the page that is shown. Charts are downsampled
to their width. ``make_app`` builds the app from command-line args or a ``TuiConfig`` (tests).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from rich.style import Style as RichStyle
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.geometry import Region
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widgets import ContentSwitcher, Footer, OptionList, Static

from gputop.telemetry.sampler import MAX_RATE_HZ, MIN_RATE_HZ, Sampler
from gputop.tui import view
from gputop.tui.runs import RunController, load_registry, parse_values, save_document
from gputop.tui.verdict import Diagnosis
from gputop.tui.widgets import DevicePanel, GpuStrip, HistoryChart, InfoBar, Lines, ProcessTable, VerdictPanel
from gputop.tui.workloads import ParamForm, ResultsView, WorkloadsPage
from gputop.workload_api import ParamError

RATES = (0.5, 1.0, 2.0, 4.0, 5.0, 10.0, 20.0, 50.0)
NARROW_W, SHORT_H = 110, 32
VERDICT_WINDOW_S = 3.0  # the verdict panel classifies the last 3 s, once a second
LIVE_RESULTS_KEEP_S = 30.0  # the monitor page keeps a finished run's results this long

HELP = """\
[b]gputop keys[/b]
  1 / 2        monitor page / workloads page
  g / G        next / previous GPU (the strip on top lists them all)
  p            pause sampling (the screen freezes)
  + / -        sampling rate up / down
  r / Enter    run the selected workload with the parameters in the form
  c            cancel the running workload (a second c kills it)
  d            run workloads on the CPU / the GPU
  [ / ]        older / newer run in the results
  s            save the shown run as JSON (in the current folder)
  ?            this help;  q quits (stopping a running workload cleanly)

[b]reading the numbers[/b]
  SM activity   fraction of SMs busy (GPM, Hopper+): how much of the GPU works
  SM occupancy  resident warps vs the maximum: latency hiding
  DRAM bandwidth  share of the peak memory bandwidth in use
  Tensor active   tensor-core pipes busy: is the math on tensor cores?
  Kernel duty   NVML "utilization": the share of time ANY kernel ran. 100% can
                mean one tiny kernel on one SM - a duty cycle, not throughput.
  Clock events  why clocks are below max (power cap, thermal, idle...)

Press Escape, q or ? to close."""


class Blank:
    """A layout-only container: paints its background and nothing else.

    Textual renders every widget that overlaps the bounding box of a frame's changed rows, so a
    plain container would run its styles cache over every row of the screen at each frame; this
    returns one cached blank strip (background only, as Textual paints padding).
    """

    _blank_style: RichStyle | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._blank_style is None:
            self._blank_style = RichStyle.from_color(bgcolor=self.background_colors[1].rich_color)
        return [Strip.blank(crop.width, self._blank_style)] * crop.height

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._blank_style = None


class Box(Blank, Container):
    pass


class Column(Blank, Vertical):
    pass


class Pages(Blank, ContentSwitcher):
    pass


class MainScreen(Blank, Screen):
    pass


@dataclass
class ChartSpec:
    title: str
    field: str  # sample field, or "host.cpu_pct"
    unit: str = "%"
    color: str = "green"
    gpm: bool = True
    hi_static: str | None = None  # static field that sets the top (power limit)
    hi: float = 100.0


CHARTS = [
    ChartSpec("SM activity", "sm_active_pct", color="green"),
    ChartSpec("DRAM bandwidth", "dram_bw_pct", color="cyan"),
    ChartSpec("Tensor active", "tensor_pct", color="magenta"),
    ChartSpec("Kernel duty (NVML util)", "util_gpu_pct", color="blue", gpm=False),
    ChartSpec("Power", "power_w", unit="W", color="yellow", gpm=False, hi_static="power_limit_w", hi=1000.0),
]
HOST_CHART = ChartSpec("Host CPU", "host.cpu_pct", color="green", gpm=False)


@dataclass
class TuiConfig:
    source: object
    rate_hz: float = 10.0
    gpus: list[int] | None = None  # positions in the source's GPUs to show (default all)
    hostname: str | None = None
    start_sampler: bool = True  # tests step the sampler by hand
    fps: float = 4.0  # the charts move at >= 4 frames a second; each frame costs CPU (0: no frame timer;
    # the caller draws with frame(): tests, so that nothing they see depends on a timer)
    span_s: float = 60.0
    device: str = "cuda"  # where workloads run by default
    timeout: float | None = None
    save_dir: str | None = None
    na_reason: str | None = None  # why there is no GPU (live source without NVML)
    specs: list | None = None  # workloads (default: the runner's registry)
    spec_errors: list[str] = field(default_factory=list)
    sampler: object | None = None  # a sampler made elsewhere (gputop --tui --run: the Monitor's)


def config_from_args(args) -> TuiConfig:
    """Open the source the command line asks for (raises SourceError)."""
    from gputop.sources import check_gpus, open_source

    src = open_source(args, need_gpu=False, loop_demo=True)
    statics = src.static()
    live = getattr(src, "kind", "") == "live"
    positions = list(range(len(statics))) if live else check_gpus(args.gpu, statics)
    host = platform.node() if live else getattr(src, "header", {}).get("hostname")
    na = None
    if live and not statics:
        nvml = getattr(src, "nvml", None)
        na = getattr(nvml, "error", None) or "no NVIDIA GPU found"
    device = getattr(args, "device", "cuda")
    if live and not statics:
        device = "cpu"
    return TuiConfig(source=src, rate_hz=args.rate, gpus=positions, hostname=host, device=device,
                     timeout=getattr(args, "timeout", None), na_reason=na)


def make_app(args_or_config) -> "GputopApp":
    config = args_or_config if isinstance(args_or_config, TuiConfig) else config_from_args(args_or_config)
    return GputopApp(config)


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; max-width: 90; height: auto; max-height: 100%; padding: 1 2;
                          border: round $primary; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        yield Static(HELP)


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
        self.selected = 0
        self.page = "monitor"
        self.sticky = view.Sticky()
        self.diagnosis = Diagnosis()
        self.verdict = None
        self._verdict_t: float | None = None
        self._last_tick = None
        self._dirty = True
        self.frames = 0  # redraws done (for the benchmark and tests)
        self._charts: list[HistoryChart] | None = None
        if config.specs is None:
            self.specs, self.spec_errors = load_registry()
        else:
            self.specs, self.spec_errors = config.specs, config.spec_errors
        self.controller = RunController(self.sampler, nvml=getattr(self.source, "nvml", None))
        self.device = config.device
        self.shown_run: int | None = None  # index into controller.runs; None: the latest
        self._quitting = False

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield InfoBar(id="info")
        yield GpuStrip(id="strip")
        with Pages(initial="monitor", id="pages"):
            with Box(id="monitor"):
                with Column(id="left"):
                    yield DevicePanel(id="device")
                    yield VerdictPanel(id="verdict")
                    yield ProcessTable(id="procs")
                with Column(id="right"):
                    with Column(id="charts"):
                        for i, spec in enumerate(self._chart_specs()):
                            yield HistoryChart(spec.title, spec.field, hi=spec.hi, unit=spec.unit, color=spec.color,
                                               span=self.config.span_s, fill=self._fill_chart, id=f"chart{i}",
                                               classes="extra-chart" if i >= 2 else "")
                    yield ResultsView(id="live-results")
            yield WorkloadsPage(self.specs, self.spec_errors, id="workloads")
        yield Footer()

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def _chart_specs(self) -> list[ChartSpec]:
        return CHARTS if self.statics else [HOST_CHART]

    def on_mount(self) -> None:
        self.w = {name: self.query_one(f"#{name}") for name in ("info", "strip", "device", "verdict", "procs",
                                                               "live-results")}
        self._set_size_classes(self.size.width, self.size.height)
        self.w["strip"].display = len(self.statics) > 1
        self.sampler.listeners.append(self.sticky.observe)
        if self.config.start_sampler:
            self.sampler.start()
        if self.config.fps > 0:
            self.set_interval(1.0 / self.config.fps, self.frame)
        self.frame(force=True)

    def on_resize(self, event) -> None:
        self._set_size_classes(event.size.width, event.size.height)
        self._dirty = True

    def _set_size_classes(self, w: int, h: int) -> None:
        self.set_class(w < NARROW_W, "-narrow")
        if (h < SHORT_H) != self.has_class("-short"):
            self.set_class(h < SHORT_H, "-short")
            if hasattr(self, "w"):
                self.w["verdict"].rebuild()  # compact (80x24) or full evidence

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
        results_shown = self.page == "workloads" or (live and not self.has_class("-narrow"))
        shown = self.shown_state()
        run_changed = results_shown and shown is not None and shown.events != shown.seen
        if not (force or self._dirty or run_changed or tick is not self._last_tick):
            return
        self._last_tick = tick
        self._dirty = False
        self.frames += 1
        w = self.w
        w["info"].show(self._header(), "1 monitor" if self.page == "monitor" else "2 workloads")
        samples = [self._sample(tick, i) for i in range(len(self.statics))]
        if len(self.statics) > 1:
            w["strip"].show(self.statics, samples, self.selected)
        if self.page == "monitor":
            self._draw_monitor(tick, samples)
            if results_shown:
                self._draw_results(w["live-results"])
        else:
            self._draw_workloads()

    def _sample(self, tick: dict | None, i: int) -> dict | None:
        if tick is None:
            return None
        gpus = tick["gpus"]
        pos = self.positions[i]
        return self.sticky.apply(pos, gpus[pos]) if pos < len(gpus) else None

    def _header(self) -> list[str]:
        kind = getattr(self.source, "kind", "live")
        mode = "demo" if kind == "replay" and getattr(self.source, "loop", False) else kind
        rate = self.sampler.rate_hz
        if kind == "replay":
            rate = (getattr(self.source, "header", {}) or {}).get("rate_hz") or rate
        parts = view.header_parts(self.statics, mode, rate, self.config.hostname,
                                  self.sampler.paused, getattr(self.source, "label", ""))
        if getattr(self.source, "finished", False):
            parts[-1] += " (finished)"
        tick = self._last_tick
        if tick and tick.get("phase"):
            parts.append(f"phase: {tick['phase']}")
        return parts

    def _draw_monitor(self, tick: dict | None, samples: list[dict | None]) -> None:
        device, procs, verdict = self.w["device"], self.w["procs"], self.w["verdict"]
        host = view.host_line(tick.get("host") if tick else None)
        if not self.statics:
            why = self.config.na_reason or "no GPU in this source"
            device.set_lines([Text("no GPU", style="bold"), Text(f"NVML: {why}", style="dim"),
                              Text("showing host metrics only; try gputop --demo", style="dim")])
            verdict.show(None)
            procs.show(None, set(), host)
        else:
            i = self.selected
            st, pk, s = self.statics[i], self.peaks[i], samples[i]
            device.show(st, pk, s)
            self._update_verdict(tick, i)
            verdict.show(self.verdict if self.diagnosis.available else None)
            if procs.display and not self.has_class("-short"):
                procs.show((s or {}).get("processes"), self.controller.own_pids(), host, self.tagged_pids())
        self._draw_charts()

    def _update_verdict(self, tick: dict | None, i: int) -> None:
        if tick is None or not self.diagnosis.available:
            return
        if self._verdict_t is not None and 0 <= tick["t"] - self._verdict_t < 1.0:
            return
        self._verdict_t = tick["t"]
        window = self.sampler.window(VERDICT_WINDOW_S)
        self.verdict = self.diagnosis(window, self.statics[i], self.peaks[i], gpu_pos=self.positions[i],
                                      watched_pid=self.watched_pid())

    def watched_pid(self) -> int | None:
        """The process the verdict diagnoses as the feeding one: a running workload's."""
        own = [r.run.proc.pid for r in self.controller.active if getattr(r.run, "proc", None) is not None]
        return own[0] if own else None

    def tagged_pids(self) -> dict[int, str]:
        """Other processes to tag in the process table ({pid: tag}); the command app's."""
        return {}

    def _draw_charts(self, only: list[HistoryChart] | None = None) -> None:
        """Feed each visible chart (of ``only``) the ticks it has not seen yet: the whole window after a
        reset (a new size, another GPU, shown again after being hidden), else the ticks since its last."""
        latest = self.sampler.latest()
        if latest is None:
            return
        if self._charts is None:
            self._charts = [self.query_one(f"#chart{i}", HistoryChart) for i in range(len(self._chart_specs()))]
        pos = self.positions[self.selected] if self.statics else None
        shown, full = [], []
        for spec, chart in zip(self._chart_specs(), self._charts):
            if only is not None and chart not in only:
                continue
            if not (chart.display and chart.wh[1] > 0):
                chart.stale = True  # hidden or not laid out: refilled when it shows (its resize)
                continue
            shown.append((spec, chart))
            if chart.stale or chart.fed_key != pos or chart.fed_t is None or latest["t"] < chart.fed_t:
                full.append(chart)
        if not shown:
            return
        window = self.sampler.window(self.config.span_s) if full else []
        newer = [c.fed_t for _, c in shown if c not in full]
        recent = self.sampler.since(min(newer)) if newer else []
        st = self.statics[self.selected] if self.statics else {}
        for spec, chart in shown:
            if chart in full:
                chart.reset()
                ticks = window
            else:
                ticks = [t for t in recent if t["t"] > chart.fed_t]
            if not ticks:
                continue
            chart.fed_key, chart.fed_t = pos, ticks[-1]["t"]
            t_end = chart.fed_t
            if spec.gpm and not st.get("gpm_supported"):
                chart.draw(t_end, note=view.GPM_NA)
                continue
            ts = [t["t"] for t in ticks]
            if spec.field.startswith("host."):
                name = spec.field[5:]
                vs = [(t.get("host") or {}).get(name) for t in ticks]
            else:
                f = spec.field
                vs = [t["gpus"][pos].get(f) if pos < len(t["gpus"]) else None for t in ticks]
            chart.feed(ts, vs)
            chart.draw(t_end, hi=st.get(spec.hi_static) if spec.hi_static else None)

    def _fill_chart(self, chart: HistoryChart) -> None:
        """A chart was resized: refill it at its new size now (not at the next frame)."""
        if self.is_running:
            self._draw_charts(only=[chart])

    # -- workloads ---------------------------------------------------------------------------------
    def shown_state(self):
        runs = self.controller.runs
        if not runs:
            return None
        i = len(runs) - 1 if self.shown_run is None else max(0, min(self.shown_run, len(runs) - 1))
        return runs[i]

    def _draw_results(self, widget: ResultsView) -> None:
        st = self.shown_state()
        if st is None:
            widget.show(None)
            return
        if st.events != st.seen or widget.doc is None:
            st.seen = st.events
            widget.show(st.document(), st.progress)
        elif st.active:  # keep the wall time moving
            widget.show(widget.doc, st.progress)

    def _draw_workloads(self) -> None:
        page = self.query_one(WorkloadsPage)
        spec = page.spec
        runs = self.controller.runs
        where = "CPU" if self.device == "cpu" else f"GPU {self._nvml_index()}"
        hint = Text(f"runs on: {where}   Enter/r run   c cancel   d cpu/gpu   Esc leave the form", style="dim")
        focused = self.focused
        if spec is not None and focused is not None and (focused.id or "").startswith("param-"):
            p = next((p for p in spec.params if p.name == focused.id[len("param-"):]), None)
            if p is not None:
                hint = Text(f"{p.name}: {p.help} ({p.allowed()}; default {p.default})")
        self._set_static(page.query_one("#wl-hint", Static), hint)
        if spec is not None:
            desc = Text(spec.description)
            notes = []
            if spec.needs:
                notes.append("needs " + ", ".join(spec.needs))
            if not spec.supports_cpu:
                notes.append("GPU only")
            if notes:
                desc.append("  (" + "; ".join(notes) + ")", style="dim")
            self._set_static(page.query_one("#wl-desc", Static), desc)
        shown = self.shown_state()
        line = Text()
        if runs:
            idx = runs.index(shown) + 1
            line.append(f"run {idx}/{len(runs)} ", style="bold")
            line.append("([ ] to switch, s to save JSON)", style="dim")
            if shown.saved_to:
                line.append(f"  saved: {shown.saved_to}", style="green")
        page.query_one("#wl-runs", Lines).set_lines([line])
        self._draw_results(page.query_one("#wl-results", ResultsView))

    @staticmethod
    def _set_static(widget: Static, content: Text) -> None:
        """Update a Static only when its text changed (an update re-lays the page out)."""
        if getattr(widget, "_gputop_shown", None) != content:
            widget._gputop_shown = content
            widget.update(content)

    def _nvml_index(self) -> int | None:
        if not self.statics:
            return None
        return self.statics[self.selected].get("index")

    async def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        spec = self.specs[event.option_index]
        await self.query_one(ParamForm).load(spec, self.device)
        self._dirty = True

    def on_descendant_focus(self) -> None:
        if self.page == "workloads":
            self._dirty = True
            self.frame()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_run()

    def on_input_submitted(self) -> None:
        self.action_run()

    # -- actions -----------------------------------------------------------------------------------
    def action_page(self, name: str) -> None:
        self.page = name
        self.query_one(ContentSwitcher).current = name
        if name == "workloads" and self.specs:
            ol = self.query_one("#wl-list", OptionList)
            if ol.highlighted is None:
                ol.highlighted = 0
            ol.focus()
        else:
            self.set_focus(None)
        self._dirty = True
        self.frame()

    def action_gpu(self, step: int) -> None:
        if len(self.statics) > 1:
            self.selected = (self.selected + step) % len(self.statics)
            self._verdict_t = None
            self.frame(force=True)

    def action_pause(self) -> None:
        self.sampler.paused = not self.sampler.paused
        self.frame(force=True)

    def action_rate(self, step: int) -> None:
        if getattr(self.source, "kind", "live") == "replay":
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
        if self.device == "cpu" and self.statics:
            self.device = "cuda"
        else:
            self.device = "cpu"
        spec = self.query_one(WorkloadsPage).spec
        if spec is not None:
            self.run_worker(self.query_one(ParamForm).load(spec, self.device))
        self._dirty = True
        self.notify(f"workloads run on the {'CPU' if self.device == 'cpu' else 'GPU'}")

    def action_run(self) -> None:
        if self.page != "workloads":
            self.action_page("workloads")
            return
        page = self.query_one(WorkloadsPage)
        spec = page.spec
        if spec is None:
            self.notify("no workload selected", severity="warning")
            return
        if self.device == "cpu" and not spec.supports_cpu:
            self.notify(f"{spec.name} runs on a GPU only (press d)", severity="warning")
            return
        if self.device == "cuda" and not self.statics:
            self.notify("no GPU here: press d to run on the CPU", severity="warning")
            return
        try:
            values = parse_values(spec, self.query_one(ParamForm).texts())
            state = self.controller.start(spec, values, self.device, self._nvml_index() if self.device == "cuda" else None,
                                          timeout=self.config.timeout)
        except (ParamError, RuntimeError, ValueError, OSError) as exc:
            self.notify(str(exc), severity="error")
            return
        self.shown_run = None
        self.notify(f"started {state.name} on {state.target}")
        self._dirty = True

    def action_cancel(self) -> None:
        target = "CPU" if self.device == "cpu" else f"GPU {self._nvml_index()}"
        hit = self.controller.cancel(target) or self.controller.cancel()
        self.notify("stopping " + ", ".join(r.name for r in hit) if hit else "nothing is running",
                    severity="information" if hit else "warning")

    def action_select_run(self, step: int) -> None:
        runs = self.controller.runs
        if not runs:
            return
        cur = len(runs) - 1 if self.shown_run is None else self.shown_run
        self.shown_run = max(0, min(len(runs) - 1, cur + step))
        st = self.shown_state()
        st.seen = -1
        self._dirty = True

    def action_save(self) -> None:
        st = self.shown_state()
        if st is None:
            self.notify("no run to save", severity="warning")
            return
        try:
            st.saved_to = save_document(st.document(), self.config.save_dir)
        except OSError as exc:
            self.notify(f"cannot save: {exc}", severity="error")
            return
        self.notify(f"saved {st.saved_to}" + (" (partial: still running)" if st.active else ""))
        self._dirty = True

    def action_quit_clean(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        if self.controller.active:
            self.notify("stopping the workload...")
            self.run_worker(self._stop_then_exit, thread=True)
        else:
            self.exit(0)

    def _stop_then_exit(self) -> None:
        self.controller.stop_all()
        self.call_from_thread(self.exit, 0)

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
        close = getattr(self.source, "close", None)
        if close:
            close()
