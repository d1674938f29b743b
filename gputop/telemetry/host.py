"""Host metrics: CPU per core, RAM, and the CPU% of watched process trees (to spot input starvation), with
the busiest thread of each watched process (one thread pegged at a core: a Python loop launching kernels or
preparing data in the training process itself, not a pool of DataLoader workers)."""

from __future__ import annotations

import time

import psutil


class ProcStat:
    """Per-core CPU% since the previous read and RAM from Linux's /proc/stat and /proc/meminfo, as psutil's
    ``cpu_percent(percpu=True)`` and ``virtual_memory()`` give them (the same formula: busy = total - idle -
    iowait, guest time already in user time, negative deltas as 0, one decimal), without psutil's
    per-core named tuples and its parse of every /proc/meminfo field. At the sampler's pace on the H100
    machine psutil's read took 466 us, this one 310-357 us, most of it the kernel writing /proc/stat
    (bench/perf/sample_cost.py --paced). ``ok`` is False where there is no /proc/stat to read (then HostReader
    uses psutil)."""

    def __init__(self, proc: str = "/proc"):
        self.proc = proc
        self._prev: list[list[int]] | None = None  # per core: its /proc/stat jiffies
        try:
            self.read_cpu()
            self.read_memory()
            self.ok = True
        except (OSError, ValueError, IndexError, KeyError):
            self.ok = False

    def read_cpu(self) -> list[float]:
        with open(f"{self.proc}/stat", "rb") as f:
            lines = f.read().split(b"\n")
        now = []
        for line in lines[1:]:  # the first line is all cores together
            if not line.startswith(b"cpu"):
                break
            # user nice system idle iowait irq softirq steal guest guest_nice
            now.append([int(x) for x in line.split()[1:11]])
        prev, self._prev = self._prev, now
        if prev is None or len(prev) != len(now):
            return [0.0] * len(now)  # psutil's first call: 0.0 for every core
        out = []
        for p, n in zip(prev, now):
            d = [max(0, b - a) for a, b in zip(p, n)]  # a counter that went back: 0, as psutil and top do
            total = sum(d) - sum(d[8:10])
            busy = total - sum(d[3:5])
            out.append(round(100.0 * busy / total, 1) if total else 0.0)
        return out

    def read_memory(self) -> tuple[int, int]:
        """(total, available) bytes: /proc/meminfo's MemTotal and MemAvailable (psutil's total and available)."""
        found = {}
        with open(f"{self.proc}/meminfo", "rb") as f:
            for line in f:
                key = line[:line.find(b":")]
                if key in (b"MemTotal", b"MemAvailable"):
                    found[key] = int(line.split()[1]) * 1024
                    if len(found) == 2:
                        break
        return found[b"MemTotal"], found[b"MemAvailable"]


class HostReader:
    """CPU% is "since the previous read", so one reader is kept per sampler."""

    def __init__(self):
        self._stat = ProcStat()  # opens the first window
        if not self._stat.ok:
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
        if self._stat.ok:
            per_core = self._stat.read_cpu()
            total, available = self._stat.read_memory()
        else:
            per_core = psutil.cpu_percent(percpu=True)
            vm = psutil.virtual_memory()
            total, available = vm.total, vm.available
        out = {
            "cpu_pct": sum(per_core) / len(per_core) if per_core else None,
            "cpu_per_core_pct": per_core,
            "ram_used_bytes": int(total - available),
            "ram_total_bytes": int(total),
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
# While no process is watched the host read only feeds the monitor's host line and chart: once a second (the
# read costs ~350 us of CPU at the sampler's pace on the GPU machines, most of it the kernel making /proc/stat)
HOST_IDLE_PERIOD_S = 1.0


class PeriodicHost:
    """A source's host metrics: read at most every ``period_s`` (every ``idle_period_s`` while the reader
    watches no process); the ticks in between carry the last reading (a dict the consumers must not modify)."""

    def __init__(self, reader: HostReader, period_s: float = HOST_PERIOD_S, idle_period_s: float | None = None):
        self.reader, self.period_s = reader, period_s
        self.idle_period_s = max(period_s, HOST_IDLE_PERIOD_S) if idle_period_s is None else idle_period_s
        self._last: dict | None = None
        self._t = 0.0

    def read(self, t: float) -> dict:
        period = self.period_s if self.reader.watched else self.idle_period_s
        if self._last is None or t - self._t >= 0.95 * period:
            self._last, self._t = self.reader.read(), t
        return self._last

    def again(self) -> None:
        """The next tick reads the host again (a process tree was just added)."""
        self._last = None
