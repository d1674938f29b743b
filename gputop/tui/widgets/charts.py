"""Lightweight text charts for the TUI: braille history charts, a log-log roofline, bar rows.

Everything here is pure (Rich ``Text`` at most, no Textual), so it is cheap to call and easy to
test. A chart library (plotext) costs far more CPU per frame than these few list operations.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from rich.text import Text

# Braille cell: 2 columns x 4 rows of dots. Bit for (column, row-from-top).
_DOT = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
_BRAILLE = 0x2800
BLOCKS = " ▏▎▍▌▋▊▉█"


class BucketSeries:
    """A time series kept as ``n`` buckets of ``span / n`` seconds each, fed incrementally.

    Buckets sit on absolute time (``floor(t / dt)``) so columns do not jitter as time moves on;
    each bucket is the mean of its values, ``None`` where it has none (a gap, or n/a). Feeding the
    few samples that arrived since the last frame costs a few operations, so a chart redraw does not
    re-read its whole history.
    """

    def __init__(self, span: float, n: int):
        self.span, self.n = span, max(0, n)
        self.dt = span / self.n if self.n and span > 0 else 0.0
        self._sums: dict[int, list] = {}  # bucket number -> [sum, count]
        self._last = None  # newest bucket number fed
        self.dirty: set[int] = set()  # buckets fed since the owner last looked (it clears this)

    def add(self, t: float, v) -> None:
        if v is None or not self.dt:
            return
        b = math.floor(t / self.dt)
        self.dirty.add(b)
        cell = self._sums.get(b)
        if cell is None:
            self._sums[b] = [v, 1]
            if self._last is None or b > self._last:
                self._last = b
                self._prune(b - self.n)
        else:
            cell[0] += v
            cell[1] += 1

    def _prune(self, before: int) -> None:
        if len(self._sums) > 2 * self.n + 8:
            for b in [b for b in self._sums if b <= before]:
                del self._sums[b]

    def touch_all(self) -> None:
        """Mark every bucket held as fed (its owner re-reads them all, e.g. after a rescale)."""
        self.dirty.update(self._sums)

    def mean(self, b: int) -> float | None:
        cell = self._sums.get(b)
        return cell[0] / cell[1] if cell else None

    def index(self, t: float) -> int:
        """The bucket number that holds time ``t``."""
        return math.floor(t / self.dt)

    def values(self, t_end: float) -> list[float | None]:
        """The ``n`` bucket means ending with the bucket that holds ``t_end`` (oldest first)."""
        if not self.dt:
            return []
        last = math.floor(t_end / self.dt)
        get = self._sums.get
        out = []
        for b in range(last - self.n + 1, last + 1):
            cell = get(b)
            out.append(cell[0] / cell[1] if cell else None)
        return out


def bucket(ts: Sequence[float], vs: Sequence, t_end: float, span: float, n: int) -> list[float | None]:
    """Downsample (t, v) points into ``n`` time buckets that end at ``t_end`` and cover ``span`` s."""
    if n <= 0 or span <= 0:
        return []
    series = BucketSeries(span, n)
    for t, v in zip(ts, vs):
        series.add(t, v)
    return series.values(t_end)


def _fill_codes(side: int) -> list[int]:
    """Braille bits of one dot column filled from the bottom by 0..4 dots."""
    out = [0]
    for k in range(1, 5):
        out.append(out[-1] | _DOT[side][4 - k])
    return out


_FILL = [[chr(_BRAILLE + (lc | rc)) if lc | rc else " " for rc in _fill_codes(1)] for lc in _fill_codes(0)]


class _Columns(dict):
    """Cell columns (top first) of an area chart of one height, by the fill levels (left, right) of
    their two dot columns; built on first use, so a redraw is mostly dictionary look-ups."""

    def __init__(self, height: int):
        super().__init__()
        self.height = height

    def __missing__(self, key: tuple[int, int]) -> str:
        a, b = key
        cells = [_FILL[min(4, max(0, a - 4 * k))][min(4, max(0, b - 4 * k))] for k in range(self.height)]
        col = self[key] = "".join(reversed(cells))
        return col


_COLUMNS: dict[int, _Columns] = {}


def dot_level(v: float | None, dots: int, lo: float, hi: float) -> int:
    """Fill level (0..dots) of one dot column; any activity above ``lo`` shows at least one dot."""
    if v is None or v <= lo:
        return 0
    lv = int(round(min(1.0, (v - lo) / ((hi - lo) or 1.0)) * dots))
    return lv if lv > 0 else 1


def dot_levels(values: Sequence[float | None], width: int, height: int, lo: float, hi: float) -> list[int]:
    """Fill level (in dots, 0..4 * height) of each of the ``2 * width`` dot columns of an area chart.
    ``values`` has up to ``2 * width`` points (older on the left); missing points leave a gap."""
    pts = list(values)[-2 * width:]
    dots = height * 4
    return [0] * (2 * width - len(pts)) + [dot_level(v, dots, lo, hi) for v in pts]


def area_rows(levels: Sequence[int], height: int) -> list[str]:
    """Rows (top first) of a filled braille area chart: 2 dot columns per cell, 4 dot rows per cell row.

    Rows above the highest level are blank and rows under the lowest are full, so a quiet chart
    (an idle GPU: a line of dots at the bottom) joins one row, not ``height``."""
    if not height:
        return []
    if len(levels) < 2:
        return [""] * height
    table = _COLUMNS.get(height)
    if table is None:
        table = _COLUMNS[height] = _Columns(height)
    cols = [table[p] for p in zip(levels[0::2], levels[1::2])]
    w = len(cols)
    top, bottom = max(levels), min(levels)
    first = max(0, height - 1 - (top - 1) // 4) if top else height  # first row with any dot
    last = min(height - 1, height - 1 - bottom // 4)  # last row that is not full
    if last - first >= 2:
        mixed = ["".join(row) for row in zip(*cols)]
    else:
        mixed = ["".join([c[k] for c in cols]) if first <= k <= last else "" for k in range(height)]
    return [" " * w if k < first else ("⣿" * w if k > last else mixed[k]) for k in range(height)]


def braille_area(values: Sequence[float | None], width: int, height: int, lo: float, hi: float) -> list[str]:
    """Rows (top first) of a filled area chart of ``values`` (see ``dot_levels`` and ``area_rows``)."""
    width, height = max(0, width), max(0, height)
    if not width or not height:
        return [""] * height
    return area_rows(dot_levels(values, width, height, lo, hi), height)


def hbar(fraction: float | None, width: int) -> str:
    """A horizontal bar ``width`` cells wide with eighth-cell resolution ('' width for n/a)."""
    if width <= 0:
        return ""
    if fraction is None:
        return " " * width
    eighths = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    s = "█" * full + (BLOCKS[part] if part else "")
    return s + " " * (width - len(s))


def spark(values: Sequence[float | None], lo: float = 0.0, hi: float = 100.0) -> str:
    """One-line sparkline (▁..█) of ``values``; a space for a missing value."""
    ramp = "▁▂▃▄▅▆▇█"
    span = (hi - lo) or 1.0
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        else:
            out.append(ramp[int(max(0.0, min(1.0, (v - lo) / span)) * (len(ramp) - 1) + 0.5)])
    return "".join(out)


# -- roofline ---------------------------------------------------------------------------------------


def _decades(lo: float, hi: float) -> list[float]:
    return [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            if lo <= 10.0 ** e <= hi]


def _short(v: float) -> str:
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{p}"
    return f"{v:g}"


class Roof:
    """A roof y = min(peak, bandwidth * x): FLOP/s against FLOP/byte.

    ``name`` labels it on the plot (at the right end of its flat part, or along its slope when
    ``slope_label``); ``dotted`` draws one dot column in three (the theoretical roofs), ``ridge`` marks
    its ridge point with ◆.
    """

    def __init__(self, label: str, bandwidth: float, peak: float, style: str, name: str | None = None,
                 dotted: bool = False, ridge: bool = True, slope_label: bool = False):
        self.label, self.bandwidth, self.peak, self.style = label, bandwidth, peak, style
        self.name, self.dotted, self.mark_ridge, self.slope_label = name, dotted, ridge, slope_label

    @property
    def ridge(self) -> float:
        return self.peak / self.bandwidth

    def at(self, x: float) -> float:
        return min(self.peak, self.bandwidth * x)


class Mark:
    """A measured point: marker character, style, and a short label (k) written beside it if there is room."""

    def __init__(self, x: float, y: float, marker: str = "●", style: str = "bold", label: str = ""):
        self.x, self.y, self.marker, self.style, self.label = x, y, marker, style, label


def roofline_plot(width: int, height: int, roofs: Sequence[Roof], points: Iterable,
                  x_range: tuple[float, float] | None = None, point_style: str = "bold") -> list[Text]:
    """A log-log roofline on a character grid: roofs in braille dots (dotted: one column in three),
    their names beside them, ridge points as ◆, measured points as their markers (● by default) with
    their labels where the cells are free, decade labels on both axes. ``points`` are :class:`Mark` or
    (x, y) pairs. Returns ``height`` lines."""
    marks = [p if isinstance(p, Mark) else Mark(p[0], p[1], style=point_style) for p in points]
    marks = [m for m in marks if m.x and m.y and m.x > 0 and m.y > 0]
    roofs = [r for r in roofs if r.bandwidth and r.peak]
    ylab_w = 6
    pw, ph = width - ylab_w - 1, height - 1  # plot area (one row of x labels)
    if pw < 8 or ph < 3 or not (roofs or marks):
        return [Text("roofline: too small" if roofs or marks else "roofline: no data yet")] + [Text("")] * max(0, height - 1)
    xs = [m.x for m in marks] + [r.ridge for r in roofs]
    x_lo, x_hi = x_range or (min(xs) / 4, max(xs) * 4)
    if x_range is None and x_hi / x_lo < 1e3:  # at least three decades: the slopes need room
        x_lo, x_hi = 10 ** math.floor(math.log10(x_lo)), 10 ** math.ceil(math.log10(x_hi))
    ys = [m.y for m in marks] + [r.peak for r in roofs] + [r.at(x_lo) for r in roofs]
    y_hi = max(ys) * 1.6
    y_lo = max(min(ys) / 1.6, y_hi / 1e6)
    lx_lo, lx_hi, ly_lo, ly_hi = map(math.log10, (x_lo, x_hi, y_lo, y_hi))

    def col(x: float) -> float:  # fractional column in dots (2 per cell)
        return (math.log10(x) - lx_lo) / (lx_hi - lx_lo) * (pw * 2 - 1)

    def row(y: float) -> float:  # fractional dot row from the top (4 per cell)
        return (ly_hi - math.log10(y)) / (ly_hi - ly_lo) * (ph * 4 - 1)

    codes = [[0] * pw for _ in range(ph)]
    styles: list[list[str | None]] = [[None] * pw for _ in range(ph)]
    for roof in roofs:  # later roofs (measured) draw over earlier (theoretical)
        for dx in range(pw * 2):
            if roof.dotted and dx % 3:
                continue
            x = 10 ** (lx_lo + dx / (pw * 2 - 1) * (lx_hi - lx_lo))
            dy = int(round(row(roof.at(x))))
            if 0 <= dy < ph * 4:
                cy, cx = dy // 4, dx // 2
                codes[cy][cx] |= _DOT[dx % 2][dy % 4]
                styles[cy][cx] = roof.style
    grid = [[chr(_BRAILLE + c) if c else " " for c in line] for line in codes]
    for roof in roofs:  # each roof's ridge point
        cx, cy = int(round(col(roof.ridge))) // 2, int(round(row(roof.peak))) // 4
        if roof.mark_ridge and 0 <= cx < pw and 0 <= cy < ph:
            grid[cy][cx], styles[cy][cx] = "◆", roof.style
    for m in marks:
        cx, cy = int(round(col(m.x))) // 2, int(round(row(m.y))) // 4
        if 0 <= cx < pw and 0 <= cy < ph:
            grid[cy][cx], styles[cy][cx] = m.marker, m.style

    def put(r: int, c: int, text: str, style: str, pad: int = 0) -> bool:  # text at (r, c) if its cells are free
        if r < 0 or r >= ph or c < 0 or c + len(text) > pw:
            return False
        if any(grid[r][i] != " " for i in range(max(0, c - pad), min(pw, c + len(text) + pad))):
            return False
        for i, ch in enumerate(text):
            grid[r][c + i], styles[r][c + i] = ch, style
        return True

    for roof in roofs:  # names: flat roofs at their right end (above, else below), sloped ones along the slope
        if not roof.name:
            continue
        if roof.slope_label:  # from the middle of the slope outwards: left of the line, else right of it
            top = min(pw - 1, int(col(roof.ridge)) // 2)
            order = sorted(range(1, top), key=lambda c: abs(c - top * 0.6))
            for c in order:
                x = 10 ** (lx_lo + (2 * c) / (pw * 2 - 1) * (lx_hi - lx_lo))
                r = int(round(row(roof.at(x)))) // 4
                if put(r, c - len(roof.name) - 1, roof.name, roof.style) or put(r, c + 2, roof.name, roof.style):
                    break
        else:
            r = int(round(row(roof.peak))) // 4
            c = pw - len(roof.name)
            put(r - 1, c, roof.name, roof.style) or put(r + 1, c, roof.name, roof.style)
    labelled: dict[str, list[int]] = {}  # label -> columns of points already labelled (one label per spot)
    for m in marks:  # labels (k): right of the marker, else left, else in the row below or above
        if m.label:
            cx, cy = int(round(col(m.x))) // 2, int(round(row(m.y))) // 4
            if any(abs(cx - c) <= 2 for c in labelled.get(m.label, ())):
                continue
            labelled.setdefault(m.label, []).append(cx)
            n = len(m.label)
            spots = ((cy, cx + 1, 0), (cy, cx - n, 0), (cy + 1, cx + 1, 1), (cy - 1, cx + 1, 1), (cy + 1, cx - n, 1),
                     (cy - 1, cx - n, 1))  # beside the marker; a blank cell between labels in the other rows
            spots = spots if ph >= 6 else spots[:2]  # a short plot: a label a row away reads as another point's
            any(put(r, c, m.label, "dim", pad) for r, c, pad in spots)
    # y labels at the rows where decades fall
    ylabels = {}
    for d in _decades(y_lo, y_hi):
        ylabels.setdefault(min(ph - 1, int(round(row(d))) // 4), _short(d))
    lines = []
    for r in range(ph):
        t = Text.assemble((f"{ylabels.get(r, ''):>{ylab_w}}│", "dim"))
        for c in range(pw):
            t.append(grid[r][c], style=styles[r][c] or "")
        lines.append(t)
    xl = [" "] * pw
    for d in _decades(x_lo, x_hi):
        lab = _short(d)
        c = min(pw - len(lab), int(round(col(d))) // 2)
        if all(ch == " " for ch in xl[max(0, c - 1):c + len(lab) + 1]):
            xl[c:c + len(lab)] = lab
    lines.append(Text(" " * ylab_w + "└" + "".join(xl), style="dim"))
    return lines
