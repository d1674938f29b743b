"""The cluster page: ``gputop --source prometheus=URL``, a small App of its own (the GPU monitor's app is not
involved). One row per GPU, grouped by job or by node, the most wasted GPU-time first; the job accounting over
``--range`` below; Enter opens a GPU's detail (``detail.py``). The reads run on ``model.Refresher``'s thread; a
failed read keeps the rows on screen, marked "stale N s: why", and the next good read clears it.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding

from gputop import exitcodes
from gputop.runner.stop_signals import STOP_SIGNALS
from gputop.tui.cluster import view as V
from gputop.tui.cluster.detail import DetailScreen
from gputop.tui.cluster.help import ClusterHelp
from gputop.tui.crash import LoggedApp
from gputop.tui.cluster.model import ACCOUNT_S, REFRESH_S, ClusterState, Refresher
from gputop.tui.widgets.keybar import KeyBar
from gputop.tui.widgets.lines import Lines

KEYS = [("q", "quit"), ("?", "help"), ("Enter", "GPU"), ("j", "job"), ("n", "node"), ("c", "class"), ("g", "group"),
        ("x", "all"), ("r", "read now")]


class Drawn(Lines):
    """Lines built for the current width by ``build(width)`` (on a resize too)."""

    def __init__(self, build: Callable[[int], list], **kwargs):
        super().__init__(**kwargs)
        self.build = build

    def rebuild(self) -> None:
        if self.wh[0]:
            self.set_lines(self.build(self.wh[0]))


class ClusterTable(Lines):
    """The GPUs under their groups' headings, a column header on top, the cursor on a GPU (kept on the same GPU
    across refreshes: ``state.selected``), scrolled to keep it in view."""

    DEFAULT_CSS = "ClusterTable { height: 1fr; }"

    def __init__(self, state: ClusterState, **kwargs):
        super().__init__(**kwargs)
        self.state = state
        self.entries: list[V.Entry] = []
        self.top = 0

    def refill(self) -> None:
        self.entries = V.entries(self.state)
        at = self.cursor()
        self.state.selected = None if at is None else self.key(self.entries[at])
        self.rebuild()

    @staticmethod
    def key(e: V.Entry) -> tuple | None:
        """(group, node, gpu): a GPU under two jobs' headings is two places for the cursor."""
        return None if e.gpu is None else (e.group, e.gpu.node, e.gpu.gpu)

    def cursor(self) -> int | None:
        """The entry under the cursor: the selected GPU in its group, else in another (the grouping changed), else
        the first GPU."""
        sel, gpus = self.state.selected, [i for i, e in enumerate(self.entries) if e.gpu is not None]
        if sel is not None:
            for same in (lambda k: k == sel, lambda k: k[1:] == sel[1:]):
                at = next((i for i in gpus if same(self.key(self.entries[i]))), None)
                if at is not None:
                    return at
        return gpus[0] if gpus else None

    def move(self, delta: int) -> None:
        """The cursor ``delta`` GPUs down (up: negative), kept within the table."""
        gpus = [i for i, e in enumerate(self.entries) if e.gpu is not None]
        if not gpus:
            return
        at = self.cursor()
        pos = gpus.index(at) if at in gpus else 0
        self.state.selected = self.key(self.entries[gpus[max(0, min(len(gpus) - 1, pos + delta))]])
        self.rebuild()

    def selected_gpu(self):
        at = self.cursor()
        return None if at is None else self.entries[at].gpu

    def rebuild(self) -> None:
        w, h = self.wh
        if not w or not h:
            return
        columns = V.fit_columns(w, self.state.group)
        body = max(1, h - 1)
        at = self.cursor()
        if at is not None:
            if at < self.top + 1:  # its heading in view too, where there is one just above
                self.top = max(0, at - 1)
            elif at >= self.top + body:
                self.top = at - body + 1
        self.top = max(0, min(self.top, len(self.entries) - body))
        lines: list = [V.header_row(columns)]
        for i, e in enumerate(self.entries[self.top:self.top + body], self.top):
            if e.gpu is None:
                lines.append((V.fit_heading(e.heading, w), "bold cyan"))
            else:
                lines.append(V.gpu_row(e.gpu, columns, selected=i == at))
        if not self.entries:
            lines.append(("  no GPU matches the filters (x: all)" if self.state.rows else "  reading…", "dim"))
        self.set_lines(lines)


