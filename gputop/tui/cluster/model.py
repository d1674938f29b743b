"""The cluster page's state and its refreshing thread (no Textual here).

:class:`ClusterState` holds what the page shows: the last rows read (``fleet/reader.ClusterReader.snapshot``,
most wasted first), the last job accounting over ``--range``, the filters (job, node, class: each exact or None),
the grouping (by job or by node), the GPU under the cursor, and, while Prometheus does not answer, why (the rows
stay, marked stale with their age). :class:`Refresher` reads on a thread so the UI never waits on HTTP: the rows
every ``refresh_s``, or where a read costs this process more than ``CPU_SHARE`` of a core over that, as often as
keeps it there (``cadence``), the accounting every ``account_s`` (24 h of it costs more), and hands each result or
error to ``deliver`` (the app passes it to its own thread). Between two refreshes, once a mark of the reader's
judging grid has passed (every 30 s), it judges the GPUs that export no verdict for that step
(``ClusterReader.judge_ahead``): the next refresh reuses those verdicts instead of judging them on its way (at
8,192 GPUs, 2,048 of them dcgm-exporter's, half a refresh's time); their CPU counts in the cadence as a refresh's.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Callable

from gputop.analysis import cluster as C
from gputop.analysis.cluster_accounting import JobHours
from gputop.analysis.cluster_jobs import JobNow, judge_jobs
from gputop.fleet.judged_here import JUDGE_STEP_S
from gputop.telemetry.errors import SourceError

REFRESH_S = 5.0  # the rows, read again every 5 s ...
CPU_SHARE = 0.05  # ... or less often: a refresh's CPU (and the judging ahead's) at most this share of a core between
# two (a big fleet's read costs more than 0.25 s: 8,192 GPUs on 2 cores ~0.7 s a refresh and ~0.8 s a judging ahead,
# read every ~30 s; docs/benchmarks.md "The judged GPUs judged ahead of the refresh")
ACCOUNT_S = 300.0  # the job accounting over --range, every 5 min (r reads both now): with the recording rules and
# within a step of the reader's grid of dcgm-exporter's samples, 1,024 GPUs over 24 h cost 0.1 s of a read; the
# first, or without the rules, 2-5 s (docs/benchmarks.md, "Cluster scale at 8,192 GPUs")
FULL_GC_EVERY = 100  # Python's full collection at most once per this many middle ones (its default: 10): at
# 8,192 GPUs a read makes and drops ~10^5 objects (its answers' series), which set off a full collection of all the
# process holds once or twice a read; 10x rarer, a refresh's CPU here went from 1.03 to 0.71 s (docs/benchmarks.md,
# "Cluster scale at 8,192 GPUs"). What the page makes holds no cycles: it is freed as it goes, collection or not.
JUDGE_LAG_S = 1.0  # a mark's judging ahead this long after it (the mark's scrapes stored by then)
GROUPS = ("job", "node")  # the page's groupings, in the order ``g`` cycles them
FILTERS = ("job", "node", "class")


class ClusterState:
    """What the cluster page shows (see the module's text). ``t``: the wall time of the rows shown; ``clock``: the
    wall time now (a stale page's age)."""

    def __init__(self, url: str, range_s: float, job: str | None = None, node: str | None = None,
                 cls: str | None = None, group: str = "job", clock: Callable[[], float] = time.time):
        self.url, self.range_s, self.group, self.clock = url, range_s, group, clock
        self.filters: dict[str, str | None] = {"job": job, "node": node, "class": cls}
        self.rows: list[C.ClusterGpu] = []
        self.t: float | None = None
        self.jobs: list[JobHours] | None = None  # None: not read yet
        self.step_s: float | None = None
        self.error: str | None = None  # why the last read failed (the data shown is stale); None: fresh
        self.notes: list[str] = []  # what the last read could not read (its rows are the rest)
        self.jobs_now: dict[str, JobNow] = {}  # each job judged whole over its nodes (analysis/cluster_jobs.py)
        self.accounting_notes: list[str] = []
        self.selected: tuple | None = None  # (group, the GPU's key) under the cursor

    # -- what the reads bring ----------------------------------------------------------------------------------
    def took_rows(self, rows: list[C.ClusterGpu], t: float, notes: list[str] | tuple = ()) -> None:
        """A read's rows (kept most wasted first: ``analysis/cluster.order``), read at wall time ``t``, and what it
        could not read (``notes``); each job is judged whole on them."""
        self.rows, self.t, self.error, self.notes = C.order(rows), t, None, list(notes)
        self.jobs_now = judge_jobs(self.rows)

    def took_accounting(self, jobs: list[JobHours], step_s: float, notes: list[str] | tuple = ()) -> None:
        """The accounting over ``--range`` (the most a fix would win back first) and what it could not count."""
        self.jobs, self.step_s, self.accounting_notes = jobs, step_s, list(notes)

    def failed(self, reason: str) -> None:
        self.error = reason

    def stale_s(self, now: float | None = None) -> float | None:
        """Seconds since the rows shown were read, while Prometheus fails; None while they are fresh."""
        if self.error is None:
            return None
        return max(0.0, (self.clock() if now is None else now) - (self.t or 0.0))

    # -- what the page shows ------------------------------------------------------------------------------------
    def shown(self) -> list[C.ClusterGpu]:
        f = self.filters
        return C.select(self.rows, job=f["job"], node=f["node"], cls=f["class"])

    def shown_jobs(self) -> list[JobHours]:
        """The accounting of the jobs whose GPUs are shown (every job's, without a filter), as ``--once`` has it."""
        return C.accounted(self.jobs or [], self.shown(), any(self.filters.values()), self.filters["job"])

    def options(self, kind: str) -> list[str]:
        """The values a filter can take in the fleet now (sorted), and the one set even where it is gone."""
        if kind == "job":
            values = {j for r in self.rows for j in r.jobs}
        elif kind == "node":
            values = {r.node for r in self.rows}
        else:
            values = {r.cls for r in self.rows if r.cls}
        if self.filters[kind] is not None:
            values.add(self.filters[kind])
        return sorted(values)

    def cycle(self, kind: str, step: int = 1) -> str | None:
        """The next (``step`` 1) or previous (-1) value of a filter, through "all" (None); returns it."""
        choices: list[str | None] = [None, *self.options(kind)]
        i = choices.index(self.filters[kind]) if self.filters[kind] in choices else 0
        self.filters[kind] = choices[(i + step) % len(choices)]
        return self.filters[kind]

    def clear_filters(self) -> None:
        self.filters = dict.fromkeys(FILTERS)

    def next_group(self) -> str:
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        return self.group


class Refresher:
    """A thread that reads the cluster (see the module's text). ``deliver(kind, payload)``: ``("rows", (rows, t,
    notes))``, ``("accounting", (jobs, step_s, notes))`` or ``("error", reason)`` (``notes``: what the read could not
    read, ``reader.notes`` / ``reader.accounting_notes``); ``wake()`` reads now; ``stop()`` ends it."""

    def __init__(self, reader, range_s: float, deliver: Callable[[str, object], None], refresh_s: float = REFRESH_S,
                 account_s: float = ACCOUNT_S, clock: Callable[[], float] = time.time):
        self.reader, self.range_s, self.deliver = reader, range_s, deliver
        self.refresh_s, self.account_s, self.clock = refresh_s, account_s, clock
        self._stop, self._wake = threading.Event(), threading.Event()
        self._accounted: float | None = None  # monotonic time of the last accounting read
        self.cadence_s = refresh_s  # the wait after the last refresh (CPU_SHARE)
        self._ahead_cpu = 0.0  # CPU of the judging ahead since the last refresh (counted in the next cadence)
        self._thread = threading.Thread(target=self._loop, name="gputop-cluster", daemon=True)

    def start(self, first_wait: float = 0.0) -> None:
        page_gc()
        self._first_wait = first_wait
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _loop(self) -> None:
        self._wake.wait(self._first_wait)
        while not self._stop.is_set():
            self._wake.clear()
            self.wait_judging(time.monotonic() + self.read_timed())

    def read_timed(self) -> float:
        """:meth:`read_once`, and the wait before the next: ``refresh_s``, or longer where the rows' read (and the
        judging ahead since the last) cost more than ``CPU_SHARE`` of a core over it (the process's CPU: the
        reader's threads)."""
        cpu = time.process_time()
        self.read_once(rows_only=True)
        self.cadence_s = max(self.refresh_s, (time.process_time() - cpu + self._ahead_cpu) / CPU_SHARE)
        self._ahead_cpu = 0.0
        self.read_once(accounting_only=True)
        return self.cadence_s

    def wait_judging(self, due: float) -> None:
        """Wait until ``due`` (``time.monotonic``) or a wake; judge ahead the step of the reader's judging grid we are
        in if it is not judged yet (its mark passed during the last refresh), and, where the next mark falls before
        ``due``, once it has passed (``JUDGE_LAG_S`` after it). A failed read is left to the next refresh to say (it
        judges what is still to judge, and reports)."""
        while not self._stop.is_set():
            mark = self.reader.next_mark_in(self.clock())
            if mark is not None and JUDGE_STEP_S - mark >= JUDGE_LAG_S and self._judge_ahead():
                continue  # the step we are in, not judged yet (its mark passed during the refresh)
            left = due - time.monotonic()
            if mark is None or mark + JUDGE_LAG_S >= left:
                self._wake.wait(max(0.0, left))
                return
            if self._wake.wait(mark + JUDGE_LAG_S):
                return
            self._judge_ahead()

    def _judge_ahead(self) -> bool:
        """``reader.judge_ahead`` now (False where the step is judged already, or the read failed), its CPU kept for
        the next cadence."""
        cpu = time.process_time()
        try:
            return self.reader.judge_ahead(self.clock())
        except SourceError:
            return False
        finally:
            self._ahead_cpu += time.process_time() - cpu

    def read_once(self, rows_only: bool = False, accounting_only: bool = False) -> None:
        """One refresh: the rows, and the accounting when it is due (each read's failure delivered as one line)."""
        try:
            now = self.clock()
            if not accounting_only:
                rows = self.reader.snapshot(now)
                if self._stop.is_set():
                    return
                self.deliver("rows", (rows, now, list(self.reader.notes)))
            if rows_only:
                return
            if self._accounted is None or time.monotonic() - self._accounted >= self.account_s:
                jobs, step = self.reader.accounting(self.range_s, now)
                self._accounted = time.monotonic()
                if not self._stop.is_set():
                    self.deliver("accounting", (jobs, step, list(self.reader.accounting_notes)))
        except SourceError as exc:
            if not self._stop.is_set():
                self.deliver("error", str(exc))


def page_gc() -> None:
    """This process' full collections made rarer (``FULL_GC_EVERY``): the cluster page's process reads a fleet."""
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, FULL_GC_EVERY))
