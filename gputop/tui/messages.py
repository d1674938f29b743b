"""The Textual messages of the TUI: what crosses threads (the sampler's, a run's worker, the terminal's
reader) or goes from a page up to the app. Changes of the shared state are not messages: the model
(gputop/tui/model) announces them to its observers at once, on the app's thread."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


class Redraw(Message):
    """Draw a frame now: the first tick came (the sampler's thread), a worker finished, or what a page shows
    changed without the model changing (the focus moved to another parameter). A burst is one frame."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Redraw)


@dataclass
class Noted(Message):
    """A notification, for the key bar (from any thread: ``GputopApp.notify``)."""

    text: str
    severity: str


@dataclass
class ShowPage(Message):
    """Show the page ``name`` ("monitor", "workloads"): a page or the tour asks the app."""

    name: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ShowPage)


@dataclass
class TerminalLost(Message):
    """The terminal (or the browser) is gone: stop as on SIGHUP (posted once, from any thread: tui/terminal.py)."""

    reason: str
