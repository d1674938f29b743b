"""Textual widgets of the monitor. Each renders pre-built lines through the Line API
(``render_line`` -> cached ``Strip``) and refreshes only the rows that changed, so an unchanged
panel costs nothing per frame and a changed one costs one strip per changed row. Panels also skip
rebuilding their lines when what they show did not change (a frame on an idle GPU touches almost
nothing), and charts are fed only the samples that arrived since the last frame.

A line is a Rich ``Text`` or a ``(str, style)`` pair (one style for the whole row: chart rows),
which renders without building a ``Text``.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
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
        self._final: dict[int, Strip] = {}  # row -> its strip after the app's line filters (full width)
        self._row_styles: dict[tuple, tuple] = {}  # (style, filters, bg) -> final (text, padding) styles
        self._filters: tuple = ()
        self._strip_width = -1
        self._width = 0
        self._base = None  # the widget's Rich style, looked up once per change (it is costly)
        self._bg = None  # its background colour (for line filters)
        self._plain: bool | None = None  # see _plain_box
        self.wh = (0, 0)  # (width, height), kept from the last resize: ``size`` is a costly property

    def set_lines(self, lines: list) -> bool:
        """Replace the lines (``Text`` or ``(str, style)``); refresh only the rows that changed.
        True if any changed."""
        old = self._lines
        if lines == old:
            return False
        self._lines = lines
        if len(lines) != len(old):
            self._reset_strips()
            auto = self.styles.height is not None and self.styles.height.is_auto
            self.refresh(layout=auto)
            return True
        changed = [y for y, (a, b) in enumerate(zip(old, lines)) if a != b]
        for y in changed:
            self._strips[y] = None
            self._final.pop(y, None)
        if len(changed) > len(lines) // 2:
            self.refresh()
        else:  # one region from the first to the last changed row: unchanged rows in it are cached
            self.refresh(Region(0, changed[0], self.wh[0], changed[-1] - changed[0] + 1))
        return True

    def _reset_strips(self) -> None:
        self._strips = [None] * len(self._lines)
        self._final.clear()
        self._row_styles.clear()

    @property
    def plain(self) -> str:
        return "\n".join(t[0] if isinstance(t, tuple) else t.plain for t in self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def on_resize(self) -> None:
        self.wh = (self.size.width, self.size.height)
        self._reset_strips()
        self._base = self._bg = self._plain = None
        self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = self._bg = self._plain = None
        self._reset_strips()

    def rebuild(self) -> None:
        """Recompute the lines for the current size (widgets whose lines depend on width)."""

    def render_lines(self, crop: Region) -> list[Strip]:
        """Our cached strips, filtered, without Textual's generic styles cache when nothing needs it.

        Textual renders every widget that overlaps the bounding box of a frame's changed rows, so
        an unchanged panel between two changed ones is asked for all its rows; here that is a list
        of cached strips (``Strip.apply_filter`` and ``crop`` cache their results too).
        """
        self._width = self.size.width  # once per render, not once per line (it is a property chain)
        if not self._plain_box():
            return super().render_lines(crop)
        filters = tuple(self.app.get_line_filters())
        if self._bg is None:
            self._bg = self.background_colors[1]
        if filters != self._filters:
            self._filters = filters
            self._final.clear()
        bg, x0, x1 = self._bg, crop.x, crop.right
        full = x0 == 0 and x1 == self._width
        final = self._final
        out = []
        lines = self._lines
        for y in range(crop.y, crop.bottom):
            strip = final.get(y) if full else None
            if strip is None and full and y < len(lines) and isinstance(lines[y], tuple):
                strip = final[y] = self._plain_row(lines[y], filters, bg)
            if strip is None:
                strip = self.render_line(y)
                for f in filters:
                    strip = strip.apply_filter(f, bg)
                strip = strip.crop(x0, x1)
                if full:
                    final[y] = strip
            out.append(strip)
        return out

    def _plain_row(self, row: tuple, filters: tuple, bg) -> Strip:
        """The final strip of a ``(str, style)`` row in one step: its styles (the row's, the padding's)
        go through the widget's style and the line filters once per style, not once per row."""
        text, style = row
        width = self._width
        if len(text) > width:
            text = text[:width]
        styles = self._row_styles
        key = (style, filters, bg)
        pair = styles.get(key)
        if pair is None:  # the styles render_line and the filters give a one-cell row and its padding
            if self._base is None:
                self._base = self.rich_style
            probe = Strip([Segment("x", self.app.console.get_style(style) if style else None)])
            probe = probe.crop_extend(0, 2, None).apply_style(self._base)
            for f in filters:
                probe = probe.apply_filter(f, bg)
            segs = list(probe)
            pair = styles[key] = (segs[0].style, segs[-1].style)
        text_style, pad_style = pair
        segs = [Segment(text, text_style)]
        if len(text) < width:
            segs.append(Segment(" " * (width - len(text)), pad_style))
        return Strip(segs, width)

    def _plain_box(self) -> bool:
        """No border, padding, outline, tint or opacity: the content rows are the widget's rows."""
        if self._plain is None:
            st = self.styles
            self._plain = (not any(e[0] for e in st.border) and not any(e[0] for e in st.outline)
                           and st.gutter == (0, 0, 0, 0) and st.opacity == 1.0 and st.text_opacity == 1.0 and not st.tint.a
                           and not self._border_title and not self._border_subtitle)
        return self._plain

    def render_line(self, y: int) -> Strip:
        width = self._width
        if width != self._strip_width:
            self._strip_width = width
            self._reset_strips()
        if self._base is None:
            self._base = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, self._base)
        strip = self._strips[y]
        if strip is None:
            text = self._lines[y]
            console = self.app.console
            if isinstance(text, tuple):  # one style for the row
                segs = [Segment(text[0], console.get_style(text[1]) if text[1] else None)]
            else:
                segs = text_segments(text, console)
                if text.style:
                    segs = list(Segment.apply_style(segs, console.get_style(text.style)))
            strip = Strip(segs).crop_extend(0, width, None).apply_style(self._base)
            self._strips[y] = strip
        return strip


