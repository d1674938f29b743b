"""The key figure of each workload, drawn with plotext at the end of its text report.

``gputop --run NAME`` (without ``--json``) and ``python workloads/NAME.py`` end with one figure: the curve
the workload exists to show (the roofline; the batch-size knee; the offload crossover; bandwidth against
transfer size; bus bandwidth against message size) or one bar chart (amp, cudagraphs, dataloader, fusion).
Two kinds of figure, one drawing helper each:

  Curves  x-y series with log axes where the TUI's view has them, and horizontal labelled lines (peaks,
          roofs, the link); a slanted roof is a series of its own
  Bars    one bar per phase, or stacked parts of each bar (the dataloader's step split), and labelled lines

``FIGURES`` maps a workload's name to the function that picks its figure's series out of the run document
(a list: one figure, one per op for offload, none when nothing was measured). plotext is imported inside the
drawing functions only: the TUI keeps its own braille charts, and no other mode pays for the import. The
results and the verdict of the same reports are written as labelled lines and tables here too
(``result_lines``, ``verdict_lines``), for ``gputop --run`` and for a workload run on its own alike.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field

from gputop.analysis.verdict import display_name
from gputop.format import si

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
    series = [(label, [(x, y) for x, y in pts if _ok(x, fig.xlog) and _ok(y, fig.ylog)]) for label, pts in fig.series]
    series = [(label, sorted(pts)) for label, pts in series if pts]
    lines = [(label, y) for label, y in fig.lines if _ok(y, fig.ylog)]
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


def _ok(v, log: bool) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 or not log)


# -- each workload's figure, picked out of its run document --------------------------------------------

def _points(doc: dict, *keys: str) -> list[dict]:
    """The points that hold a number in every one of ``keys`` (skipped and out-of-memory points hold none)."""
    return [q for q in doc.get("points") or [] if isinstance(q, dict)
            and all(_ok(q.get(k), False) for k in keys)]


def _peaks(doc: dict) -> dict:
    device = doc.get("device") or {}
    return (device.get("peaks") or {}) if device.get("kind") == "cuda" else {}


def _by(points: list[dict], key: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for q in points:
        out.setdefault(str(q.get(key)), []).append(q)
    return out


def roofline(doc: dict) -> list[Curves]:
    """FLOP/s against FLOP/byte, a series per kernel variant, under the measured roof (the DRAM slope up to
    the ridge, the FP32 and FP64 flats) and the GPU's datasheet peaks."""
    pts = _points(doc, "ai", "gflops")
    if not pts:
        return []
    series = [(variant, [(q["ai"], q["gflops"] * 1e9) for q in qs]) for variant, qs in _by(pts, "variant").items()]
    roofs = (doc.get("results") or {}).get("measured_roofs") or {}
    peaks = _peaks(doc)
    lines = []
    x_lo = min(q["ai"] for q in pts)
    for what, bw, fp in (("measured", roofs.get("dram_bytes_per_s"), roofs.get("fp32_flops")),
                         ("peak", peaks.get("dram_bytes_per_s"), peaks.get("fp32_flops"))):
        if _ok(bw, True) and _ok(fp, True):
            ridge = fp / bw
            series.append((f"DRAM {si(bw, 'B/s')} ({what}), ridge {ridge:.3g} FLOP/B",
                           [(x, bw * x) for x in (min(x_lo, ridge), ridge)]))
            lines.append((f"FP32 {si(fp, 'FLOP/s')} ({what})", fp))
    if _ok(roofs.get("fp64_flops"), True):
        lines.append((f"FP64 {si(roofs['fp64_flops'], 'FLOP/s')} (measured)", roofs["fp64_flops"]))
    return [Curves("roofline: FLOP/s against arithmetic intensity", "FLOP/byte (arithmetic intensity)", "FLOP/s",
                   series, lines)]


def batchsize(doc: dict) -> list[Curves]:
    """Samples/s against the batch size (doubling: a log axis), and the line the knee crosses."""
    pts = _points(doc, "batch", "samples_per_s")
    if not pts:
        return []
    results = doc.get("results") or {}
    knee = results.get("knee") or {}
    lines = []
    if _ok(knee.get("best_samples_per_s"), True) and _ok(knee.get("fraction"), True):
        lines.append((f"{100 * knee['fraction']:.0f}% of best ({si(knee['best_samples_per_s'], '/s')} at batch "
                      f"{knee.get('best_batch')}): knee at batch {knee.get('knee_batch')}",
                      knee["fraction"] * knee["best_samples_per_s"]))
    title = "samples/s against batch size"
    if results.get("oom_boundary"):
        title += f"; {results['oom_boundary']}"
    return [Curves(title, "batch size", "samples/s", [("samples/s", [(q["batch"], q["samples_per_s"]) for q in pts])],
                   lines, xlog=True, ylog=False)]


