"""One GPU of the cluster page (Enter on its row; Escape goes back): who it is, its verdict (the class the page
shows, the classes over the window, the classifier's evidence and advice, what it had to do without), and its
charts over the last ``fleet/gpu_history.WINDOW_S`` from ``query_range``. The read runs on a worker thread; a
failed read is one line in place of the charts, and ``r`` reads again.
"""

from __future__ import annotations

import textwrap
from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen

from gputop.analysis import cluster as C
from gputop.analysis.cluster_text import class_text
from gputop.format import NA, span_text
from gputop.fleet.gpu_history import GpuHistory
from gputop.telemetry.errors import SourceError
from gputop.tui.widgets.history_chart import HistoryChart
from gputop.tui.widgets.keybar import KeyBar
from gputop.tui.widgets.lines import Lines

KEYS = [("Esc", "back"), ("r", "read again"), ("q", "quit")]
GIB = 2 ** 30
MIN_SPAN_S = 60.0
# (title, sample field, unit, colour): the charts, top to bottom
CHARTS = (("SM activity", "sm_active_pct", "%", "green"), ("DRAM bandwidth", "dram_bw_pct", "%", "blue"),
          ("Tensor active", "tensor_pct", "%", "magenta"), ("Memory used", "mem_used_bytes", "GiB", "yellow"))


def head_lines(row: C.ClusterGpu, history: GpuHistory | None, error: str | None, width: int) -> list[tuple]:
    job = f"job {', '.join(row.jobs)}" if row.jobs else "no job"
    who = f"{row.node} GPU {row.gpu} · {row.model or NA} · {job}"
    if error is not None:
        when = f"cannot read it: {error}"
    elif history is None:
        when = "reading its series (query_range)…"
    else:  # the span its charts show: the window asked, or less where the GPU was exported for less
        span = span_of(history)
        asked = f"; {span_text(history.window_s)} asked, exported for less" if span < history.window_s else ""
        when = f"the last {span_text(span)} (a point every {history.step_s:g} s{asked})"
    return [(who[:width], "bold"), (when[:width], "bold red" if error else "dim")]


def verdict_lines(row: C.ClusterGpu, history: GpuHistory | None, width: int, most: int) -> list[tuple]:
    """The verdict in up to ``most`` lines, wrapped to ``width``."""
    conf = "" if row.confidence is None else f" · confidence {row.confidence:.2f}"
    lines: list[tuple] = [(f"{class_text(row.cls, row.subclass)}{conf} · judged by {row.judged_by}"[:width],
                           "bold yellow" if row.cls in C.WAITING else "bold green")]
    words: list[str] = []
    if history is not None:
        shares = history.class_shares()
        if shares:
            words.append(f"over the last {span_text(span_of(history))}: " + ", ".join(
                f"{round(100 * s)}% {class_text(c, sub)}" for c, sub, s in shares))
        v = history.verdict
        if v is not None:
            words.append(f"judged here from its last minute: {class_text(v.cls, v.subclass)} ({v.evidence_text})")
            if v.advice:
                words.append(f"advice: {v.advice}")
        elif not history.samples:
            words.append("no DCGM_FI_* series over the window")
        missing = row.missing or history.missing
        if missing:
            words.append("missing: " + "; ".join(missing))
    for w in words:
        lines += [(part, "") for part in textwrap.wrap(w, max(10, width), subsequent_indent="  ")]
    return lines[:most]


def held(points: list[tuple[float, float]], step_s: float, dt: float) -> tuple[list[float], list[float]]:
    """``query_range``'s points (one a step) each held until the next step, every ``dt`` (a chart's bucket), so
    that a step wider than a bucket draws an area, not a comb of dots."""
    ts, vs = [], []
    for t, v in points:
        for k in range(int(step_s / dt) + 1):  # up to the next point (a bucket that holds both: their mean)
            ts.append(t + k * dt)
            vs.append(v)
    return ts, vs


def span_of(h: GpuHistory) -> float:
    """The charts' span: the window, or the time the GPU has been exported where that is shorter (a minute at
    least), so that a new GPU's few points are not squeezed against the right edge."""
    if not h.samples:
        return h.window_s
    return max(MIN_SPAN_S, min(h.window_s, h.t_end - h.samples[0]["t"] + h.step_s))


class DetailScreen(Screen):
    """One GPU's detail (see the module's text). ``read_gpu(node, gpu)`` -> ``GpuHistory`` (runs on a thread)."""

    BINDINGS = [Binding("escape", "app.pop_screen", "back"), Binding("r", "read", "read again"),
                Binding("q", "app.quit_page", "quit")]
    DEFAULT_CSS = """
    DetailScreen { layout: vertical; }
    DetailScreen #detail-head, DetailScreen #detail-verdict { height: auto; }
    DetailScreen #detail-charts { height: 1fr; }
    """

    def __init__(self, row: C.ClusterGpu, read_gpu: Callable[[str, str], GpuHistory]):
        super().__init__()
        self.row, self.read_gpu = row, read_gpu
        self.history: GpuHistory | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Lines(id="detail-head")
        yield Lines(id="detail-verdict")
        with Vertical(id="detail-charts"):
            for title, field, unit, colour in CHARTS:
                yield HistoryChart(title, field, unit=unit, color=colour, fill=self.fill)
        yield KeyBar(id="detail-keys")

    def on_mount(self) -> None:
        self.query_one(KeyBar).show_keys(KEYS)
        self.show()
        self.action_read()

    def on_resize(self) -> None:
        self.show()

    def action_read(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="detail")

    def _read(self) -> None:
        try:
            history, error = self.read_gpu(self.row.node, self.row.gpu), None
        except SourceError as exc:
            history, error = None, str(exc)
        try:
            self.app.call_from_thread(self.took, history, error)
        except RuntimeError:  # the app has ended meanwhile
            pass

    def took(self, history: GpuHistory | None, error: str | None) -> None:
        if history is not None:
            self.history = history
        self.error = error
        self.show()
        for chart in self.query(HistoryChart):
            self.fill(chart)

    def show(self) -> None:
        width, height = self.size.width or 80, self.size.height or 24
        self.query_one("#detail-head", Lines).set_lines(head_lines(self.row, self.history, self.error, width))
        most = max(2, height // 4)
        self.query_one("#detail-verdict", Lines).set_lines(verdict_lines(self.row, self.history, width, most))

    def fill(self, chart: HistoryChart) -> None:
        """The chart's whole window from the history (on a resize too)."""
        h = self.history
        chart.reset()
        if h is None:
            chart.draw(0.0, note="reading…" if self.error is None else "no data")
            return
        chart.span = span_of(h)
        points = [(s["t"], s.get(chart.field)) for s in h.samples if s.get(chart.field) is not None]
        hi = None
        if chart.field == "mem_used_bytes":
            points = [(t, v / GIB) for t, v in points]
            totals = [s["mem_total_bytes"] for s in h.samples if s.get("mem_total_bytes")]
            hi = totals[-1] / GIB if totals else max((v for _, v in points), default=1.0)
        chart.reset()
        ts, vs = held(points, h.step_s, chart.span / max(1, 2 * (chart.wh[0] - chart.EDGE)))
        chart.feed(ts, vs)
        chart.draw(h.t_end, hi=hi, note="" if points else "not exported")
