"""Textual widgets of the monitor. Each renders pre-built Rich ``Text`` lines through the Line API
(``render_line`` -> cached ``Strip``) and refreshes only when its lines changed, so an unchanged
panel costs nothing per frame and a changed one costs one strip per visible line.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gputop.format import NA, pct
from gputop.tui import charts, view

LEVEL_STYLE = {"": "green", "peak": "bold cyan", "warn": "yellow", "hot": "bold red", "na": "dim"}


class Lines(Widget):
    """A widget that shows a list of Rich Text lines (one per row), cropped to its width.

    Only the rows whose text changed are refreshed, and each row's Strip is cached until then.
    """

    DEFAULT_CSS = "Lines { height: auto; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lines: list[Text] = []
        self._strips: list[Strip | None] = []
        self._strip_width = -1
        self._width = 0
        self._base = None  # the widget's Rich style, looked up once per change (it is costly)

    def set_lines(self, lines: list[Text]) -> bool:
        """Replace the lines; refresh only the rows that changed. True if any changed."""
        old = self._lines
        if lines == old:
            return False
        self._lines = lines
        self._base = None
        if len(lines) != len(old):
            self._strips = [None] * len(lines)
            auto = self.styles.height is not None and self.styles.height.is_auto
            self.refresh(layout=auto)
            return True
        width = self.size.width
        changed = [y for y, (a, b) in enumerate(zip(old, lines)) if a != b]
        for y in changed:
            self._strips[y] = None
        if len(changed) > len(lines) // 2:
            self.refresh()
        else:
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        return True

    @property
    def plain(self) -> str:
        return "\n".join(t.plain for t in self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def on_resize(self) -> None:
        self._strips = [None] * len(self._lines)
        self._base = None
        self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        self._strips = [None] * len(self._lines)

    def rebuild(self) -> None:
        """Recompute the lines for the current size (widgets whose lines depend on width)."""

    def render_lines(self, crop: Region) -> list[Strip]:
        self._width = self.size.width  # once per render, not once per line (it is a property chain)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self._width
        if width != self._strip_width:
            self._strip_width = width
            self._strips = [None] * len(self._lines)
        if self._base is None:
            self._base = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, self._base)
        strip = self._strips[y]
        if strip is None:
            text = self._lines[y]
            console = self.app.console
            segs = list(text.render(console, end=""))  # spans only: the Text's own style goes on top
            if text.style:
                segs = list(Segment.apply_style(segs, console.get_style(text.style)))
            strip = Strip(segs).crop_extend(0, width, None).apply_style(self._base)
            self._strips[y] = strip
        return strip


class InfoBar(Lines):
    """The header line: host, GPU names, driver, CUDA, rate, mode."""

    DEFAULT_CSS = "InfoBar { height: 1; background: $primary-background; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts: list[str] = []
        self.page = ""

    def show(self, parts: list[str], page: str) -> None:
        self.parts, self.page = parts, page
        self.rebuild()

    def rebuild(self) -> None:
        width = self.size.width or 80
        tail = f"  [{self.page}]"
        t = Text.assemble((" gputop ", "bold reverse"))
        budget = max(10, width - 9 - len(tail))
        body = view.fit_parts(self.parts, budget)
        t.append(" " + (body if len(body) <= budget else body[:budget - 1] + "…"))
        t.append(tail, style="bold")
        self.set_lines([t])


class DevicePanel(Lines):
    """Every metric of the selected GPU, with a bar against its peak."""

    LABEL_W = 15

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.data: tuple[dict, dict, dict | None] | None = None

    def show(self, static: dict, peaks: dict, sample: dict | None) -> None:
        self.data = (static, peaks, sample)
        self.rebuild()

    def rebuild(self) -> None:
        if self.data is None:
            return
        static, peaks, sample = self.data
        width = max(20, self.size.width or 80)
        lines = [Text(view.gpu_title(static), style="bold")]
        if sample is None:
            lines.append(Text("waiting for the first sample...", style="dim"))
            self.set_lines(lines)
            return
        if sample.get("lost"):
            lines.append(Text("GPU LOST: NVML says this GPU fell off the bus", style="bold red"))
        rows = view.device_rows(static, peaks, sample)
        bar_w = max(0, min(24, width - self.LABEL_W - 36))
        for r in rows:
            t = Text.assemble((f"{r.label:<{self.LABEL_W}}", "bold"))
            if bar_w >= 6:
                if r.fraction is not None:
                    t.append(charts.hbar(r.fraction, bar_w), style=LEVEL_STYLE[r.level])
                    t.append(" ")
                else:
                    t.append(" " * (bar_w + 1))
            t.append(r.text, style="dim" if r.level == "na" else ("bold red" if r.level == "hot" and r.fraction is None else ""))
            lines.append(t)
        self.set_lines(lines)


class GpuStrip(Lines):
    """One line per GPU; the selected one is marked."""

    DEFAULT_CSS = "GpuStrip { height: auto; max-height: 8; }"

    def show(self, statics: list[dict], samples: list[dict | None], selected: int) -> None:
        lines = []
        for i, (st, s) in enumerate(zip(statics, samples)):
            mark = "▶" if i == selected else " "
            lines.append(Text(f"{mark} {view.strip_line(st, s)}", style="bold reverse" if i == selected else ""))
        self.set_lines(lines)


class HistoryChart(Lines):
    """A braille area chart of one series over the last ``span`` seconds (title on the first row)."""

    DEFAULT_CSS = "HistoryChart { height: 1fr; min-height: 2; }"
    EDGE = 1  # blank cells kept at the right edge

    def __init__(self, title: str, field: str, lo: float = 0.0, hi: float = 100.0, unit: str = "%",
                 color: str = "green", span: float = 60.0, **kwargs):
        super().__init__(**kwargs)
        self.title, self.field, self.lo, self.hi, self.unit, self.color, self.span = (
            title, field, lo, hi, unit, color, span)
        self.series: tuple[list, list, float] | None = None
        self.note = ""

    def show(self, ts: list, vs: list, t_end: float, hi: float | None = None, note: str = "") -> None:
        self.series = (ts, vs, t_end)
        if hi:
            self.hi = hi
        self.note = note
        self.rebuild()

    def rebuild(self) -> None:
        if self.series is None:
            return
        ts, vs, t_end = self.series
        w, h = self.size.width - self.EDGE, self.size.height
        if w <= 0 or h <= 0:
            return
        last = next((v for v in reversed(vs) if v is not None), None)
        cur = NA if last is None else (pct(last) if self.unit == "%" else f"{last:.0f} {self.unit}")
        title = Text.assemble((f"{self.title} ", "bold"))
        if self.note:  # no series here: say why
            title.append(self.note, style="dim")
        else:
            title.append(cur, style=self.color)
            title.append(f"  last {self.span:.0f} s, max {self.hi:g}{self.unit}", style="dim")
        lines = [title]
        if h > 1:
            buckets = charts.bucket(ts, vs, t_end, self.span, 2 * w)
            for row in charts.braille_area(buckets, w, h - 1, self.lo, self.hi):
                lines.append(Text(row, style=self.color))
        self.set_lines(lines)


class ProcessTable(Lines):
    """pid, user, name, GPU memory; gputop's own workload is tagged."""

    DEFAULT_CSS = "ProcessTable { height: auto; max-height: 10; }"

    def show(self, procs: list[dict] | None, own_pids: set[int], host_line: str,
             tags: dict[int, str] | None = None) -> None:
        lines = [Text(f"{'PID':>8}  {'USER':<12} {'NAME':<22} {'GPU MEM':>10}  ", style="bold reverse")]
        rows = view.process_rows(procs, own_pids, tags)
        if procs is None:
            lines.append(Text("  processes: n/a", style="dim"))
        elif not rows:
            lines.append(Text("  no processes on this GPU", style="dim"))
        for pid, user, name, mem, tag in rows:
            t = Text(f"{pid:>8}  {user[:12]:<12} {name[:22]:<22} {mem:>10}  ")
            if tag:
                t.append(tag, style="bold cyan")
            lines.append(t)
        lines.append(Text(host_line, style="dim"))
        self.set_lines(lines)


