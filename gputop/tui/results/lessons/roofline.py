"""The roofline lesson's view: the roofs (theoretical dotted, measured solid), the points (a marker per
variant, k beside them), a legend and the % of roof per point. :mod:`gputop.tui.results.view` draws any run
whose points look like a roofline's (FLOP/byte and FLOP/s) with it too.

Pure (Rich ``Text`` only).
"""

from __future__ import annotations

from rich.text import Text

from gputop.format import si
from gputop.tui.widgets import charts
from gputop.tui.results.view import CONSOLE, measured_roof, roofline_points

VARIANT_MARKS = {"mul+add": ("●", "bold white"), "fma": ("▲", "bold green")}  # marker, style per variant
OTHER_MARKS = [("■", "bold magenta"), ("✚", "bold blue"), ("★", "bold red")]
TABLE_W = 48  # the side table of points (variant, k, AI, GFLOP/s, GB/s, % of roof, bound)


def _variant_marks(points: list[dict]) -> dict:
    marks: dict = {}
    for p in points:
        v = str(p.get("variant") or "")
        if v not in marks:
            others = [m for m in marks if m not in VARIANT_MARKS and m]
            marks[v] = VARIANT_MARKS.get(v) or (OTHER_MARKS[len(others) % len(OTHER_MARKS)] if v else ("●", "bold"))
    return marks


def roofline_roofs(doc: dict) -> list[charts.Roof]:
    """Theoretical roofs (dotted: the peaks of device.peaks) and measured ones (solid: results.measured_roofs):
    DRAM and L2 slopes, FP32, FP64 and bf16 tensor flats."""
    device = doc.get("device") or {}
    peaks = device.get("peaks") or {}
    results_ = doc.get("results") or {}
    measured = results_.get("measured_roofs") if isinstance(results_.get("measured_roofs"), dict) else {}
    roofs = []
    bw, fp = peaks.get("dram_bytes_per_s"), peaks.get("fp32_flops")
    if bw and fp and device.get("kind", "cuda") == "cuda":
        roofs.append(charts.Roof("theoretical", bw, fp, "cyan", dotted=True))
        tb = (peaks.get("tensor_dense_flops") or {}).get("bf16")
        if tb and measured.get("tensor_dense_flops"):
            roofs.append(charts.Roof("theoretical bf16", bw, tb, "green", dotted=True, ridge=False))
    mbw, mfp = measured.get("dram_bytes_per_s"), measured.get("fp32_flops")
    if not (mbw and mfp):
        mbw, mfp = measured_roof(results_)
    if not (mbw and mfp):
        return roofs
    l2 = measured.get("l2_bytes_per_s")
    if l2 and l2 > mbw:
        roofs.append(charts.Roof("L2", l2, mfp, "magenta", name=f"L2 {si(l2, 'B/s')}", ridge=False, slope_label=True))
    f64 = measured.get("fp64_flops")
    if f64:
        roofs.append(charts.Roof("FP64", mbw, f64, "blue", name=f"FP64 {si(f64, '')}", ridge=False))
    tensor = (measured.get("tensor_dense_flops") or {}).get("bf16")
    if tensor:
        roofs.append(charts.Roof("bf16 tensor", mbw, tensor, "bold green", name=f"bf16 {si(tensor, '')}", ridge=False))
    roofs.append(charts.Roof("measured", mbw, mfp, "bold yellow", name=f"FP32 {si(mfp, '')}"))
    roofs.append(charts.Roof("DRAM", mbw, mfp, "bold yellow", name=f"DRAM {si(mbw, 'B/s')}", ridge=False,
                             slope_label=True))  # the slope's name (the bf16 roof draws its upper part in green)
    return roofs


def _pct_roof(p: dict):
    v = p.get("pct_roof_measured")
    return p.get("pct_roof_theoretical") if v is None else v


