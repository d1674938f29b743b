"""The rows above every page: the header line (``InfoBar``: host, GPUs, driver, CUDA, rate, mode, the page shown)
and, with several GPUs, the GPU summary (``GpuSummary``: one line of numbers per GPU). What they show is computed in
``gputop.tui.model.view`` (pure functions)."""

from __future__ import annotations

from rich.text import Text

from gputop.tui.model import view
from gputop.tui.widgets.lines import Lines


class InfoBar(Lines):
    """The header line: host, GPU names, driver, CUDA, rate, mode."""

    DEFAULT_CSS = "InfoBar { height: 1; background: $primary-background; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parts: list[str] = []
        self.page = ""

    def show(self, parts: list[str], page: str) -> None:
        if (parts, page) != (self.parts, self.page):
            self.parts, self.page = parts, page
            self.rebuild()

    def rebuild(self) -> None:
        width = self.wh[0] or 80
        tail = f"  [{self.page}]"
        t = Text.assemble((" gputop ", "bold reverse"))
        budget = max(10, width - 9 - len(tail))
        body = view.fit_parts(self.parts, budget)
        if len(body) > budget:  # 80 columns: the page's number alone ("[1]")
            tail = f"  [{self.page.split()[0]}]"
            budget = max(10, width - 9 - len(tail))
            body = view.fit_parts(self.parts, budget)
        t.append(" " + (body if len(body) <= budget else body[:budget - 1] + "…"))
        t.append(tail, style="bold")
        self.set_lines([t])


class GpuSummary(Lines):
    """On top, with several GPUs: one line of numbers per GPU; the selected one is marked. (The monitor page's
    GpuStrip, gputop/tui/monitor/strip.py, gives each GPU's verdict.) At 80x24 (the app's -short) with more GPUs
    than SHORT_ALL, the selected GPU's line alone: the strip lists every GPU, and the panel needs the rows."""

    DEFAULT_CSS = "GpuSummary { height: auto; max-height: 8; }"
    SHORT_ALL = 2

    def show(self, statics: list[dict], samples: list[dict | None], selected: int) -> None:
        """Each frame; shown with several GPUs only."""
        if self.display != (len(statics) > 1):
            self.display = len(statics) > 1
        if not self.display:
            return
        lines = []
        only = selected if self.app.has_class("-short") and len(statics) > self.SHORT_ALL else None
        for i, (st, s) in enumerate(zip(statics, samples)):
            if only is not None and i != only:
                continue
            mark = "▶" if i == selected else " "
            lines.append(Text(f"{mark} {view.summary_line(st, s)}", style="bold reverse" if i == selected else ""))
        self.set_lines(lines)
