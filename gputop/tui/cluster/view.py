"""The cluster page as text (pure: no Textual): the head, the table's columns fitted to the width, its rows grouped
by job or by node, and the job accounting. Rows are ``(text, style, span...)`` tuples (``widgets/lines.Lines``).

Columns drop by priority where the width runs out (at 80 columns: the model, who judged, the memory, ...); the
column the page is grouped by comes last, its group's heading names it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from gputop.analysis import cluster as C
from gputop.analysis.cluster_text import class_text, duration_text, job_line, job_parts
from gputop.format import NA, count, gb, pct
from gputop.tui.cluster.model import ClusterState

INDENT = "  "  # a GPU's row under its group's heading
WRAP_INDENT = "    "  # a job's accounting line wrapped: its next rows
CLASS_STYLE = {True: "yellow", False: "green", None: "dim"}  # waiting, working, no verdict


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    priority: int  # lower: kept longer
    right: bool = False


COLUMNS = (  # in the order shown
    Column("node", "node", 16, 0), Column("gpu", "gpu", 3, 0, True), Column("model", "model", 10, 7),
    Column("job", "job", 12, 2), Column("class", "class", 26, 0), Column("conf", "conf", 4, 5, True),
    Column("sm", "SM", 4, 1, True), Column("dram", "DRAM", 4, 1, True), Column("tensor", "tens", 4, 3, True),
    Column("mem", "mem GiB", 11, 4, True), Column("waste", "waste", 5, 1, True), Column("by", "by", 6, 6),
)


def fit_columns(width: int, group: str) -> list[Column]:
    """The columns that fit ``width`` (after the indent), the most useful first, in the order shown."""
    def rank(c: Column) -> tuple:
        return (c.key == group, c.priority, COLUMNS.index(c))
    kept, used = [], len(INDENT) - 1
    for c in sorted(COLUMNS, key=rank):
        if used + 1 + c.width <= width:
            kept.append(c)
            used += 1 + c.width
    return [c for c in COLUMNS if c in kept]


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def fit_heading(text: str, width: int) -> str:
    """A group's heading in ``width``: whole, else its job's classes that fit (the most GPU-hours first) and how
    many it left out ("…, +3 more"; the accounting below has them all)."""
    if len(text) <= width:
        return text
    first, *parts = text.split(", ")
    for keep in range(len(parts) - 1, -1, -1):
        shown = ", ".join([first, *parts[:keep], f"+{len(parts) - keep} more"])
        if len(shown) <= width:
            return shown
    return cut(text, width)


def wrap_parts(head: str, parts: list[str], width: int) -> list[str]:
    """``head`` then ``parts`` joined by ", ", wrapped between parts into rows of ``width`` (the next rows indented
    by ``WRAP_INDENT``); a part too long for a row alone is cut."""
    rows, row = [], head
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        if len(row) + 1 + len(piece) <= width:
            row = f"{row} {piece}"
        else:
            rows.append(row)
            row = WRAP_INDENT + piece
    rows.append(row)
    return [cut(r, width) for r in rows]


def cells(r: C.ClusterGpu) -> dict[str, str]:
    waste = r.waste
    return {
        "node": r.node, "gpu": r.gpu, "model": (r.model or NA).removeprefix("NVIDIA "),
        "job": ", ".join(r.jobs) or "-", "class": class_text(r.cls, r.subclass),
        "conf": "" if r.confidence is None else f"{r.confidence:.2f}", "sm": pct(r.sm_pct),
        "dram": pct(r.dram_pct), "tensor": pct(r.tensor_pct),
        "mem": f"{gb(r.mem_used_bytes)}/{gb(r.mem_total_bytes)}",
        "waste": NA if waste is None else f"{100 * waste:.0f}%",
        "by": "export" if r.judged_by == C.EXPORTED else "gputop",
    }


def _join(columns: list[Column], values: dict[str, str]) -> tuple[str, dict[str, tuple[int, int]]]:
    out, at = INDENT[:-1], {}
    for c in columns:
        v = cut(values[c.key], c.width)
        out += " "
        at[c.key] = (len(out), len(out) + c.width)
        out += v.rjust(c.width) if c.right else v.ljust(c.width)
    return out, at


def header_row(columns: list[Column]) -> tuple:
    return (_join(columns, {c.key: c.title for c in columns})[0], "bold")


def gpu_row(r: C.ClusterGpu, columns: list[Column], selected: bool) -> tuple:
    text, at = _join(columns, cells(r))
    style = "reverse" if selected else ""
    span = at.get("class")
    waiting = None if r.cls is None else r.cls in C.WAITING
    return (text, style, (span[0], span[1], CLASS_STYLE[waiting])) if span else (text, style)


@dataclass
class Entry:
    """One line of the table: a group's heading (``gpu`` None) or a GPU's row."""

    heading: str | None = None
    gpu: C.ClusterGpu | None = None
    group: str | None = None  # the job or node it is under (a GPU two jobs hold is under each)


def groups(rows: list[C.ClusterGpu], by: str) -> list[tuple[str | None, list[C.ClusterGpu]]]:
    """``rows`` (most wasted first) by job (a GPU two jobs hold is under each; "no job" holds the others) or by
    node; the groups in the order of their most wasted GPU."""
    out: dict[str | None, list[C.ClusterGpu]] = {}
    for r in rows:
        for name in (r.jobs or [None]) if by == "job" else [r.node]:
            out.setdefault(name, []).append(r)
    return list(out.items())


def heading(by: str, name: str | None, members: list[C.ClusterGpu], jobs: dict[str | None, C.JobHours]) -> str:
    label = (f"job {name}" if name is not None else "no job") if by == "job" else f"node {name}"
    wastes = [r.waste for r in members if r.waste is not None]
    text = f"{label} · {count(len(members), 'GPU')}"
    if wastes:
        text += f" · waste {100 * sum(wastes) / len(wastes):.0f}%"
    if by == "job" and name in jobs:
        text += " · " + job_line(jobs[name].to_dict()).split(": ", 1)[1]
    return text


def entries(state: ClusterState) -> list[Entry]:
    """The table's lines: each group's heading, then its GPUs."""
    jobs = {j.job: j for j in state.jobs or []}
    out = []
    for name, members in groups(state.shown(), state.group):
        out.append(Entry(heading=heading(state.group, name, members, jobs)))
        out += [Entry(gpu=r, group=name) for r in members]
    return out


def head_lines(state: ClusterState, width: int, now: float | None = None) -> list[tuple]:
    """The page's top lines: the server and what it holds, the grouping and filters, and, while Prometheus does
    not answer, "stale N s: why"."""
    rows, shown = state.rows, state.shown()
    gpus = f"{len(shown)} of {count(len(rows), 'GPU')}" if len(shown) != len(rows) else count(len(rows), "GPU")
    nodes, jobs = len({r.node for r in shown}), len({j for r in shown for j in r.jobs})
    when = time.strftime("%H:%M:%S UTC", time.gmtime(state.t)) if state.t is not None else ""
    first = f"{gpus} on {count(nodes, 'node')}, {count(jobs, 'job')} · {state.url}"
    first = cut(first, max(0, width - len(when) - 1))
    lines = [(first + " " * max(1, width - len(first) - len(when)) + when, "bold")]
    f = state.filters
    second = (f"grouped by {state.group} (g) · job {f['job'] or 'all'} (j) · node {f['node'] or 'all'} (n) · "
              f"class {f['class'] or 'all'} (c)")
    lines.append((cut(second, width), ""))
    age = state.stale_s(now)
    if age is not None:
        reason = re.sub(rf"^{re.escape(state.url)}(/api/v1/\w+)?: ", "", state.error)  # the URL is on top
        lines.append((cut(f"stale {age:.0f} s: {reason}", width), "bold red"))
    return lines


def accounting_lines(state: ClusterState, width: int, most: int) -> list[tuple]:
    """The job accounting over ``--range``: a title, then up to ``most - 1`` jobs (most wasted first)."""
    span = duration_text(state.range_s)
    if state.jobs is None:
        return [(cut(f"GPU-hours by class over the last {span}: reading…", width), "bold")]
    jobs = state.shown_jobs()
    title = f"GPU-hours by class over the last {span} (counted every {state.step_s:g} s)"
    lines = [(cut(title, width), "bold")]
    wrapped = []  # each job's rows: its line wrapped between its classes, never cut
    for j in jobs:
        name, hours, parts = job_parts(j.to_dict())
        wrapped.append(wrap_parts(f"{name}:", [hours, *parts], width))
    if not wrapped:
        return lines + [(cut("no GPU-hours in this range", width), "")]
    body: list[str] = []
    for i, rows in enumerate(wrapped):
        rest = len(wrapped) - i
        room = most - 1 - len(body) - (rest > 1)  # a last row for "… N more jobs" while jobs remain after this one
        if len(rows) > room:
            body.append(cut(f"… {count(rest, 'more job')} (j: one job)", width))
            break
        body += rows
    return lines + [(b, "") for b in body]