class ClusterApp(LoggedApp):
    """The cluster page (see the module's text). ``reader``: ``fleet/reader.ClusterReader`` (or what answers as
    one); ``read_gpu(node, gpu)``: a GPU's history for the detail; ``refresh_s`` / ``account_s``: the cadences
    (0: no thread; the tests hand it data with ``took``)."""

    TITLE = "gputop cluster"
    CSS = "Screen { layout: vertical; } #head { height: auto; } #accounting { height: auto; }"
    BINDINGS = [
        Binding("q", "quit_page", "quit"), Binding("ctrl+c", "quit_page", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"), Binding("enter", "open", "GPU"),
        Binding("up", "move(-1)", show=False), Binding("down", "move(1)", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "move(-1000000)", show=False), Binding("end", "move(1000000)", show=False),
        Binding("j", "filter('job', 1)", "job"), Binding("J", "filter('job', -1)", show=False),
        Binding("n", "filter('node', 1)", "node"), Binding("N", "filter('node', -1)", show=False),
        Binding("c", "filter('class', 1)", "class"), Binding("C", "filter('class', -1)", show=False),
        Binding("g", "group", "group"), Binding("x", "clear", "all"), Binding("r", "read_now", "read now"),
    ]

    def __init__(self, state: ClusterState, reader, read_gpu: Callable | None = None, refresh_s: float = REFRESH_S,
                 account_s: float = ACCOUNT_S, first_wait: float | None = None):
        super().__init__()
        self.state, self.reader, self.read_gpu = state, reader, read_gpu
        self.refresher = Refresher(reader, state.range_s, self.deliver, refresh_s, account_s) if refresh_s else None
        self.first_wait = refresh_s if first_wait is None else first_wait  # the rows at start-up were just read
        self.stop_signal: int | None = None

    def compose(self) -> ComposeResult:
        yield Drawn(lambda w: V.head_lines(self.state, w), id="head")
        yield ClusterTable(self.state, id="table")
        yield Drawn(lambda w: V.accounting_lines(self.state, w, max(3, (self.size.height - 6) // 3)),
                    id="accounting")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.query_one(KeyBar).show_keys(KEYS)
        self.draw()
        self.set_interval(1.0, self.draw_age)
        if self.refresher is not None:
            self.refresher.start(self.first_wait)
        if not self.is_headless:
            loop = asyncio.get_running_loop()
            for sig in STOP_SIGNALS:
                loop.add_signal_handler(sig, self.stop_for_signal, sig)

    def on_unmount(self) -> None:
        if self.refresher is not None:
            self.refresher.stop()

    # -- the reads -------------------------------------------------------------------------------------------------
    def deliver(self, kind: str, payload) -> None:
        """From the refresher's thread: hand the result to the app's."""
        try:
            self.call_from_thread(self.took, kind, payload)
        except RuntimeError:  # the app has ended meanwhile
            pass

    def took(self, kind: str, payload) -> None:
        if kind == "rows":
            self.state.took_rows(*payload)
        elif kind == "accounting":
            self.state.took_accounting(*payload)
        else:
            self.state.failed(payload)
        self.draw()

    def draw(self) -> None:
        self.query_one("#head", Drawn).rebuild()
        self.query_one(ClusterTable).refill()
        self.query_one("#accounting", Drawn).rebuild()

    def draw_age(self) -> None:
        if self.state.error is not None:
            self.query_one("#head", Drawn).rebuild()

    # -- keys ------------------------------------------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        self.query_one(ClusterTable).move(delta)

    def action_page(self, sign: int) -> None:
        table = self.query_one(ClusterTable)
        table.move(sign * max(1, table.wh[1] - 2))

    def action_filter(self, kind: str, step: int) -> None:
        value = self.state.cycle(kind, step)
        self.draw()
        self.query_one(KeyBar).message(f"{kind}: {value or 'all'}")

    def action_group(self) -> None:
        self.state.next_group()
        self.draw()

    def action_clear(self) -> None:
        self.state.clear_filters()
        self.draw()

    def action_read_now(self) -> None:
        if self.refresher is not None:
            self.refresher.wake()

    def action_open(self) -> None:
        gpu = self.query_one(ClusterTable).selected_gpu()
        if gpu is not None and self.read_gpu is not None:
            self.push_screen(DetailScreen(gpu, self.read_gpu))

    def action_help(self) -> None:
        self.push_screen(ClusterHelp())

    def action_quit_page(self) -> None:
        self.exit(self.exit_code())

    def stop_for_signal(self, signum: int) -> None:
        self.stop_signal = self.stop_signal or signum
        self.exit(self.exit_code())

    def exit_code(self) -> int:
        return exitcodes.for_signal(self.stop_signal) if self.stop_signal is not None else exitcodes.OK