OFFLOAD_CURVES = (("CPU", "cpu_ms"), ("GPU + copies", "gpu_copies_ms"), ("GPU alone", "gpu_ms"),
                  ("GPU naive (no sync)", "gpu_naive_ms"))


def offload(doc: dict) -> list[Curves]:
    """Per op, time against size on the CPU and the GPU (with and without the copies): where the GPU wins."""
    crossings = (doc.get("results") or {}).get("crossover_n") or {}
    figs = []
    for op, qs in _by(_points(doc, "n", "cpu_ms"), "op").items():
        series = [(label, [(q["n"], q[key]) for q in qs if _ok(q.get(key), True)]) for label, key in OFFLOAD_CURVES]
        cross = crossings.get(op) or {}
        title = f"{op}: ms against n" + (" (n x n)" if op == "matmul" else " (elements)")
        if cross:
            title += (f"; GPU wins from n={cross.get('with_copies') or 'never'} with copies, "
                      f"{cross.get('without_copies') or 'never'} without")
        figs.append(Curves(title, "n", "ms", [s for s in series if s[1]]))
    return figs


def transfer(doc: dict) -> list[Curves]:
    """Copy bandwidth against size, a series per direction and memory kind, under the PCIe link's peak."""
    pts = _points(doc, "bytes", "gb_per_s")
    if not pts:
        return []
    series = [(kind, [(q["bytes"], q["gb_per_s"] * 1e9) for q in qs]) for kind, qs in _by(pts, "kind").items()]
    link = _peaks(doc).get("pcie_bytes_per_s_per_dir")
    copies = any(str(q.get("kind", "")).startswith(("h2d", "d2h")) for q in pts)
    lines = [(f"PCIe link {si(link, 'B/s')} per direction", link)] if copies and _ok(link, True) else []
    return [Curves("copy bandwidth against transfer size", "bytes", "B/s", series, lines)]


def allreduce(doc: dict) -> list[Curves]:
    """All-reduce bus bandwidth against message size, under the link's peak when NVML knew it."""
    pts = [q for q in _points(doc, "size_bytes", "busbw_gbps") if q.get("phase") == "bus bandwidth"]
    if not pts:
        return []
    results = doc.get("results") or {}
    peak = (results.get("link_peak") or {}).get("peak_gbps")
    lines = [(f"link peak {si(peak * 1e9, 'B/s')}", peak * 1e9)] if _ok(peak, True) else []
    title = "all-reduce bus bandwidth against message size"
    if _ok(results.get("latency_us"), True):
        title += f"; latency {results['latency_us']:.3g} us"
    return [Curves(title, "message bytes", "bus B/s", [("busbw", [(q["size_bytes"], q["busbw_gbps"] * 1e9) for q in pts])],
                   lines)]


def amp(doc: dict) -> list[Bars]:
    """Samples/s of each precision, its speed-up over strict FP32 under the bar."""
    pts = _points(doc, "samples_per_s")
    if not pts:
        return []
    labels = [str(q["phase"]) + (f" x{q['speedup_vs_fp32_strict']:.2f}" if _ok(q.get("speedup_vs_fp32_strict"), True)
                                 else "") for q in pts]
    return [Bars("training samples/s per precision (x speed-up over fp32-strict)", "samples/s", labels,
                 [("samples/s", [q["samples_per_s"] for q in pts])])]


def cudagraphs(doc: dict) -> list[Bars]:
    """Microseconds per kernel of each launch mode against the kernel's own run time; on a CPU, which has
    no graphs, the MLP's step time."""
    pts = _points(doc, "us_per_kernel")
    if pts:
        kernel = next((q["kernel_us"] for q in pts if _ok(q.get("kernel_us"), True)), None)
        lines = [(f"the kernel alone {kernel:.3g} us", kernel)] if kernel else []
        return [Bars("us per kernel launched (shorter is better)", "us", [str(q["mode"]) for q in pts],
                     [("us per kernel", [q["us_per_kernel"] for q in pts])], lines)]
    pts = _points(doc, "step_ms")
    if not pts:
        return []
    return [Bars("MLP step time (shorter is better)", "ms", [str(q["phase"]).replace("mlp ", "") for q in pts],
                 [("step ms", [q["step_ms"] for q in pts])])]


