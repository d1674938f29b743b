"""The stack view (``k``): every rank's Python stack on the GPUs shown, grouped by where it is (in which collective,
or where outside any), the culprit of a stall first, "stack unknown: why" where a stack could not be read.

The model reads them (gputop/tui/model: its stack reader, py-spy from outside the processes on the sampler's side,
or a replay's recorded reads); the view asks for a read when it opens, whether or not a GPU is stalled, and shows
the latest read as it comes, again twice a second. It scrolls; Escape, q or k closes it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.tui.model import TuiModel

REFRESH_S = 0.5


class StacksScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,k", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    StacksScreen { align: center middle; }
    StacksScreen > VerticalScroll { width: 100%; height: auto; max-height: 100%;
                                    border: round $primary; background: $surface; scrollbar-size-vertical: 1; }
    StacksScreen Static { width: 100%; height: auto; padding: 0 1; }
    """

    def __init__(self, model: TuiModel):
        super().__init__()
        self.model = model
        self.said = model.ask_stacks()  # a read now, whether or not a GPU is stalled
        self.body = Static(self.text(), markup=False)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stacks"):
            yield self.body

    def on_mount(self) -> None:
        self.query_one("#stacks").focus()
        self.set_interval(REFRESH_S, self.refresh_view)

    def text(self) -> str:
        lines = self.model.stack_view()
        busy = self.model.stacks is not None and self.model.stacks.busy()
        head = "the ranks' stacks (k, Escape or q closes)"
        if not lines:
            return "\n".join([head, "", "reading the stacks..." if busy else (self.said or "no stack read yet")])
        return "\n".join([head + (": reading again..." if busy else ""), ""] + lines)

    def refresh_view(self) -> None:
        self.body.update(self.text())
