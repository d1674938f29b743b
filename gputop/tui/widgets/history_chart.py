"""The monitor's history chart: a braille area chart of one series, fed incrementally."""

from __future__ import annotations

from typing import Callable

from rich.text import Text

from gputop.analysis import thresholds as T
from gputop.format import NA, pct, scale_text, span_text
from gputop.tui.widgets import charts
from gputop.tui.widgets.lines import Lines


class HistoryChart(Lines):
    """A braille area chart of one series over the last ``span`` seconds (title on the first row).

    Its owner (the monitor page) ``reset``s it (after a resize, a GPU switch, or while hidden:
    ``stale``), ``feed``s it the samples that arrived since the last frame, then calls ``draw``; a frame
    whose dot levels and title did not change costs a comparison of two short lists of integers. On a
    resize the chart calls ``fill(self)`` at once, so it never shows an empty or stale window while it
    waits for the next frame.
    """

    DEFAULT_CSS = "HistoryChart { height: 1fr; min-height: 3; }"  # the title and at least two rows
    EDGE = 1  # blank cells kept at the right edge
    MARK_STYLE = "on grey23"  # the columns of the window the verdict judged (``draw(mark=...)``)
    MIN_ROWS = 3  # the title and two rows of plot

    def __init__(self, title: str, field: str, lo: float = 0.0, hi: float = 100.0, unit: str = "%",
                 color: str = "green", span: float = 60.0,
                 fill: Callable[["HistoryChart"], None] | None = None, **kwargs):
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
        self._mark: tuple[float, float] | None = None  # (t_start, t_end) the verdict judged
        self._drawn = None  # (title key, levels) last drawn
        self._levels: dict[int, int] = {}  # bucket number -> dot level, for the visible buckets
        self._scale = None  # (height, lo, hi) the levels were computed for
        self._last_b: int | None = None  # newest bucket shown (end_bucket)

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

    def draw(self, t_end: float, hi: float | None = None, note: str = "",
             mark: tuple[float, float] | None = None) -> None:
        """Draw up to ``t_end``; ``mark``: the (t_start, t_end) the verdict judged, shaded on the chart."""
        self._t_end, self._note, self._mark = t_end, note, mark
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
        last = self.end_bucket()
        for b in series.dirty:
            lv = charts.dot_level(series.mean(b), dots, self.lo, self.hi)
            if levels.get(b, 0) != lv:
                levels[b] = lv
                moved = moved or b <= last  # the cell being filled shows when it is whole
        series.dirty.clear()
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
        cols = self.mark_columns(w)
        key = (cur, self._note, self.hi, w, h, cols)
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
            unit = self.unit if self.unit == "%" else f" {self.unit}"
            title.append(f"  last {span_text(self.span)}, scale {scale_text(self.lo)}-{scale_text(self.hi)}{unit}",
                         style="dim")
            if cols is not None:
                title.append("  ", style="dim")
                title.append("  ", style=self.MARK_STYLE)
                title.append(" verdict's window", style="dim")
        lines: list = [title]
        if h > 1:
            rows = charts.area_rows(levels, h - 1) if levels and not self._note else [" " * w] * (h - 1)
            if cols is None or self._note:
                lines.extend((row, self.color) for row in rows)
            else:  # the verdict's window shaded: (row, style, (c0, c1, shade)), drawn in one step (tui.lines)
                shade = (cols[0], cols[1], self.MARK_STYLE)
                lines.extend((row, self.color, shade) for row in rows)
        self.set_lines(lines)

    def end_bucket(self) -> int:
        """The newest bucket drawn: the end of the newest whole cell. A cell is two buckets (its two braille
        dot columns) on absolute time, so the plot moves one cell at a time, once every two buckets (60 s over
        160 columns: every 0.75 s), and in between nothing in it changes; the title has the newest value."""
        return 2 * (self.series.index(self._t_end) // 2) - 1

    def mark_columns(self, w: int) -> tuple[int, int] | None:
        """The columns [c0, c1) of the verdict's window on a chart ``w`` cells wide (None: not shown).

        A window that ends within ``LIVE_CURRENT_S`` of the chart's newest tick (the live verdict, judged
        again every second or two) is drawn up to the right edge, its length in whole buckets: between two judgements
        the shading stays put instead of stepping left and back, so an idle chart redraws nothing. An older
        window (the previous phase) sits where its ticks are and scrolls with them."""
        series = self.series
        if self._mark is None or series is None or not series.dt or self._t_end is None:
            return None
        m0, m1 = self._mark
        last = self.end_bucket()
        first = last - series.n + 1  # two buckets per cell (braille)
        if 0 <= self._t_end - m1 <= T.LIVE_CURRENT_S:
            b1 = last
            b0 = last - max(0, round((m1 - m0) / series.dt))
        else:
            b0, b1 = series.index(m0), series.index(m1)
        c0 = max(0, (b0 - first) // 2)
        c1 = min(w, (b1 - first) // 2 + 1)
        return (c0, c1) if c1 > c0 else None
