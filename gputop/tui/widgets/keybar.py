"""The bottom bar: the keys of the page shown, fitted to the width, the latest notification, and the
tour's line (gputop --tour).

Textual's toasts draw over whatever is at the bottom right (at 80x24: the verdict, the charts); here a
notification takes the bar's own rows instead, wrapped (never cut), above the keys, for ``SHOW_S``
seconds (it is also kept in the app's notification list). The keys are listed most useful first; those that do not fit the width are left out and the
bar ends with ``? more keys`` (the help lists them all).
"""

from __future__ import annotations

import time

from rich.text import Text

from gputop.tui.widgets.lines import Lines

SHOW_S = 6.0  # how long a notification stays
MORE = ("?", "more keys")
SEVERITY_STYLE = {"information": "bold green", "warning": "bold yellow", "error": "bold red"}

# (key, what it does, pages it applies to) in the order they are kept when the width runs out
KEYS = [
    ("q", "quit", "*"), ("?", "help", "*"), ("1/2", "pages", "*"), ("r", "run", "*"), ("c", "cancel", "*"),
    ("n", "next stop", "tour"), ("p", "pause", "monitor"), ("g", "GPU", "gpus"), ("+/-", "rate", "monitor"),
    ("d", "cpu/gpu", "workloads"), ("[ ]", "runs", "workloads"), ("s", "save", "*"),
]


def key_line(items: list[tuple[str, str]], width: int) -> Text:
    """``items`` as ``key label`` pairs, in order; if they do not all fit ``width``, the first ones that
    fit followed by ``? more keys`` (the help lists every key)."""
    shown = list(items)
    if len(_plain(shown)) > width:
        shown = [i for i in shown if i[0] != "?"]
        while shown and len(_plain(shown + [MORE])) > width:
            shown.pop()
        shown.append(MORE)
    t = Text()
    for k, label in shown:
        if t.plain:
            t.append("  ")
        t.append(k, style="bold reverse")
        t.append(" " + label)
    return t


def _plain(items: list[tuple[str, str]]) -> str:
    return "  ".join(f"{k} {label}" for k, label in items)


class KeyBar(Lines):
    """Docked at the bottom: the latest notification (for a while), then one line of keys."""

    DEFAULT_CSS = "KeyBar { dock: bottom; height: auto; background: $panel; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.items: list[tuple[str, str]] = []
        self.note: tuple[str, str, float] | None = None  # (message, severity, monotonic time shown)
        self.banner = ""  # a line that stays (gputop --tour: the stop, and what to look at)

    def keys_for(self, page: str, gpus: int, touring: bool) -> list[tuple[str, str]]:
        tags = {"*", page} | ({"gpus"} if gpus > 1 else set()) | ({"tour"} if touring else set())
        return [(k, label) for k, label, where in KEYS if where in tags]

    def show_keys(self, items: list[tuple[str, str]], banner: str = "") -> None:
        """The keys, and ``banner`` above them (gputop --tour's line; "": none)."""
        if (items, banner) != (self.items, self.banner):
            self.items, self.banner = items, banner
            self.rebuild()

    def message(self, text: str, severity: str = "information") -> None:
        self.note = (text, severity, time.monotonic())
        self.rebuild()

    def expire(self) -> None:
        """Drop a notification older than SHOW_S (called every frame)."""
        if self.note is not None and time.monotonic() - self.note[2] > SHOW_S:
            self.note = None
            self.rebuild()

    def rebuild(self) -> None:
        width = self.wh[0] or 80
        lines: list = []
        if self.banner:
            lines += list(Text(self.banner, style="bold cyan").wrap(self.app.console, width, overflow="fold"))
        if self.note is not None:
            msg, severity, _ = self.note
            t = Text(msg, style=SEVERITY_STYLE.get(severity, "bold"))
            lines += list(t.wrap(self.app.console, width, overflow="fold"))
        lines.append(key_line(self.items, width))
        self.set_lines(lines)
