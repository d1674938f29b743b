"""The GPU strip: each GPU with its own verdict, and the selected GPU's NVLink traffic. One line per GPU, up to
8 (80x24: 4) lines; more GPUs go in columns, each verdict in a shorter name where a column is narrow (8 GPUs at 80
columns: 'comms-bound (straggler) 87%'), so that every GPU's verdict and the selected GPU's panel share the screen.

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


def strip_labels(verdict: Verdict) -> list[str]:
    """The verdict's names, longest first: 'communication-bound (waiting for a straggler)', 'comms-bound (straggler)',
    'comms-bound' (the short ones where a GPU's cell is narrow: 8 GPUs at 80 columns)."""
    names = [display_name(verdict), f"{verdict.cls} ({verdict.subclass})" if verdict.subclass else verdict.cls,
             verdict.cls]
    return list(dict.fromkeys(names))


def strip_line(pos: int, static: dict, verdict: Verdict | None, selected: bool, width: int = 0,
               with_name: bool = True) -> Text:
    """'▶ GPU 1 H200  communication-bound 63%' (the verdict's name and confidence, n/a without one), in ``width``
    columns (0: any): where it does not fit, without the GPU's name (the header and the summary give it), then
    with the verdict's shorter names, at last cut with '…'. ``with_name`` False: never the GPU's name."""
    name = (static.get("name") or "").replace("NVIDIA ", "")
    conf = ""
    labels: list[str | None] = [None]
    if verdict is not None:
        conf = f" {100 * verdict.confidence:.0f}%" if verdict.confidence is not None else ""
        labels = strip_labels(verdict)
    tries = ([(name, labels[0])] if with_name else []) + [("", label) for label in labels]

    def line(gpu_name: str, label: str | None) -> Text:
        text = Text("▶ " if selected else "  ", style="bold")
        text.append(f"GPU {static.get('index', pos)}{' ' + gpu_name if gpu_name else ''}  ",
                    style="bold" if selected else "")
        if label is None:
            text.append("n/a", style="dim")
        else:
            text.append(label, style="bold yellow" if verdict.cls == "comms-bound" else "")
            text.append(conf, style="dim")
        return text

    text = next((t for t in (line(*c) for c in tries) if not width or len(t) <= width), None)
    if text is None:
        text = line(*tries[-1])
        text.truncate(width - 1)
        text.append("…")
    return text


def strip_rows(cells: list[Text], rows: int, width: int) -> list[Text]:
    """The GPUs' cells in columns of ``rows`` cells (GPU order down each column), each column ``width //
    columns`` wide; one column where they fit in ``rows``."""
    cols = max(1, -(-len(cells) // max(1, rows)))
    if cols == 1:
        return cells
    rows = -(-len(cells) // cols)
    col_w = width // cols
    out = []
    for r in range(rows):
        line = Text()
        for c in range(cols):
            i = c * rows + r
            if i < len(cells):
                line.append_text(cells[i])
                if c < cols - 1:
                    line.append(" " * max(1, col_w - len(cells[i])))
        out.append(line)
    return out


class GpuStrip(Lines):
    """Every GPU's verdict (the monitor page's live verdicts, the same the panel shows for the selected GPU),
    and the selected GPU's NVLink line."""

    DEFAULT_CSS = "GpuStrip { height: auto; }"
    ROWS = 8  # rows of GPUs at most: more GPUs go in columns
    SHORT_ROWS = 4  # at 80x24 (the app's -short): 8 GPUs in two columns, so the selected GPU's panel keeps its rows

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.display = False  # until there are several GPUs or NVLink traffic
        self.shown: tuple | None = None  # show()'s arguments, to lay out again at another width

    def show(self, statics: list[dict], peaks: list[dict], samples: list[dict | None], selected: int,
             verdicts: list[Verdict | None]) -> None:
        link = nvlink_line(samples[selected] if selected < len(samples) else None,
                           peaks[selected] if selected < len(peaks) else None)
        want = len(statics) > 1 or link is not None
        if self.display != want:
            self.display = want
        if not want:
            return
        self.shown = (statics, selected, verdicts, link)
        self.rebuild()

    def rebuild(self) -> None:
        if self.shown is None:
            return
        statics, selected, verdicts, link = self.shown
        lines = []
        if len(statics) > 1:
            width = self.wh[0] or 80
            rows = self.SHORT_ROWS if self.app.has_class("-short") else self.ROWS
            cols = -(-len(statics) // rows)
            cell_w = width if cols == 1 else width // cols - 1
            cells = [strip_line(i, st, verdicts[i] if i < len(verdicts) else None, i == selected)
                     for i, st in enumerate(statics)]
            named = all(len(c) <= cell_w for c in cells)  # every GPU's name, or none (one column lines up)
            if not named:
                cells = [strip_line(i, st, verdicts[i] if i < len(verdicts) else None, i == selected, cell_w, False)
                         for i, st in enumerate(statics)]
            lines = strip_rows(cells, rows, width)
        if link is not None:
            lines.append(link)
        self.set_lines(lines)
