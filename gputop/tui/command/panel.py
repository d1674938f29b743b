"""``gputop --tui --run`` / ``--watch``'s panel on top of the pages: one status line (command, pid, running or
exited with its code, elapsed), where its output goes, and the verdict timeline so far (the latest segments), or
the final one once the command has ended."""

from __future__ import annotations

import os
import shlex
import time
from typing import Callable, Iterable

from rich.text import Text

from gputop import exitcodes
from gputop.analysis.rank_stacks import culprit_place
from gputop.analysis.timeline import format_timeline
from gputop.analysis.verdict import display_name
from gputop.format import count
from gputop.session.command import Session
from gputop.tui.widgets.lines import Lines

ROWS, ROWS_SHORT = 6, 2  # timeline segments shown (the latest)


def status_lines(s: Session, culprit: str | None = None, short: bool = False) -> list[Text]:
    """One line (running / exited with its code, elapsed, pid, the command), then who holds the command's job up
    while its ranks' stacks name a culprit (``culprit``: :func:`job_culprit`; at 80x24 in place of where output goes,
    since the verdict that also says it is below the screen's edge there), then where output goes."""
    doc = s.doc
    elapsed = doc["wall_s"] if doc else time.monotonic() - s.t_start
    t = Text()
    t.append("■ " if s.over else "▶ ", style="bold red" if s.over else "bold green")
    t.append(_state(s), style="bold")
    t.append(f"  {elapsed:.0f} s" if not s.over else f" after {elapsed:.1f} s")
    if s.mode == "run":
        t.append(f"  pid {s.pid}  ")
        # the program by its name: an absolute path (an interpreter's in a venv) would push the command's words off
        t.append(f"`{one_line(shlex.join([os.path.basename(s.command[0]), *s.command[1:]]))}`", style="bold")
    else:
        t.append(f"  watching pid {s.pid} ({_name(s)})", style="bold")
    lines = [t]
    if culprit and not s.over:
        lines.append(Text.assemble(("culprit: ", "bold red"), culprit, (" · k: every rank's stack", "dim")))
        if short:
            return lines
    more = Text(style="dim")
    if s.log:
        more.append(f"output: {s.log}  ")
    if s.over:
        more.append("sampling stopped; q quits")
    return lines + [more] if more.plain else lines


def job_culprit(verdicts, ours: Callable[[], Iterable[int]]) -> str | None:
    """Who holds up the command's job, where a GPU's live verdict carries its ranks' stacks' culprit
    (gputop/analysis/collectives.py keeps the record in the verdict's job) and those ranks are among ``ours()`` (the
    command's processes, asked only then: this runs every frame; a stalled neighbour's culprit is not the
    command's): 'rank 1 (pid N, GPU 1): in f at job.py:89 (`code`)'; None where no stack named one."""
    pids = None
    for v in verdicts:
        record = (getattr(v, "job", None) or {}).get("culprit") or {}
        if not record:
            continue
        pids = set(ours()) if pids is None else pids
        if pids & {r.get("pid") for r in record.get("ranks") or []}:
            said = culprit_place(record)
            if said:
                return said
    return None


def one_line(text: str) -> str:
    """``text`` on one row: a newline in a command (``python -c "..."``) drawn as ``\\n``, not sent to the terminal
    (where it would break the row and push the screen down)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _state(s: Session) -> str:
    if not s.over:
        return "stopping (SIGINT sent)" if s.stopping else "running"
    if s.mode == "watch":
        if s.ended == "seconds":
            return f"watched for --seconds {s.seconds:g}"
        return "stopped watching" if s.ended == "interrupted" else (s.ended or "exited")
    code = exitcodes.shell_code(s.child.returncode)
    if s.child.timed_out:
        return f"stopped at --timeout (code {code})"
    if s.stopping:
        return f"stopped by {'q' if s.signum is None else exitcodes.signal_name(s.signum)} (code {code})"
    return f"exited with code {code}"


def _name(s: Session) -> str:
    try:
        return s.proc.name()
    except Exception:
        return "?"


def timeline_lines(analysis: dict | None, gpu_index: int | None, rows: int, final: bool) -> list[Text]:
    """The timeline of GPU ``gpu_index`` (else the first GPU the command used) from an analysis/document."""
    if not analysis or not analysis.get("gpus"):
        return [Text("timeline: waiting for samples...", style="dim")]
    gpus = analysis["gpus"]
    g = next((g for g in gpus if g["index"] == gpu_index), gpus[0])
    how = analysis.get("gpu_detection")
    where = (f"found by {how} at {g['first_seen_s']:.1f} s" if g.get("used")
             else "not seen on a GPU yet" if not final else "not used by the command")
    head = Text(f"{'final ' if final else ''}timeline, GPU {g['index']} ({where})", style="bold")
    segs = g.get("timeline") or []
    out = [head]
    if len(segs) > rows:
        out.append(Text(f"  ... {count(len(segs) - rows, 'earlier segment')}", style="dim"))
    out += [Text(ln) for ln in format_timeline(segs[-rows:])]
    v = analysis.get("verdict")
    if final and v:
        out.append(Text(f"verdict: {display_name(v)}: {v['evidence_text']}",
                        style="bold yellow" if v["class"] != "idle" else "bold"))
    return out


class CommandPanel(Lines):
    """The status line, then the verdict timeline so far (the latest segments)."""

    DEFAULT_CSS = "CommandPanel { height: auto; padding: 0 1; }"

    def show(self, s: Session, analysis: dict | None, gpu_index: int | None, short: bool,
             culprit: str | None = None) -> None:
        """``analysis``: the timeline so far (the document's once the command has ended); ``gpu_index``: the GPU
        whose timeline to show (the selected one); ``short``: 80x24, fewer segments; ``culprit``: who holds the
        job up (:func:`job_culprit`)."""
        rows = ROWS_SHORT if short else ROWS
        self.set_lines(status_lines(s, culprit, short)
                       + timeline_lines(s.doc or analysis, gpu_index, rows, s.doc is not None))