def dataloader(doc: dict) -> list[Bars]:
    """Where each loader setting's step time goes: waiting for data, the copy to the GPU, compute."""
    pts = _points(doc, "step_ms")
    if not pts:
        return []
    parts = [(label, [q.get(key) or 0.0 for q in pts]) for label, key in
             (("data wait", "data_wait_ms"), ("h2d copy", "h2d_ms"), ("compute", "compute_ms"))]
    parts = [p for p in parts if any(p[1])] or [("step", [q["step_ms"] for q in pts])]
    return [Bars("ms per training step, by where it goes", "ms", [str(q["phase"]) for q in pts], parts)]


def fusion(doc: dict) -> list[Bars]:
    """Time per call of each function and variant at the largest size measured (shorter is better)."""
    largest: dict[str, dict] = {}
    for q in _points(doc, "ms", "n"):
        key = str(q.get("phase") or f"{q.get('fn')} {q.get('variant')}")
        if key not in largest or q["n"] >= largest[key]["n"]:
            largest[key] = q
    if not largest:
        return []
    sizes = sorted({q["n"] for q in largest.values()})
    where = f"n={sizes[-1]}" if len(sizes) == 1 else "the largest n of each"
    return [Bars(f"ms per call at {where} (shorter is better)", "ms", list(largest),
                 [("ms per call", [q["ms"] for q in largest.values()])])]


FIGURES = {"roofline": roofline, "batchsize": batchsize, "offload": offload, "transfer": transfer,
           "allreduce": allreduce, "amp": amp, "cudagraphs": cudagraphs, "dataloader": dataloader, "fusion": fusion}


def figures_text(doc: dict, width: int = FIXED[0], height: int = FIXED[1], color: bool = False) -> str:
    """The workload's key figure(s) drawn, or "" when it has none (an unknown workload, no points)."""
    pick = FIGURES.get(str(doc.get("workload")))
    figs = pick(doc) if pick else []
    return "\n\n".join(t for t in (draw(fig, width, height, color) for fig in figs) if t)


# -- results and verdicts as labelled lines and tables --------------------------------------------------------------

def cell(v) -> str:
    """A value as the text report writes it: n/a, 4 significant digits, yes/no, a list joined by commas."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(cell(x) for x in v) or "none"
    return str(v)


def table(rows: list[dict], cols: list[str], indent: str = "  ") -> list[str]:
    """Rows under a header of their columns, right-aligned."""
    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    out = [indent + "  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    out += [indent + "  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return out


def result_lines(results: dict, indent: str = "  ") -> list[str]:
    """A workload's results, one labelled line per value: a short dict of values on its key's line, other
    dicts indented under their key, lists of dicts as tables, lists of values joined."""
    out = []
    for key, v in results.items():
        flat = isinstance(v, dict) and v and not any(isinstance(x, (dict, list, tuple)) for x in v.values())
        line = f"{indent}{key}: " + ", ".join(f"{k} {cell(x)}" for k, x in v.items()) if flat else ""
        if flat and len(line) <= 100:
            out.append(line)
        elif isinstance(v, dict):
            out.append(f"{indent}{key}:" + ("" if v else " none"))
            out += result_lines(v, indent + "  ")
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(k for x in v for k, y in x.items() if not isinstance(y, (dict, list))))
            out.append(f"{indent}{key}:")
            out += table(list(v), cols, indent + "  ")
        elif isinstance(v, (list, tuple)) and any(isinstance(x, (dict, list)) for x in v):
            out.append(f"{indent}{key}:")
            out += [line for i, x in enumerate(v) for line in result_lines({f"#{i + 1}": x}, indent + "  ")]
        else:
            out.append(f"{indent}{key}: {cell(v)}")
    return out


def _words(v) -> str:
    """A verdict field in words: a list joined with '; ', a dict as 'key value' pairs."""
    if isinstance(v, (list, tuple)):
        return "; ".join(_words(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {cell(x)}" for k, x in v.items())
    return cell(v)


def verdict_lines(v: dict | None) -> list[str]:
    """A verdict: its class, evidence, notes and advice, one labelled line each."""
    if not v:
        return []
    conf = f" (confidence {v['confidence']:.2f})" if v.get("confidence") is not None else ""
    lines = [f"verdict: {display_name(v)}{conf}", f"  evidence: {_words(v.get('evidence_text')) or 'n/a'}"]
    lines += [f"  note: {_words(n)}" for n in v.get("notes") or []]
    if v.get("advice"):
        lines.append(f"  advice: {_words(v['advice'])}")
    return lines
