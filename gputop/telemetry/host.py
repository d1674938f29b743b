"""Host metrics: CPU per core, RAM, and the CPU% of watched process trees (to spot input starvation), with
the busiest thread of each watched process (one thread pegged at a core: a Python loop launching kernels or
preparing data in the training process itself, not a pool of DataLoader workers)."""

from __future__ import annotations

import time

import psutil


class HostReader:
    """psutil's cpu_percent is "since the previous call", so one reader is kept per sampler."""

    def __init__(self):
        psutil.cpu_percent(percpu=True)  # opens the first window
        self._procs: dict[int, psutil.Process] = {}
        self._threads: dict[int, tuple[float, dict[int, float]]] = {}  # pid -> (when, thread id -> CPU seconds)
        self.watched: set[int] = set()

    def watch(self, pid: int) -> None:
        """Follow ``pid`` and its descendants; its CPU window opens now, so the next read is real."""
        self.watched.add(pid)
        try:
            self._proc(pid)
        except psutil.Error:
            pass

    def unwatch(self, pid: int) -> None:
        self.watched.discard(pid)

    def read(self) -> dict:
        per_core = psutil.cpu_percent(percpu=True)
        vm = psutil.virtual_memory()
        out = {
            "cpu_pct": sum(per_core) / len(per_core) if per_core else None,
            "cpu_per_core_pct": per_core,
            "ram_used_bytes": int(vm.total - vm.available),
            "ram_total_bytes": int(vm.total),
        }
        if self.watched:
            alive: set[int] = set()
            out["procs"] = {str(pid): self.tree_cpu(pid, alive) for pid in sorted(self.watched)}
            for stale in [p for p in self._procs if p not in alive and p not in self.watched]:
                del self._procs[stale]  # exited children (their pids may be reused)
            for stale in [p for p in self._threads if p not in self.watched]:
                del self._threads[stale]
        return out

    def tree_cpu(self, pid: int, alive: set[int] | None = None) -> dict | None:
        """CPU% of ``pid`` and of its descendants (DataLoader workers are children), since last call.
        The pids seen are added to ``alive``."""
        try:
            root = self._proc(pid)
            kids = root.children(recursive=True)
        except psutil.Error:
            self._procs.pop(pid, None)
            return None
        own = self._cpu(root)
        children = 0.0
        for k in kids:
            children += self._cpu(self._proc(k.pid, k)) or 0.0
        if alive is not None:
            alive.update([pid, *(k.pid for k in kids)])
        out = {"cpu_pct": own, "children_cpu_pct": children, "children": len(kids)}
        thread = self.busiest_thread(root)
        if thread is not None:
            out["busiest_thread_pct"] = thread
        return out

    def busiest_thread(self, p: psutil.Process) -> float | None:
        """CPU% (100 = one core) of ``p``'s busiest thread since the previous call (None on the first call,
        or where the threads cannot be read)."""
        try:
            now, threads = time.monotonic(), {t.id: t.user_time + t.system_time for t in p.threads()}
        except (psutil.Error, OSError):
            return None
        before = self._threads.get(p.pid)
        self._threads[p.pid] = (now, threads)
        if before is None or now <= before[0]:
            return None
        dt = now - before[0]
        busiest = max((cpu - before[1].get(tid, cpu) for tid, cpu in threads.items()), default=0.0)
        return round(max(0.0, 100.0 * busiest / dt), 1)

    def _proc(self, pid: int, p: psutil.Process | None = None) -> psutil.Process:
        if pid not in self._procs:
            self._procs[pid] = p or psutil.Process(pid)
            self._cpu(self._procs[pid])  # first call opens the window and returns 0.0
        return self._procs[pid]

    @staticmethod
    def _cpu(p: psutil.Process) -> float | None:
        try:
            return p.cpu_percent(None)
        except psutil.Error:
            return None


HOST_PERIOD_S = 0.5  # Linux counts CPU time in 10 ms jiffies: a shorter window shows a core's CPU% in coarse steps


class PeriodicHost:
    """A source's host metrics: read at most every ``period_s``; the ticks in between carry the last reading
    (a dict the consumers must not modify)."""

    def __init__(self, reader: HostReader, period_s: float = HOST_PERIOD_S):
        self.reader, self.period_s = reader, period_s
        self._last: dict | None = None
        self._t = 0.0

    def read(self, t: float) -> dict:
        if self._last is None or t - self._t >= 0.95 * self.period_s:
            self._last, self._t = self.reader.read(), t
        return self._last

    def again(self) -> None:
        """The next tick reads the host again (a process tree was just added)."""
        self._last = None