class VerdictPanel(Lines):
    """The bottleneck class, its evidence in numbers, one line of advice (wrapped to the width)."""

    DEFAULT_CSS = "VerdictPanel { height: auto; max-height: 6; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.verdict = None
        self.shown = False

    def show(self, verdict) -> None:
        self.verdict, self.shown = verdict, True
        self.rebuild()

    def rebuild(self) -> None:
        if not self.shown:
            return
        v = self.verdict
        if v is None:
            self.set_lines([Text("diagnosis: n/a", style="dim")])
            return
        t = Text.assemble(("verdict: ", "bold"))
        t.append(v.label, style="bold yellow" if v.bound else "bold green")
        if v.evidence:
            t.append(": " + v.evidence)
        parts = [t]
        if v.advice:
            parts.append(Text("advice: " + v.advice, style="italic"))
        width = max(20, self.size.width or 80)
        compact = self.app.has_class("-short")  # 80x24: two lines of evidence, one of advice
        lines: list[Text] = []
        for i, part in enumerate(parts):
            wrapped = list(part.wrap(self.app.console, width, overflow="fold"))
            keep = (2 if i == 0 else 1) if compact else 4
            if len(wrapped) > keep:
                wrapped = wrapped[:keep]
                wrapped[-1].truncate(width - 1)
                wrapped[-1].append("…")
            lines.extend(wrapped)
        self.set_lines(lines[:6])
