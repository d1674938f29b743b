"""The cluster page's state and its refreshing thread (no Textual here).

:class:`ClusterState` holds what the page shows: the last rows read (``fleet/reader.ClusterReader.snapshot``,
most wasted first), the last job accounting over ``--range``, the filters (job, node, class: each exact or None),
the grouping (by job or by node), the GPU under the cursor, and, while Prometheus does not answer, why (the rows
stay, marked stale with their age). :class:`Refresher` reads on a thread so the UI never waits on HTTP: the rows
every ``refresh_s``, the accounting every ``account_s`` (24 h of it costs more), and hands each result or error to
``deliver`` (the app passes it to its own thread).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from gputop.analysis import cluster as C
from gputop.telemetry.errors import SourceError

REFRESH_S = 5.0  # the rows, read again every 5 s
ACCOUNT_S = 300.0  # the job accounting over --range, every 5 min (2,048 GPUs, 24 h: 3 s of a read; 4.9% of a core
# with the rows every 5 s, 7.2% with it every minute: docs/benchmarks.md, "Cluster scale"; r reads both now)
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
        self.jobs: list[C.JobHours] | None = None  # None: not read yet
        self.step_s: float | None = None
        self.error: str | None = None  # why the last read failed (the data shown is stale); None: fresh
        self.selected: tuple | None = None  # (group, node, gpu) under the cursor

    # -- what the reads bring ----------------------------------------------------------------------------------
    def took_rows(self, rows: list[C.ClusterGpu], t: float) -> None:
        """A read's rows (kept most wasted first: ``analysis/cluster.order``), read at wall time ``t``."""
        self.rows, self.t, self.error = C.order(rows), t, None

    def took_accounting(self, jobs: list[C.JobHours], step_s: float) -> None:
        self.jobs, self.step_s = jobs, step_s

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

    def shown_jobs(self) -> list[C.JobHours]:
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
    """A thread that reads the cluster (see the module's text). ``deliver(kind, payload)``: ``("rows", (rows, t))``,
    ``("accounting", (jobs, step_s))`` or ``("error", reason)``; ``wake()`` reads now; ``stop()`` ends it."""

    def __init__(self, reader, range_s: float, deliver: Callable[[str, object], None], refresh_s: float = REFRESH_S,
                 account_s: float = ACCOUNT_S, clock: Callable[[], float] = time.time):
        self.reader, self.range_s, self.deliver = reader, range_s, deliver
        self.refresh_s, self.account_s, self.clock = refresh_s, account_s, clock
        self._stop, self._wake = threading.Event(), threading.Event()
        self._accounted: float | None = None  # monotonic time of the last accounting read
        self._thread = threading.Thread(target=self._loop, name="gputop-cluster", daemon=True)

    def start(self, first_wait: float = 0.0) -> None:
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
            self.read_once()
            self._wake.wait(self.refresh_s)

    def read_once(self) -> None:
        """One refresh: the rows, and the accounting when it is due (each read's failure delivered as one line)."""
        try:
            now = self.clock()
            rows = self.reader.snapshot(now)
            if self._stop.is_set():
                return
            self.deliver("rows", (rows, now))
            if self._accounted is None or time.monotonic() - self._accounted >= self.account_s:
                jobs, step = self.reader.accounting(self.range_s, now)
                self._accounted = time.monotonic()
                if not self._stop.is_set():
                    self.deliver("accounting", (jobs, step))
        except SourceError as exc:
            if not self._stop.is_set():
                self.deliver("error", str(exc))
