"""Results views of the seed-lesson workloads: offload, fusion, transfer.

Pure (Rich ``Text`` only), like :mod:`gputop.tui.results`, which hands these workloads' documents here:

  offload   a log-log plot per op of time against size: CPU, GPU with copies, GPU alone, and the naive
            (unsynchronised) GPU timing, flat because it times only the launch; the crossovers in a legend
  fusion    bars per function and variant at the largest size: time, kernels per call, bandwidth against
            the DRAM roof, speed-up over eager
  transfer  a log-log plot of copy bandwidth against size (pageable, pinned, host memcpy) under the PCIe
            link's peak, and a timeline of the upload / compute / download spans on one and three streams
"""

from __future__ import annotations

import math

from rich.text import Text

from gputop.analysis.offload_report import crossover
from gputop.format import si
from gputop.tui import charts

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


def _legend(series: list[Series]) -> Text:
    t = Text()
    for label, style, marker, _ in series:
        t.append(f"{marker} ", style=style)
        t.append(f"{label}  ")
    return t


def _points(doc: dict) -> list[dict]:
    return [q for q in doc.get("points") or [] if isinstance(q, dict)]


# -- offload -------------------------------------------------------------------------------------------

OFFLOAD_CURVES = (("CPU", "cpu_ms", "bold green", "●"), ("GPU+copies", "gpu_copies_ms", "bold yellow", "◆"),
                  ("GPU alone", "gpu_ms", "bold cyan", "▲"), ("GPU naive (no sync)", "gpu_naive_ms", "red", "×"))


def _crossover_text(pts: list[dict], key: str) -> str:
    """Where the GPU (``key``) starts to win for good, as the workload's analysis defines it."""
    n = crossover(pts, key)
    return "never" if n is None else f"n={n}"


def _fresh_memory_line(pts: list[dict]) -> Text | None:
    """The download into fresh host memory (x.cpu()) against the reused buffer, at the largest copy measured."""
    both = [q for q in pts if q.get("d2h_fresh_ms") is not None and q.get("d2h_ms") is not None]
    if not both:
        return None
    q = max(both, key=lambda q: (q.get("bytes_copied") or 0, q["n"]))
    size = f"2^{q['log2']}" if q.get("log2") is not None else str(q["n"])
    return Text(f"x.cpu() into fresh memory pays page faults: download {q['d2h_fresh_ms']:.3g} vs {q['d2h_ms']:.3g} ms "
                f"reused, {q['op']} {size}", style="dim")


def _offload_block(mine: list[dict], op: str, width: int, height: int) -> tuple[list[Text], list[Series]]:
    """The title and plot of one op (``height`` lines in all), and its series."""
    series = [(label, style, marker, [(float(q["n"]), q[key]) for q in mine if q.get(key)])
              for label, key, style, marker in OFFLOAD_CURVES]
    series = [s for s in series if s[3]]
    head = Text(f"{op}: ms vs n {'(n x n)' if op == 'matmul' else '(elements)'}", style="bold")
    info = Text()
    if any(q.get("gpu_copies_ms") is not None for q in mine):
        info.append(f"GPU wins from {_crossover_text(mine, 'gpu_copies_ms')} with copies, "
                    f"{_crossover_text(mine, 'gpu_ms')} without")
        big = max(mine, key=lambda q: q["n"])
        if big.get("copy_share") is not None:
            info.append(f"; copies {100 * big['copy_share']:.0f}% at n={big['n']}")
    else:
        info.append("CPU only (no GPU in this run)", style="dim")
    for t in (head, info):
        t.truncate(width, overflow="ellipsis")
    return [head, info] + loglog_plot(width, max(0, height - 2), series), series


