"""The monitor page: the selected GPU's device panel, verdict and processes on the left; its history
charts and a running workload's live results on the right.

The page draws itself when the app's frame asks (``draw``), from the model (gputop/tui/model: the
sampler, statics, positions, selected GPU, peaks, the run controller), follows its changes (another
source: its charts), and carries out the keys the app routes to it (g / G, p, + / -). The live verdicts are the
model's (``model.live``, judged on the sampler's thread at each tick): a frame reads their latest snapshot, the panel
the selected GPU's (gputop/tui/monitor/verdict.py), the strip every GPU's, the same objects. The page owns the
feeding of its charts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from gputop.format import gpm_na
from gputop.tui.messages import Redraw
from gputop.tui.model import GPU, SOURCE, TuiModel, view
from gputop.tui.monitor.panels import DevicePanel, ProcessTable, VerdictPanel
from gputop.tui.monitor.strip import GpuStrip
from gputop.tui.monitor.verdict import Diagnosis
from gputop.tui.results.panel import ResultsView
from gputop.tui.widgets.containers import Box, Column
from gputop.tui.widgets.history_chart import HistoryChart



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
KEPT_CHARTS = 2  # the charts that always keep a title and two rows: SM activity and DRAM bandwidth


def charts_for(model: TuiModel) -> list[ChartSpec]:
    """The charts of the model's source: the GPU's, or the host's where there is no GPU."""
    return CHARTS if model.statics else [HOST_CHART]


