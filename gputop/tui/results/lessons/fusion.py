"""The fusion lesson's view: bars per function and variant at the largest size: time, kernels per call,
bandwidth against the DRAM roof, speed-up over eager.

Pure (Rich ``Text`` only), like :mod:`gputop.tui.results.view`, which hands the fusion run's document here.
"""

from __future__ import annotations

from rich.text import Text

from gputop.format import si
from gputop.tui.results.lessons.plot import points
from gputop.tui.widgets import charts

def view(doc: dict, width: int, height: int) -> list[Text]:
    pts = points(doc)
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
