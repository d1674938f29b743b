"""The attribution view of ``gputop --tui --run --profile -- CMD`` (issue 27): the latest profiler window.

``a`` shows it in the monitor page's place (and back), ``w`` asks the command for a window now
(:meth:`gputop.session.profiling.ProfileWindows.ask_now`). The window is
:meth:`~gputop.session.profiling.ProfileWindows.latest` (analysed by gputop/analysis/attribution.py and
gputop/analysis/idle.py), drawn top down in what the terminal leaves it:

1. which window (its number, pid, length, age, why it was asked for);
2. GPU busy vs idle share of the window, and the idle time by HTA's reasons (host wait / kernel wait / other);
   or why there is none (a window without CUDA kernels);
3. kernel time by category (host op time on a CPU), with kernels per step where steps are seen;
4. the top kernels and the top ops by time (count, mean, total), side by side from ``SIDE_BY_SIDE_W`` columns,
   as many rows as fit;
5. the advice line (the finding's, else where the time went), wrapped, never cut.

The panel follows the command's windows itself (``follow``, each frame): the latest is read at most once a second
on a worker thread, a new one is announced ("a shows it"), and on a job's ranks the selected GPU's own rank's
window is the one shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text

from gputop.analysis.attribution import window_for_gpu
from gputop.analysis.idle import REASONS, idle_line
from gputop.format import count
from gputop.tui.widgets.lines import Lines

SIDE_BY_SIDE_W = 120
TABLE_MAX_W = 100  # a table no wider (its numbers stay near its names)
MIN_TABLE_ROWS = 2
REASON_WORDS = dict(zip(REASONS, ("host wait", "kernel wait", "other")))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:max(0, n - 1)] + "…"


def _ms(us: float) -> str:
    return f"{us / 1000:.1f}"


def head_line(win: dict, now: float) -> Text:
    t = Text()
    t.append(f"profiler window {win['seq']}", style="bold")
    if win.get("status") != "ok":
        t.append(f": none ({win.get('why_none')})", style="yellow")
        return t
    age = max(0.0, now - win["ended_at"]) if win.get("ended_at") else None
    t.append(f"  pid {win.get('pid')}  {win.get('wall_s', 0):.1f} s" + (f", {age:.0f} s ago" if age is not None else ""))
    t.append(f"  ({win.get('asked_because')})", style="dim")
    return t


def busy_lines(win: dict) -> list[Text]:
    if win.get("basis") != "kernels":
        why = (win.get("idle") or {}).get("why_none") or "no CUDA kernels in the window"
        return [Text(f"GPU busy/idle: n/a, host ops only ({why})", style="dim")]
    t = Text()
    t.append("GPU busy ", style="bold")
    t.append(_pct(win.get("gpu_busy_share")), style="bold green")
    t.append("  idle ", style="bold")
    t.append(_pct(win.get("gpu_idle_share")), style="bold yellow")
    split = (win.get("idle") or {}).get("window_shares")
    if split:
        t.append(": " + ", ".join(f"{REASON_WORDS[r]} {_pct(split[r])}" for r in REASONS) + " of the window (HTA)")
    out = [t]
    if not split:
        out.append(Text(idle_line(win.get("idle")), style="dim"))
    return out


def category_line(win: dict) -> Text:
    kernels = win.get("basis") == "kernels"
    t = Text("kernel time: " if kernels else "host op time: ", style="bold")
    shown = [c for c in win.get("categories") or [] if c["share"] >= 0.005]  # those that round to 0% left out
    t.append("  ".join(f"{c['category']} {_pct(c['share'])}" for c in shown) or "none")
    more = []
    if kernels:
        more.append(count(win.get('kernel_count', 0), "kernel"))
        if win.get("kernels_per_step"):
            more.append(f"{win['kernels_per_step']:g} a step")
    elif win.get("ops_per_step"):
        more.append(f"{win['ops_per_step']:g} ops a step")
    if more:
        t.append("  (" + ", ".join(more) + ")", style="dim")
    return t


def _table(title: str, rows: list[dict], time_key: str, width: int, n: int) -> list[str]:
    name_w = max(8, min(width, TABLE_MAX_W) - 28)
    out = [f"{_cut(title, name_w):<{name_w}} {'count':>7} {'mean us':>9} {'tot ms':>8}"]
    for r in rows[:n]:
        mean = "n/a" if r.get("mean_us") is None else f"{r['mean_us']:.1f}"
        name = r["name"][5:] if r["name"].startswith("void ") else r["name"]  # a kernel's C++ return type
        out.append(f"{_cut(name, name_w):<{name_w}} {r['count']:>7} {mean:>9} {_ms(r.get(time_key) or 0):>8}")
    return out


def table_lines(win: dict, width: int, rows: int) -> list[Text]:
    """The top kernels and top ops, ``rows`` rows in all (headers included)."""
    kernels = win.get("basis") == "kernels"
    op_key = "device_us" if kernels else "self_cpu_us"
    op_title = "top ops (GPU time)" if kernels else "top ops (self CPU time)"
    tk, to = win.get("top_kernels") or [], win.get("top_ops") or []
    if width >= SIDE_BY_SIDE_W and tk:
        half = (width - 3) // 2
        n = max(0, rows - 1)
        left = _table("top kernels (GPU time)", tk, "total_us", half, n)
        right = _table(op_title, to, op_key, half, n)
        left += [""] * (len(right) - len(left))
        right += [""] * (len(left) - len(right))
        return [Text(f"{a:<{half}} │ {b}", style="bold" if i == 0 else "") for i, (a, b) in enumerate(zip(left, right))]
    out: list[Text] = []
    if tk:
        n = max(1, (rows - 2) // 2)
        out += [Text(s, style="bold" if i == 0 else "") for i, s in enumerate(_table("top kernels (GPU time)", tk,
                                                                                        "total_us", width, n))]
    n = max(1, rows - len(out) - 1)
    out += [Text(s, style="bold" if i == 0 else "") for i, s in enumerate(_table(op_title, to, op_key, width, n))]
    return out


def advice_lines(win: dict) -> list[Text]:
    f = win.get("finding")
    t = Text("advice: ", style="bold")
    t.append(win.get("headline") or "", style="bold yellow" if f else "")
    return [t]


def _rows(lines: list[Text], width: int) -> int:
    """Rows ``lines`` take once wrapped to ``width``."""
    return sum(max(1, -(-len(t.plain) // max(1, width))) for t in lines)


def attribution_lines(win: dict | None, width: int, height: int, now: float | None = None,
                      seconds: float | None = None) -> list[Text]:
    """The view's lines for ``win`` (None: no window yet) in ``width`` x ``height`` cells (the advice wraps)."""
    now = time.time() if now is None else now
    if win is None:
        return [Text("profiler windows: none yet", style="bold"),
                Text(f"w asks the command for one now ({seconds or 3:g} s of torch.profiler); gputop also asks once "
                     "the live verdict has held a class for a few seconds, and again when it changes", style="dim"),
                Text("a goes back to the monitor", style="dim")]
    top = [head_line(win, now)]
    if win.get("status") != "ok":
        return top + [Text("w asks for another; a goes back to the monitor", style="dim")]
    top += busy_lines(win) + [category_line(win)]
    advice = advice_lines(win)
    rows = max(MIN_TABLE_ROWS, height - _rows(top, width) - _rows(advice, width) - 2)
    return top + [Text("")] + table_lines(win, width, rows) + [Text("")] + advice