class MonitorPage(Box):
    """Device panel, verdict, processes, charts, live results. ``draw`` once per frame of the app."""

    def __init__(self, model: TuiModel, span_s: float, **kwargs):
        super().__init__(**kwargs)
        self.model = model
        model.observe(self._model_changed)
        self.chart_specs = charts_for(model)
        self.span_s = span_s
        self.strip = GpuStrip(id="gpu-strip")  # every GPU's verdict, NVLink traffic (hidden on one GPU without it)
        self.device = DevicePanel(id="device")
        self.verdict_panel = VerdictPanel(id="verdict")
        self.procs = ProcessTable(id="procs")
        self.live_results = ResultsView(id="live-results")
        self.generation = 0  # charts made anew (another source) get new ids
        self.charts = self._make_charts(self.chart_specs)
        self.diagnosis = Diagnosis()  # the selected GPU's live verdict, as the last frame read it
        self.verdicts: list = []  # every GPU's verdict (one GPU: its only)
        self.verdict = None  # the selected GPU's

    def _make_charts(self, specs: list[ChartSpec]) -> list[HistoryChart]:
        g = f"-{self.generation}" if self.generation else ""
        return [HistoryChart(spec.title, spec.field, hi=spec.hi, unit=spec.unit, color=spec.color, span=self.span_s,
                             fill=self._fill_chart, id=f"chart{i}{g}", classes="extra-chart" if i >= 2 else "")
                for i, spec in enumerate(specs)]

    def _model_changed(self, change: str) -> None:
        if change == SOURCE:
            self.set_charts(charts_for(self.model))
        if change in (SOURCE, GPU):
            self.read_verdicts()

    def set_charts(self, specs: list[ChartSpec]) -> None:
        """Another source (a recorded run followed): its charts, each refilled from the new sampler."""
        if [s.field for s in specs] == [s.field for s in self.chart_specs]:
            for chart in self.charts:
                chart.stale = True
            return
        for chart in self.charts:
            chart.remove()
        self.generation += 1
        self.chart_specs, self.charts = specs, self._make_charts(specs)
        self.chart_box.mount_all(self.charts)

    def compose(self) -> ComposeResult:
        with Column(id="left"):
            yield self.strip
            yield self.device
            yield self.verdict_panel
            yield self.procs
        with Column(id="right"):
            with Column(id="charts") as self.chart_box:
                yield from self.charts
            yield self.live_results

    def draw(self, tick: dict | None, samples: list[dict | None], show_results: bool) -> None:
        app, model = self.app, self.model
        source = model.source
        recorded = (source.hostname or "") if source.kind == "replay" else None  # a replay: its host's
        host = view.host_line(tick.get("host") if tick else None, recorded)
        if not model.statics:
            why = model.config.na_reason or "no GPU in this source"
            self.device.data = None  # (a resize redraws from data: none now)
            width = max(20, self.device.wh[0] or 80)
            lines = [Text("no GPU", style="bold")]
            for line in (f"NVML: {why}", "showing host metrics only; try gputop --demo"):  # wrapped, not cut
                lines += Text(line, style="dim").wrap(app.console, width, overflow="fold")
            self.device.set_lines(lines)
            self.verdict_panel.show(None)
            self.procs.show(None, set(), host)
        else:
            i = model.selected
            st, pk, s = model.statics[i], model.peaks[i], samples[i]
            self.device.show(st, pk, s, view.na_reasons_for(st, model.na_reasons))
            self.read_verdicts()
            self.strip.show(model.statics, model.peaks, samples, i, self.verdicts)
            self.verdict_panel.show(self.verdict, self.diagnosis.words())
            if self.procs.display and not app.has_class("-short"):
                self.procs.show((s or {}).get("processes"), model.controller.own_pids(), host, model.tagged_pids())
        self.fit_charts()
        self.feed_charts()
        if show_results:
            self.live_results.show_run(model.shown_state())

    # -- the verdict -------------------------------------------------------------------------------
    def read_verdicts(self) -> None:
        """The live verdicts as the model's node last judged them (gputop/analysis/live.py: on the sampler's
        thread, each GPU fed every tick; the selected GPU's regime judged again every LIVE_EVERY_S, the others'
        every LIVE_STRIP_EVERY_S; the comms-bound ones looked at together). Nothing is judged here."""
        snap = self.model.live.snapshot()
        self.diagnosis = Diagnosis(snap, self.model.selected)
        self.verdicts = snap.verdicts()
        self.verdict = self.diagnosis.verdict

    # -- the charts --------------------------------------------------------------------------------
    def fit_charts(self) -> None:
        """Show only as many charts as get a title and two rows each. The first two (SM activity, DRAM bandwidth)
        do wherever they can: where the verdict stands above them (the narrow layout, 80x24) it gives up rows of its
        advice, down to two, for them, and takes them back when there is room again (where even that leaves no room
        for both, as at 80x24 with 8 GPUs, the verdict keeps its rows)."""
        h = self.chart_box.size.height
        if h <= 0:
            return
        short = self.app.has_class("-short")
        candidates = [c for c in self.charts if not (short and c.has_class("extra-chart"))]
        panel = self.verdict_panel
        if self.app.has_class("-narrow") and panel.shown:  # the verdict's rows and the charts' are one budget
            shared = h + panel.size.height  # (as the last layout shared them)
            want = min(KEPT_CHARTS, len(candidates)) * HistoryChart.MIN_ROWS
            if shared - want < panel.MIN_ROWS:  # no room for both even then (80x24, 8 GPUs): the verdict whole
                panel.limit(None)
            elif shared - panel.rows < want or panel.max_rows is not None:
                panel.limit(shared - want)
            h = shared - panel.rows  # the charts' rows once laid out again
        else:
            panel.limit(None)
        fit = max(1, h // HistoryChart.MIN_ROWS)
        for chart in self.charts:  # all of them: an inline display overrides the stylesheet's -short rule
            want = chart in candidates[:fit]
            if chart.display != want:
                chart.display = want

    def feed_charts(self, only: list[HistoryChart] | None = None) -> None:
        """Feed each visible chart (of ``only``) the ticks it has not seen yet: the whole window after a
        reset (a new size, another GPU, shown again after being hidden), else the ticks since its last."""
        model = self.model
        latest = model.sampler.latest()
        if latest is None:
            return
        pos = model.positions[model.selected] if model.statics else None
        shown, full = [], []
        for spec, chart in zip(self.chart_specs, self.charts):
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
        window = model.sampler.window(self.span_s) if full else []
        newer = [c.fed_t for _, c in shown if c not in full]
        recent = model.sampler.since(min(newer)) if newer else []
        st = model.statics[model.selected] if model.statics else {}
        reasons = view.na_reasons_for(st, model.na_reasons)
        for spec, chart in shown:
            if chart in full:
                chart.reset()
                ticks = window
            else:
                ticks = [t for t in recent if t["t"] > chart.fed_t]
            if not ticks:
                continue
            chart.fed_key, chart.fed_t = pos, ticks[-1]["t"]
            if spec.gpm and not st.get("gpm_supported"):
                chart.draw(chart.fed_t, note=gpm_na(reasons, spec.field, False))
                continue
            ts = [t["t"] for t in ticks]
            if spec.field.startswith("host."):
                name = spec.field[5:]
                vs = [(t.get("host") or {}).get(name) for t in ticks]
            else:
                f = spec.field
                vs = [t["gpus"][pos].get(f) if pos < len(t["gpus"]) else None for t in ticks]
            chart.feed(ts, vs)
            chart.draw(chart.fed_t, hi=st.get(spec.hi_static) if spec.hi_static else None,
                       mark=self.diagnosis.span())

    def _fill_chart(self, chart: HistoryChart) -> None:
        """A chart was resized: refill it at its new size now (not at the app's next frame)."""
        if self.is_attached and self.app.is_running:
            self.feed_charts(only=[chart])

    def short_changed(self) -> None:
        """The app went to 80x24 (its -short) or back: the verdict compact or whole, the device panel's pairs of rows
        merged or not."""
        self.verdict_panel.rebuild()
        self.device.rebuild()

    # -- the keys the app routes here: g / G, p, + / - -------------------------------------------------------------
    def step_gpu(self, step: int) -> None:
        """The next (previous) GPU; with one GPU (or none), why nothing moved. (The model's change draws it.)"""
        if not self.model.select_gpu(step):
            self.notify("this source has one GPU: g / G switch between GPUs" if self.model.statics
                        else "this source has no GPU: g / G switch between GPUs", severity="warning")

    def show_stacks(self) -> None:
        """k: every rank's stack (read now), the culprit of a stall first (gputop/tui/monitor/stacks.py)."""
        from gputop.tui.monitor.stacks import StacksScreen

        if not isinstance(self.app.screen, StacksScreen):
            self.app.push_screen(StacksScreen(self.model))

    def toggle_pause(self) -> None:
        self.model.toggle_pause()
        self.post_message(Redraw())

    def step_rate(self, step: int) -> None:
        if self.model.step_rate(step):
            self.post_message(Redraw())
        else:
            self.notify("a replay plays at its recorded rate (use --speed)", severity="warning")
