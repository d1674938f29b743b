"""Plots the lessons' views share: a log-log plot on a character grid and its legend.

Pure (Rich ``Text`` only), like :mod:`gputop.tui.results.view`.
"""

from __future__ import annotations

import math

from rich.text import Text

Series = tuple[str, str, str, list[tuple[float, float]]]  # (label, style, marker, [(x, y)])


def _fmt(v: float) -> str:
    for scale, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{p}"
    return f"{v:g}" if v >= 1 else f"{v:.0e}".replace("e-0", "e-")


def _log_range(vals: list[float]) -> tuple[float, float]:
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    return (lo, hi) if hi > lo else (lo, lo + 1)


def loglog_plot(width: int, height: int, series: list[Series], hlines: list[tuple[str, float, str]] = (),
                x_label=_fmt) -> list[Text]:
    """A log-log plot on a character grid: each series' points as its marker, joined by dots (a later
    series draws over an earlier one), horizontal reference lines as dashes, decade labels on both axes."""
    pts = [(x, y) for _, _, _, ps in series for x, y in ps if x and y and x > 0 and y > 0]
    ylab_w = 6
    pw, ph = width - ylab_w - 1, height - 1
    if pw < 8 or ph < 3 or not pts:
        return [Text("no data yet" if not pts else "too small", style="dim")] + [Text("")] * max(0, height - 1)
    lx_lo, lx_hi = _log_range([x for x, _ in pts])
    ly_lo, ly_hi = _log_range([y for _, y in pts] + [y for _, y, _ in hlines if y and y > 0])

    def col(x: float) -> int:
        return int(round((math.log10(x) - lx_lo) / (lx_hi - lx_lo) * (pw - 1)))

    def row(y: float) -> int:
        return int(round((ly_hi - math.log10(y)) / (ly_hi - ly_lo) * (ph - 1)))

    grid = [[" "] * pw for _ in range(ph)]
    styles: list[list[str]] = [[""] * pw for _ in range(ph)]
    for _, y, style in hlines:
        if y and y > 0:
            r = row(y)
            for c in range(pw):
                grid[r][c], styles[r][c] = "╌", style
    for _, style, _, ps in series:  # each curve joined by dots, in log space, under the markers
        good = sorted((x, y) for x, y in ps if x and y and x > 0 and y > 0)
        for (x0, y0), (x1, y1) in zip(good, good[1:]):
            c0, c1 = col(x0), col(x1)
            for c in range(c0 + 1, c1):
                f = (c - c0) / (c1 - c0)
                r = row(10 ** (math.log10(y0) + f * (math.log10(y1) - math.log10(y0))))
                if grid[r][c] in (" ", "╌"):
                    grid[r][c], styles[r][c] = "·", style
    for _, style, marker, ps in series:
        for x, y in ps:
            if x and y and x > 0 and y > 0:
                r, c = row(y), col(x)
                grid[r][c], styles[r][c] = marker, style
    ylabels = {row(10.0 ** e): _fmt(10.0 ** e) for e in range(ly_lo, ly_hi + 1)}
    lines = []
    for r in range(ph):
        t = Text(f"{ylabels.get(r, ''):>{ylab_w}}│", style="dim")
        for c in range(pw):
            t.append(grid[r][c], style=styles[r][c])
        lines.append(t)
    xl = [" "] * pw
    for e in range(lx_lo, lx_hi + 1):
        lab = x_label(10.0 ** e)
        c = min(pw - len(lab), col(10.0 ** e))
        if all(ch == " " for ch in xl[max(0, c - 1):c + len(lab) + 1]):
            xl[c:c + len(lab)] = lab
    lines.append(Text(" " * ylab_w + "└" + "".join(xl), style="dim"))
    return lines


def legend(series: list[Series]) -> Text:
    t = Text()
    for label, style, marker, _ in series:
        t.append(f"{marker} ", style=style)
        t.append(f"{label}  ")
    return t


def points(doc: dict) -> list[dict]:
    return [q for q in doc.get("points") or [] if isinstance(q, dict)]