class AttributionPanel(Lines):
    """The view: ``show(window, now)`` each frame; lines rebuilt only when the window, its age (whole seconds) or
    the size changed. ``follow`` feeds it a command's windows."""

    DEFAULT_CSS = "AttributionPanel { height: 1fr; padding: 0 1; }"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._key = None
        self._announced: int | None = None  # the seq of the latest window announced
        self._rank_window: tuple = (None, None)  # ((window, pids on the selected GPU), that GPU's rank's window)
        self._read_t = float("-inf")
        self._latest: dict | None = None
        self._reading = False

    def follow(self, session, pids_on_selected: Callable[[], set[int]], now: float) -> None:
        """Each frame of ``gputop --tui --run --profile``: the command's latest window (``latest``); a new one is
        announced while the view is hidden, and the view shows it (a job's ranks: the rank on the selected GPU,
        whose pids ``pids_on_selected`` gives)."""
        win = self.latest(session, now)
        if win is not None and win.get("seq") != self._announced:
            self._announced = win.get("seq")
            if not self.display:
                self.notify(f"profiler window {win['seq']} is in" + ("" if win.get("status") == "ok" else
                            f" empty: {win.get('why_none')}") + ": a shows it")
        if self.display and self.is_mounted:
            if win is not None and win.get("per_process"):  # a job's ranks: the selected GPU's own
                pids = pids_on_selected()
                if self._rank_window[0] != (id(win), frozenset(pids)):
                    self._rank_window = ((id(win), frozenset(pids)), {**win, **(window_for_gpu([win], pids) or {})})
                win = self._rank_window[1]
            self.show(win, seconds=session.profile.seconds if session.profile else None)

    def latest(self, session, now: float) -> dict | None:
        """The latest profiler window, read at most once a second on a thread (a GPU window's answer can be
        megabytes of kernel timeline); once the run is over and none was read, its document's."""
        if session.profile is None:
            return None
        if now - self._read_t >= 1.0 and not self._reading:
            self._read_t, self._reading = now, True
            self.run_worker(lambda: self._read(session), thread=True, group="window")
        return self._latest

    def read_soon(self) -> None:
        """Read the latest window at the next frame (the view was just shown)."""
        self._read_t = float("-inf")

    def _read(self, session) -> None:
        try:
            win = session.profile.latest()
            if win is None and session.doc is not None:
                windows = (session.doc.get("attribution") or {}).get("windows") or []
                win = windows[-1] if windows else None
            self._latest = win
        finally:
            self._reading = False

    def show(self, win: dict | None, now: float | None = None, seconds: float | None = None) -> None:
        now = time.time() if now is None else now
        width, height = self.wh
        width = max(20, (width or 80) - 2)  # the padding
        age = int(now - win["ended_at"]) if win and win.get("ended_at") else None
        key = (id(win), win.get("seq") if win else None, age, width, height)
        if key == self._key:
            return
        self._key = key
        lines = attribution_lines(win, width, height or 20, now, seconds)
        wrapped: list[Text] = []
        for t in lines:
            wrapped += list(t.wrap(self.app.console, width, overflow="fold")) if len(t.plain) > width else [t]
        self.set_lines(wrapped)
