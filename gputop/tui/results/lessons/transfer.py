"""The transfer lesson's view: a log-log plot of copy bandwidth against size (pageable, pinned, host memcpy)
under the PCIe link's peak, and a timeline of the upload / compute / download spans on one and three streams.

Pure (Rich ``Text`` only), like :mod:`gputop.tui.results.view`, which hands the transfer run's document here.
"""

from __future__ import annotations

import math

from rich.text import Text

from gputop.format import si
from gputop.tui.results.lessons.plot import legend, loglog_plot, points

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


def view(doc: dict, width: int, height: int) -> list[Text]:
    pts = [q for q in points(doc) if q.get("gb_per_s") and q.get("bytes")]
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
    legend_line = legend(series)
    if not any(q.get("kind", "").startswith(("h2d", "d2h")) for q in pts):
        legend_line.append("(no GPU: host memcpy only)", style="dim")
    plot_h = max(0, height - len(timeline) - 2)
    body = loglog_plot(width, plot_h, series, [("link", link, "dim")] if link else []) if plot_h >= 4 else []
    return ([head] + body + [legend_line] + timeline)[:height]