def points_table(points: list[dict], marks: dict, rows: int) -> list[Text]:
    """variant, k, AI, GFLOP/s, GB/s, % of the roof at that AI (measured, else theoretical), bound."""
    lines = [Text(f"  {'k':>5} {'AI':>6} {'GFLOP/s':>8} {'GB/s':>7} {'%roof':>5} bound", style="dim")]
    for p in points[:max(0, rows - 1)]:
        m, st = marks.get(str(p.get("variant") or ""), ("●", "bold"))
        pct = _pct_roof(p)
        t = Text(m + " ", style=st)
        t.append(f"{p.get('k', ''):>5} {p.get('ai', 0):>6.3g} {p.get('gflops', 0):>8.4g} {p.get('gbs', 0):>7.4g} "
                 f"{'' if pct is None else f'{pct:.0f}':>5} {(p.get('bound') or '').split('-')[0].split(' ')[0]}")
        lines.append(t)
    return lines


def pct_lines(points: list[dict], marks: dict, width: int) -> list[Text]:
    """The small-screen form of the table (and the markers' legend): one line per variant,
    ``k:% of roof`` per point."""
    out = []
    for v, (m, st) in marks.items():
        t = Text(f"{m} {v or 'point'} ", style=st)
        t.append("k:%roof", style="dim")
        for p in points:
            pct = _pct_roof(p)
            if str(p.get("variant") or "") == v and pct is not None:
                t.append(f" {p.get('k')}:{pct:.0f}")
        t.truncate(max(1, width))
        out.append(t)
    return out


def view(doc: dict, width: int, height: int) -> list[Text]:
    """The roofs, the points (a marker per variant, k beside them), a legend and the % of roof per point:
    a table beside the plot when the panel is wide, under it when tall, one line per variant when small."""
    points = [p for p in (doc.get("points") or []) if isinstance(p, dict)]
    roofs = roofline_roofs(doc)
    marks = _variant_marks(points)
    pts = []
    for p, (x, y) in zip(points, roofline_points(points)):
        m, st = marks.get(str(p.get("variant") or ""), ("●", "bold"))
        pts.append(charts.Mark(x, y, m, st, str(p.get("k", ""))))
    full = height >= 20  # the roofs' figures and the markers in the legend (small panels: see pct_lines)
    legend = Text()
    for v, (m, st) in marks.items() if full else ():
        legend.append(f"{m} {v or 'point'}  ", style=st)
    theo = next((r for r in roofs if r.label == "theoretical"), None)
    meas = next((r for r in roofs if r.label == "measured"), None)
    for r, mark, style in ((theo, "⠁⠈", "cyan"), (meas, "⣿", "bold yellow")):
        if r is not None:
            legend.append(f"{mark} {r.label}", style=style)
            legend.append(f" {si(r.bandwidth, 'B/s')} · {si(r.peak, 'FLOP/s')}  " if full else "  ")
    if meas is not None:
        legend.append("◆ ridge", style="bold yellow")
        legend.append(f" {meas.ridge:.3g} FLOP/B = k {4 * meas.ridge:.0f}" if full else f" k {4 * meas.ridge:.0f}")
    if not any(not r.dotted for r in roofs) and doc.get("status") == "running":
        legend.append("  measured roofs: coming", style="dim")
    legend_lines = legend.wrap(CONSOLE, max(20, width)) if width > 0 else [legend]
    side = width >= 110 and points
    plot_w = width - TABLE_W - 1 if side else width
    below: list[Text] = []
    if not side and points:
        room = height - len(legend_lines) - 10  # keep at least 10 rows for the plot
        below = points_table(points, marks, room) if room >= len(points) + 1 else pct_lines(points, marks, width)
    plot_h = max(0, height - len(legend_lines) - len(below))
    lines = charts.roofline_plot(plot_w, plot_h, roofs, pts) if plot_h >= 4 else []
    if side:
        table = points_table(points, marks, plot_h)
        lines = [Text.assemble(line, " " * max(0, plot_w - line.cell_len), " ", table[i] if i < len(table) else "")
                 for i, line in enumerate(lines)]
    return lines + list(legend_lines) + below
