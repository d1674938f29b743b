"""The key figure of each workload, drawn with plotext at the end of its text report.

``gputop --run NAME`` (without ``--json``) and ``python workloads/NAME.py`` end with one figure: the curve
the workload exists to show (the roofline; the batch-size knee; the offload crossover; bandwidth against
transfer size; bus bandwidth against message size) or one bar chart (amp, cudagraphs, dataloader, fusion).
Two kinds of figure, one drawing helper each:

  Curves  x-y series with log axes where the TUI's view has them, and horizontal labelled lines (peaks,
          roofs, the link); a slanted roof is a series of its own
  Bars    one bar per phase, or stacked parts of each bar (the dataloader's step split), and labelled lines

Each lesson picks its figures' series out of the run document, ``figures(doc)`` in ``lessons/NAME.py``
(a list: one figure, one per op for offload, none when nothing was measured); ``figures_text`` finds it by
the workload's name and draws them. plotext is imported inside the drawing functions only: the TUI keeps its
own braille charts, and no other mode pays for the import. The results and the verdict of the same reports
are :mod:`.report_lines`'.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field

from gputop.format import si
from gputop.lessons import lesson
from gputop.lessons.docs import is_number

FIXED = (80, 20)  # a narrower terminal, a file or a pipe gets this drawing
MARKERS = ("•", "x", "+", "o", "*", "#", "%", "@")  # one per series: told apart without colours too
FILLS = ("█", "▒", "░", "▓")  # one per stacked part


@dataclass
class Curves:
    title: str
    xlabel: str
    ylabel: str
    series: list[tuple[str, list[tuple[float, float]]]]  # (label, [(x, y)]), drawn as points joined by lines
    lines: list[tuple[str, float]] = field(default_factory=list)  # horizontal labelled lines: (label, y)
    xlog: bool = True
    ylog: bool = True


@dataclass
class Bars:
    title: str
    ylabel: str
    labels: list[str]  # one per bar
    parts: list[tuple[str, list[float]]]  # (label, one value per bar); several parts are stacked
    lines: list[tuple[str, float]] = field(default_factory=list)  # horizontal labelled lines: (label, y)


# -- where and how it is drawn -------------------------------------------------------------------------

def size_for(stream) -> tuple[int, int]:
    """(columns, rows) of the figure: the terminal's width (and a height to match, 20 to 40 rows) when
    ``stream`` is a terminal of 80 columns or more, else 80x20."""
    isatty = getattr(stream, "isatty", None)
    if not (callable(isatty) and isatty()):
        return FIXED
    cols, rows = shutil.get_terminal_size(FIXED)
    if cols < FIXED[0]:
        return FIXED
    return cols, max(FIXED[1], min(40, rows - 4, cols // 4))


def wants_color(stream, no_color: bool = False) -> bool:
    """Colours only on a terminal, and neither with ``--no-color`` nor with ``NO_COLOR`` set."""
    isatty = getattr(stream, "isatty", None)
    return not no_color and not os.environ.get("NO_COLOR") and bool(callable(isatty) and isatty())


def draw(fig: Curves | Bars, width: int = FIXED[0], height: int = FIXED[1], color: bool = False) -> str:
    """The figure as text, ``width`` x ``height`` cells (ANSI colours only when ``color``)."""
    return (curves_plot if isinstance(fig, Curves) else bars_plot)(fig, width, height, color)


def _figure(width: int, height: int, color: bool):
    import plotext

    plotext.terminal.limit(False, False)  # the size asked for, whatever plotext finds the terminal to be
    f = plotext.figure
    f.clear()
    f.plot_size(width, height)
    f.theme("simple" if color else "colorless")
    return f


def _line_pixel():
    """The labelled lines' colour (plotext's cycler may hand a text black, unreadable on a dark terminal)."""
    import plotext

    return plotext.pixel(foreground="orange")


def _across(f, xs: tuple[float, float], ys: tuple[float, float]) -> None:
    """A labelled line from (xs[0], ys[0]) to (xs[1], ys[1]): a signal, so that it keeps the terminal's own
    background (plotext's line() paints it white)."""
    import plotext

    mark = plotext.marker("─" if ys[0] == ys[1] else "│", _line_pixel())
    f.draw(f.signal(list(xs), list(ys), marker=mark).lines())


def _line_label(text: str):
    """A labelled line's text, in the line's colour."""
    import plotext

    return plotext.colorize(text, _line_pixel()).matrix()


def _render(f, color: bool, legend: list[str], width: int) -> str:
    """The built figure, then its legend under it (plotext's own box would hide the data), wrapped to ``width``."""
    f.legend(active=False)
    text = f.build().string(colorless=not color)
    f.clear()
    out = [line.rstrip() for line in text.rstrip("\n").split("\n")]
    row = ""
    for item in legend:
        if row and len(row) + 3 + len(item) > width:
            out.append(row)
            row = ""
        row = f"{row}   {item}" if row else f"    {item}"
    return "\n".join(out + ([row] if row else []))


def _short(v: float, integer: bool = False) -> str:
    """A tick or bar label: 1 k, 250 M, 0.5, 1e-5 (SI prefixes, no unit); ``integer``: 1024 as it is."""
    if integer and abs(v) < 1e5:
        return f"{v:.0f}"
    if v == 0:
        return "0"
    if abs(v) < 1e-2:
        return f"{v:.0e}".replace("e-0", "e-")
    return si(v, "").strip()


def _log_ticks(lo: float, hi: float, base: int = 10) -> list[float]:
    """Powers of ``base`` between lo and hi, at most 8; 1-2-5 steps when fewer than three powers of ten fall
    between (and lo and hi themselves when even those are fewer than two)."""
    a, b = math.floor(math.log(lo, base)) - 1, math.ceil(math.log(hi, base)) + 1
    inside = [t for t in (float(base) ** e for e in range(a, b + 1)) if lo * 0.999 <= t <= hi * 1.001]
    if base == 10 and len(inside) < 3:
        inside = [t for e in range(a, b + 1) for m in (1, 2, 5) if lo * 0.999 <= (t := m * 10.0 ** e) <= hi * 1.001]
    inside = inside[::max(1, math.ceil(len(inside) / 8))]
    return inside if len(inside) >= 2 else [lo, hi]


def _lin_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) from lo to hi."""
    raw = (hi - lo) / max(1, n - 1) or 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _limits(values: list[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:
        span = max(math.log10(hi / lo), 0.3)
        pad = 10 ** (0.06 * span)
        return lo / pad, hi * pad
    pad = (hi - lo) * 0.06 or abs(hi) * 0.1 or 1.0
    return (0.0 if lo >= 0 else lo - pad), hi + pad


def curves_plot(fig: Curves, width: int, height: int, color: bool) -> str:
    """Each series as points joined by lines, horizontal labelled lines, decade ticks on log axes."""
    series = [(label, [(x, y) for x, y in pts if is_number(x, fig.xlog) and is_number(y, fig.ylog)]) for label, pts in fig.series]
    series = [(label, sorted(pts)) for label, pts in series if pts]
    lines = [(label, y) for label, y in fig.lines if is_number(y, fig.ylog)]
    if not series:
        return ""
    # log axes: the data in log10 on a linear ruler, ticked at powers of the base with their values
    tx = (lambda v: math.log10(v)) if fig.xlog else float
    ty = (lambda v: math.log10(v)) if fig.ylog else float
    f = _figure(width, height, color)
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts] + [y for _, y in lines]
    span = {}
    for axis, log, vals, base, t in (("x", fig.xlog, xs, 2 if fig.xlabel.startswith("batch") else 10, tx),
                                     ("y", fig.ylog, ys, 10, ty)):
        lo, hi = _limits(vals, log)
        span[axis] = (t(lo), t(hi))
        ruler = f.ruler(axis)
        ruler.lim(t(lo), t(hi))
        ticks = _log_ticks(min(vals), max(vals), base) if log else _lin_ticks(lo, hi)
        ruler.ticks([t(v) for v in ticks], [_short(v, integer=base == 2) for v in ticks])
    for _, y in lines:  # the lines across first: the data draws over them
        _across(f, span["x"], (ty(y), ty(y)))
    for (label, pts), marker in zip(series, MARKERS * len(series)):
        s = f.signal([tx(x) for x, _ in pts], [ty(y) for _, y in pts], marker=marker)
        s.label(label)
        s.lines()
        f.draw(s)
    for label, y in lines:  # each line's label at its left end
        f.draw(f.text(span["x"][0], ty(y), _line_label(f" {label} "), alignment="left"))
    f.title(fig.title)
    f.label(fig.xlabel, "x")
    f.label(fig.ylabel, "y")
    legend = [f"{m} {label}" for (label, _), m in zip(series, MARKERS * len(series))]
    return _render(f, color, legend + [f"─ {label}" for label, _ in lines], width)


def bars_plot(fig: Bars, width: int, height: int, color: bool) -> str:
    """One bar per label (the parts stacked), each bar's total written on it, labelled lines across; the bars
    lie along x when their labels would not fit under them."""
    parts = [(label, [v or 0.0 for v in vals]) for label, vals in fig.parts]
    if not fig.labels or not parts:
        return ""
    n = len(fig.labels)
    across = sum(len(label) + 2 for label in fig.labels) > width - 12
    value_axis = "x" if across else "y"
    f = _figure(width, height, color)
    for _, v in fig.lines:  # the lines across first: the bars draw over them
        _across(f, (v, v) if across else (0.5, n + 0.5), (0.5, n + 0.5) if across else (v, v))
    totals = [sum(vals[i] for _, vals in parts) for i in range(n)]
    base = [0.0] * n
    for (label, vals), fill in zip(parts, FILLS * len(parts)):  # each part a floating bar on the ones below
        top = [b + v for b, v in zip(base, vals)]
        b = f.bar(list(fig.labels), base, top, marker=fill, orientation="h" if across else "v",
                  labeled=[_short(t) for t in totals] if len(parts) == 1 else False)
        if len(parts) > 1:
            b.label(label)
        f.draw(b)
        base = top
    for label, v in fig.lines:
        f.draw(f.text(v, n + 0.5, _line_label(f" {label}"), alignment="left") if across else
               f.text(0.5, v, _line_label(f" {label} "), alignment="left"))
    hi = max(totals + [v for _, v in fig.lines] + [0.0]) * 1.12 or 1.0
    ticks = _lin_ticks(0.0, hi)
    f.ruler(value_axis).lim(0, hi)
    f.ruler(value_axis).ticks(ticks, [_short(t) for t in ticks])
    if across:
        f.ruler("y").lim(0.5, n + 0.5 + 0.6 * bool(fig.lines))
    f.title(fig.title)
    f.label(fig.ylabel, value_axis)
    legend = [f"{fill} {label}" for (label, _), fill in zip(parts, FILLS * len(parts))] if len(parts) > 1 else []
    return _render(f, color, legend + [f"─ {label}" for label, _ in fig.lines], width)


# -- the workload's figures, picked out of its run document by its lesson -------------------------------

def figures_text(doc: dict, width: int = FIXED[0], height: int = FIXED[1], color: bool = False) -> str:
    """The workload's key figure(s) drawn, or "" when it has none (no lesson, a lesson without figures, no points)."""
    known = lesson(str(doc.get("workload")))
    figs = known.figures(doc) if known and known.figures else []
    if not figs:
        return ""
    try:
        import plotext  # noqa: F401  (a declared dependency; a report without it still has its numbers and verdict)
    except ImportError:
        return "(no figure: plotext is not installed here; pip install plotext)"
    return "\n\n".join(t for t in (draw(fig, width, height, color) for fig in figs) if t)
