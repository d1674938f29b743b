"""The GPU strip: one line per GPU with its own verdict, and the selected GPU's NVLink traffic.

A job on several GPUs (``--run -- torchrun ...``, the ``allreduce`` workload) is diagnosed GPU by GPU: the
monitor page keeps a live verdict per GPU (the selected one's is the panel's) and looks at the comms-bound ones
together (:func:`gputop.analysis.comms.group_comms`: a collective is as fast as its slowest link); the strip
shows them. It shows itself only where there is something to show: several GPUs, or NVLink traffic.
"""

from __future__ import annotations

from rich.text import Text

from gputop.analysis.verdict import Verdict, display_name
from gputop.format import si
from gputop.tui.widgets.lines import Lines


def nvlink_line(sample: dict | None, peaks: dict | None) -> Text | None:
    """'NVLink rx 300 GB/s  tx 298 GB/s  (63% of 478 GB/s)' for one GPU; None without NVLink counters, or
    with counters at zero on a GPU whose NVLinks NVML did not report (a lone GPU: nothing to say)."""
    s = sample or {}
    rx, tx = s.get("nvlink_rx_bps"), s.get("nvlink_tx_bps")
    peak = (peaks or {}).get("nvlink_bytes_per_s_per_dir")
    if (rx is None and tx is None) or (not peak and not (rx or tx)):
        return None
    text = Text("NVLink ", style="bold")
    text.append(f"rx {si(rx, 'B/s')}  tx {si(tx, 'B/s')}")
    if peak:
        text.append(f"  ({100 * max(rx or 0, tx or 0) / peak:.0f}% of {si(peak, 'B/s')})", style="dim")
    return text


def strip_line(pos: int, static: dict, verdict: Verdict | None, selected: bool) -> Text:
    """'▶ GPU 1 H200  communication-bound 63%' (the verdict's name and confidence, n/a without one)."""
    name = (static.get("name") or "").replace("NVIDIA ", "")
    text = Text("▶ " if selected else "  ", style="bold")
    text.append(f"GPU {static.get('index', pos)} {name}  ", style="bold" if selected else "")
    if verdict is None:
        text.append("n/a", style="dim")
    else:
        text.append(display_name(verdict), style="bold yellow" if verdict.cls == "comms-bound" else "")
        if verdict.confidence is not None:
            text.append(f" {100 * verdict.confidence:.0f}%", style="dim")
    return text


class GpuStrip(Lines):
    """Every GPU's verdict (the monitor page's live verdicts, the same the panel shows for the selected GPU),
    and the selected GPU's NVLink line."""

    DEFAULT_CSS = "GpuStrip { height: auto; max-height: 8; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.display = False  # until there are several GPUs or NVLink traffic

    def show(self, statics: list[dict], peaks: list[dict], samples: list[dict | None], selected: int,
             verdicts: list[Verdict | None]) -> None:
        link = nvlink_line(samples[selected] if selected < len(samples) else None,
                           peaks[selected] if selected < len(peaks) else None)
        want = len(statics) > 1 or link is not None
        if self.display != want:
            self.display = want
        if not want:
            return
        lines = [strip_line(i, st, verdicts[i] if i < len(verdicts) else None, i == selected)
                 for i, st in enumerate(statics)] if len(statics) > 1 else []
        if link is not None:
            lines.append(link)
        self.set_lines(lines)