def text_segments(text: Text, console) -> list[Segment]:
    """``list(text.render(console, end=""))`` for the Texts the panels build (spans in order, none
    overlapping: ``Text.assemble`` and ``append``), without Rich's general span bookkeeping."""
    spans = text._spans
    plain = text.plain
    if not spans:
        return [Segment(plain)]
    get_style = console.get_style
    base = get_style(text.style) if text.style else Style.null()
    segs = []
    pos = 0
    for sp in spans:
        if sp.start < pos or sp.end < sp.start:  # overlapping or out of order: Rich's way
            return list(text.render(console, end=""))
        if sp.start > pos:
            segs.append(Segment(plain[pos:sp.start], base))
        if sp.end > sp.start:
            segs.append(Segment(plain[sp.start:sp.end], base + get_style(sp.style, default=Style.null())))
        pos = sp.end
    if pos < len(plain):
        segs.append(Segment(plain[pos:], base))
    return segs


class InfoBar(Lines):
    """The header line: host, GPU names, driver, CUDA, rate, mode."""

    DEFAULT_CSS = "InfoBar { height: 1; background: $primary-background; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts: list[str] = []
        self.page = ""

    def show(self, parts: list[str], page: str) -> None:
        if (parts, page) != (self.parts, self.page):
            self.parts, self.page = parts, page
            self.rebuild()

    def rebuild(self) -> None:
        width = self.wh[0] or 80
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
        self._shown = None  # (title, rows, bar width) last drawn
        self._texts: dict[tuple, Text] = {}  # each row's Text, by what it shows

    def show(self, static: dict, peaks: dict, sample: dict | None) -> None:
        self.data = (static, peaks, sample)
        self.rebuild(force=False)

    def rebuild(self, force: bool = True) -> None:
        if self.data is None:
            return
        static, peaks, sample = self.data
        width = max(20, self.wh[0] or 80)
        title = view.gpu_title(static)
        rows = view.device_rows(static, peaks, sample) if sample is not None else None
        bar_w = max(0, min(24, width - self.LABEL_W - 36))
        key = (title, rows, bar_w, bool(sample and sample.get("lost")))
        if not force and key == self._shown:
            return
        self._shown = key
        lines = [Text(title, style="bold")]
        if rows is None:
            lines.append(Text("waiting for the first sample...", style="dim"))
            self.set_lines(lines)
            return
        if sample.get("lost"):
            lines.append(Text("GPU LOST: NVML says this GPU fell off the bus", style="bold red"))
        texts: dict[tuple, Text] = {}
        for r in rows:
            bar = None
            if bar_w >= 6:
                bar = charts.hbar(r.fraction, bar_w) if r.fraction is not None else " " * bar_w
            style = "dim" if r.level == "na" else ("bold red" if r.level == "hot" and r.fraction is None else "")
            key = (r.label, bar, r.level, r.text, style)
            t = self._texts.get(key)  # rows that look the same as last frame keep their Text (and Strip)
            if t is None:
                t = Text.assemble((f"{r.label:<{self.LABEL_W}}", "bold"))
                if bar is not None:
                    t.append(bar, style=LEVEL_STYLE[r.level] if r.fraction is not None else "")
                    t.append(" ")
                t.append(r.text, style=style)
            texts[key] = t
            lines.append(t)
        self._texts = texts
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
    """A braille area chart of one series over the last ``span`` seconds (title on the first row).

    The app ``reset``s it (after a resize, a GPU switch, or while hidden: ``stale``), ``feed``s it the
    samples that arrived since the last frame, then calls ``draw``; a frame whose dot levels and title
    did not change costs a comparison of two short lists of integers.
    """

    DEFAULT_CSS = "HistoryChart { height: 1fr; min-height: 2; }"
    EDGE = 1  # blank cells kept at the right edge

    def __init__(self, title: str, field: str, lo: float = 0.0, hi: float = 100.0, unit: str = "%",
                 color: str = "green", span: float = 60.0, fill=None, **kwargs):
        super().__init__(**kwargs)
        self.title, self.field, self.lo, self.hi, self.unit, self.color, self.span = (
            title, field, lo, hi, unit, color, span)
        self.fill = fill  # fill(chart): the owner feeds it the whole window again (called on resize)
        self.series: charts.BucketSeries | None = None
        self.stale = True  # needs the whole window again (new width, another GPU, was hidden)
        self.fed_t: float | None = None  # time of the newest tick fed
        self.fed_key = None  # what it was fed from (the GPU position)
        self.last: tuple[float, float] | None = None  # (t, v) of the newest value fed
        self._t_end: float | None = None
        self._note = ""
        self._drawn = None  # (title key, levels) last drawn
        self._levels: dict[int, int] = {}  # bucket number -> dot level, for the visible buckets
        self._scale = None  # (height, lo, hi) the levels were computed for
        self._last_b: int | None = None  # newest bucket shown

    def reset(self) -> None:
        w = self.wh[0] - self.EDGE
        self.series = charts.BucketSeries(self.span, 2 * w) if w > 0 else None
        self.last = None
        self.stale = False
        self._levels = {}
        self._scale = None  # levels are recomputed (and redrawn) from the new series

    def feed(self, ts: list, vs: list) -> None:
        if self.series is None:
            return
        add = self.series.add
        for t, v in zip(ts, vs):
            if v is not None:
                add(t, v)
                self.last = (t, v)

    def draw(self, t_end: float, hi: float | None = None, note: str = "") -> None:
        self._t_end, self._note = t_end, note
        if hi:
            self.hi = hi
        self.rebuild(force=False)

    def on_resize(self) -> None:
        """A new size needs the whole window at the new width: the owner refills it now, in this
        handler, so that what the chart shows never waits for the next frame of the app's timer."""
        self.stale = True
        if self.fill is None:
            super().on_resize()
            return
        self.wh = (self.size.width, self.size.height)
        self._reset_strips()
        self._base = self._bg = self._plain = None
        self.fill(self)

    def _level_row(self, h: int) -> list[int] | None:
        """The dot levels of the visible buckets, or None when they are what was drawn last.

        Only the buckets fed since the last frame are re-levelled; the list is rebuilt only when one
        of them changed level or the chart moved on by a bucket."""
        series = self.series
        dots, scale = 4 * (h - 1), (h, self.lo, self.hi)
        levels = self._levels
        moved = False
        if scale != self._scale:  # another height or range: every level changes
            self._scale = scale
            levels.clear()
            series.touch_all()
            moved = True
        for b in series.dirty:
            lv = charts.dot_level(series.mean(b), dots, self.lo, self.hi)
            if levels.get(b, 0) != lv:
                levels[b] = lv
                moved = True
        series.dirty.clear()
        last = series.index(self._t_end)
        if last != self._last_b:
            self._last_b, moved = last, True
            for b in [b for b in levels if b <= last - series.n]:
                del levels[b]
        if not moved:
            return None
        get = levels.get
        return [get(b, 0) for b in range(last - series.n + 1, last + 1)]

    def rebuild(self, force: bool = True) -> None:
        if self._t_end is None:
            return
        w, h = self.wh[0] - self.EDGE, self.wh[1]
        if w <= 0 or h <= 0:
            return
        last = self.last[1] if self.last and self._t_end - self.last[0] <= self.span else None
        cur = NA if last is None else (pct(last) if self.unit == "%" else f"{last:.0f} {self.unit}")
        key = (cur, self._note, self.hi, w, h)
        levels = self._drawn[1] if self._drawn else None
        if h > 1 and not self._note and self.series is not None:
            if force:
                self._scale = None
            fresh = self._level_row(h)
            levels = fresh if fresh is not None else levels
        if not force and self._drawn is not None and self._drawn[0] == key and self._drawn[1] is levels:
            return
        self._drawn = (key, levels)
        title = Text.assemble((f"{self.title} ", "bold"))
        if self._note:  # no series here: say why
            title.append(self._note, style="dim")
        else:
            title.append(cur, style=self.color)
            title.append(f"  last {self.span:.0f} s, max {self.hi:g}{self.unit}", style="dim")
        lines: list = [title]
        if h > 1:
            rows = charts.area_rows(levels, h - 1) if levels and not self._note else [" " * w] * (h - 1)
            lines.extend((row, self.color) for row in rows)
        self.set_lines(lines)


class ProcessTable(Lines):
    """pid, user, name, GPU memory; gputop's own workload is tagged."""

    DEFAULT_CSS = "ProcessTable { height: auto; max-height: 10; }"

    _shown = None

    def show(self, procs: list[dict] | None, own_pids: set[int], host_line: str,
             tags: dict[int, str] | None = None) -> None:
        key = (procs, own_pids, host_line, tags)
        if key == self._shown:
            return
        self._shown = key
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
        if self.shown and verdict == self.verdict:
            return
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
        width = max(20, self.wh[0] or 80)
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