def offload_view(doc: dict, width: int, height: int) -> list[Text]:
    pts = [q for q in _points(doc) if q.get("op") and q.get("cpu_ms") is not None]
    ops = list(dict.fromkeys(q["op"] for q in pts))
    if not ops:
        return [Text("no results yet", style="dim")]
    fresh = _fresh_memory_line(pts) if height >= 8 else None
    if fresh:
        fresh.truncate(width, overflow="ellipsis")
    room = height - 1 - bool(fresh)  # under the plots: the legend, and the fresh-memory line
    blocks, series = [], []
    stacked = room >= 12 * len(ops) - 1 or len(ops) == 1
    side = not stacked and width >= 100  # two plots side by side when they do not fit one above the other
    shown = ops if stacked or side else ops[-1:]
    for op in shown:
        w = (width - 2) // 2 if side else width
        h = room if side else max(4, room // len(shown))
        lines, ser = _offload_block([q for q in pts if q["op"] == op], op, w, h)
        blocks.append(lines)
        series = series or ser
    if side:
        w = (width - 2) // 2
        body = []
        for i in range(max(len(b) for b in blocks)):
            left = blocks[0][i] if i < len(blocks[0]) else Text("")
            row = left.copy()
            row.pad_right(w + 2 - len(left.plain))
            row.append_text(blocks[1][i] if i < len(blocks[1]) else Text(""))
            body.append(row)
    else:
        body = [line for b in blocks for line in b]
    legend = _legend(series)
    if any(s[0].startswith("GPU naive") for s in series):
        legend.append("naive = no synchronize: times the launch only, flat at every size", style="dim")
    return body[:max(0, room)] + [legend] + ([fresh] if fresh else [])


# -- fusion --------------------------------------------------------------------------------------------

def fusion_view(doc: dict, width: int, height: int) -> list[Text]:
    pts = _points(doc)
    if not pts:
        return [Text("no results yet", style="dim")]
    dram = ((doc.get("device") or {}).get("peaks") or {}).get("dram_bytes_per_s")
    if (doc.get("device") or {}).get("kind") == "cpu":
        dram = None
    rows: dict[str, dict] = {}
    for q in pts:  # the largest size of each function and variant (or why it was skipped)
        key = q.get("phase") or f"{q.get('fn')} {q.get('variant')}"
        if q.get("skipped") or key not in rows or q.get("n", 0) >= rows[key].get("n", 0):
            rows[key] = q
    done = [q for q in rows.values() if q.get("ms")]
    worst = max((q["ms"] for q in done), default=1.0)
    label_w = min(22, max(len(k) for k in rows))
    bar_w = max(4, min(30, width - label_w - 60))
    lines = [Text.assemble(("time per call at the largest size (shorter is better)", "bold"),
                           (f"; DRAM roof {si(dram, 'B/s')}" if dram else "", "dim"))]
    for key, q in rows.items():
        t = Text(f"{key[:label_w]:<{label_w}} ")
        if q.get("skipped"):
            t.append("skipped: ", style="bold red")
            t.append(str(q.get("reason", ""))[:max(10, width - label_w - 12)], style="dim")
            lines.append(t)
            continue
        fused = q.get("kernels_per_call") == 1
        t.append(charts.hbar(q["ms"] / worst if worst else 0, bar_w), style="green" if fused else "yellow")
        t.append(f" {q['ms']:.4g} ms  {q.get('kernels_per_call')} kernel{'s' if q.get('kernels_per_call') != 1 else ''}")
        if q.get("gb_per_s"):
            t.append(f"  {si(q['gb_per_s'] * 1e9, 'B/s')}")
            if dram:
                t.append(f" ({100 * q['gb_per_s'] * 1e9 / dram:.0f}% of roof)", style="dim")
        if q.get("speedup_vs_eager"):
            t.append(f"  {q['speedup_vs_eager']:.2f}x eager", style="bold")
        lines.append(t)
    lines.append(Text("fused (1 kernel) in green: the data is read from and written to memory once", style="dim"))
    return lines[:height]


# -- transfer ------------------------------------------------------------------------------------------

BW_CURVES = (("h2d pageable", "yellow", "○"), ("d2h pageable", "magenta", "□"), ("h2d pinned", "bold cyan", "●"),
             ("d2h pinned", "bold blue", "■"), ("host memcpy", "green", "+"))
SPAN_STYLE = {"upload": ("▆", "cyan"), "compute": ("█", "magenta"), "download": ("▆", "yellow")}


def streams_timeline(results: dict, width: int, height: int) -> list[Text]:
    """One row per stream of each mode on a shared time axis: upload, compute and download spans."""
    modes = (results.get("streams") or {}).get("modes") or {}
    modes = {m: v for m, v in modes.items() if v.get("timeline")}
    if not modes or height < 2:
        return []
    rows = 1 + sum(len({s["stream"] for s in v["timeline"]}) for v in modes.values())
    if rows > height and len(modes) > 2:  # short of room: the seed's version looks like the serial one
        modes.pop("seed", None)
    t_end = max(s["end_ms"] for v in modes.values() for s in v["timeline"]) or 1.0
    label_w = 18
    bar_w = max(8, width - label_w - 12)
    lines = [Text.assemble(("streams: ", "bold"), ("▆ upload ", "cyan"), ("█ compute ", "magenta"),
                           ("▆ download", "yellow"), (f"   0 .. {t_end:.1f} ms", "dim"))]
    for mode, v in modes.items():
        streams = list(dict.fromkeys(s["stream"] for s in v["timeline"]))
        for i, name in enumerate(streams):
            cells = [(" ", "")] * bar_w
            for s in v["timeline"]:
                if s["stream"] != name:
                    continue
                a = int(s["start_ms"] / t_end * bar_w)
                b = max(a + 1, int(math.ceil(s["end_ms"] / t_end * bar_w)))
                for c in range(a, min(b, bar_w)):
                    cells[c] = SPAN_STYLE.get(s["op"], ("?", ""))
            label = f"{mode if i == 0 else '':<8}{name:<10}"
            t = Text(f"{label[:label_w]:<{label_w}}│", style="dim")
            for ch, style in cells:
                t.append(ch, style=style)
            t.append("│", style="dim")
            if i == 0:
                t.append(f" {v['total_ms']:.1f} ms")
            lines.append(t)
    return lines[:height]


def transfer_view(doc: dict, width: int, height: int) -> list[Text]:
    pts = [q for q in _points(doc) if q.get("gb_per_s") and q.get("bytes")]
    results_ = doc.get("results") or {}
    link = ((doc.get("device") or {}).get("peaks") or {}).get("pcie_bytes_per_s_per_dir")
    timeline = streams_timeline(results_, width, max(0, min(9, height - 8)))
    series = [(label, style, marker, [(float(q["bytes"]), q["gb_per_s"] * 1e9) for q in pts if q.get("kind") == label])
              for label, style, marker in BW_CURVES]
    series = [s for s in series if s[3]]
    if not series and not timeline:
        return [Text("no results yet", style="dim")]
    head = Text.assemble(("copy bandwidth (B/s) vs size (bytes)", "bold"))
    if link:
        head.append(f"  ╌ PCIe link {si(link, 'B/s')} per direction", style="dim")
    legend = _legend(series)
    if not any(q.get("kind", "").startswith(("h2d", "d2h")) for q in pts):
        legend.append("(no GPU: host memcpy only)", style="dim")
    plot_h = max(0, height - len(timeline) - 2)
    body = loglog_plot(width, plot_h, series, [("link", link, "dim")] if link else []) if plot_h >= 4 else []
    return ([head] + body + [legend] + timeline)[:height]


VIEWS = {"offload": offload_view, "fusion": fusion_view, "transfer": transfer_view}
