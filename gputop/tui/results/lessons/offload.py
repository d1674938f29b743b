"""The offload lesson's view: a log-log plot per op of time against size: CPU, GPU with copies, GPU alone,
and the naive (unsynchronised) GPU timing, flat because it times only the launch; the crossovers in a legend.

Pure (Rich ``Text`` only), like :mod:`gputop.tui.results.view`, which hands the offload run's document here.
"""

from __future__ import annotations

from rich.text import Text

from gputop.lessons.offload import crossover
from gputop.tui.results.lessons.plot import Series, legend, loglog_plot, points

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


def view(doc: dict, width: int, height: int) -> list[Text]:
    pts = [q for q in points(doc) if q.get("op") and q.get("cpu_ms") is not None]
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
    legend_line = legend(series)
    if any(s[0].startswith("GPU naive") for s in series):
        legend_line.append("naive = no synchronize: times the launch only, flat at every size", style="dim")
    return body[:max(0, room)] + [legend_line] + ([fresh] if fresh else [])
