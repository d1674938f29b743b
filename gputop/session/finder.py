"""Which GPUs a watched process tree uses, and the ticks kept for the final analysis.

:class:`GpuFinder` and :class:`TickStore` are sampler listeners (they run on the sampler's thread).
"""

from __future__ import annotations

import threading
import time

from gputop.analysis import thresholds as T

MAX_TICKS = 12000  # kept for the final analysis; beyond it every other tick is dropped (20 min at 10 Hz)
TREE_REFRESH_S = 0.5


class GpuFinder:
    """A sampler listener: when did the watched process tree first appear on each GPU position.

    By pid: the tree's pids in a sample's ``processes`` (NVML's list). Otherwise (another PID
    namespace hides them) by a rise over the first tick: memory up by MEM_RISE_BYTES, or SM activity /
    kernel duty cycle from under half of ACTIVITY_RISE_PCT to above it; with ``active_ok`` (watching a
    process that was already running) any activity above ACTIVITY_RISE_PCT counts.
    """

    def __init__(self, pid: int | None = None, tree=None, active_ok: bool = False):
        self.pid = pid
        self.tree = tree  # callable -> set of pids; default: pid and its descendants (psutil)
        self.known: set[int] = set() if pid is None else {pid}
        self.by_pid: dict[int, float] = {}
        self.by_rise: dict[int, float] = {}
        self.active_ok = active_ok
        self._base: dict[int, tuple] = {}
        self._tree_t = 0.0
        self.lock = threading.Lock()

    def set_pid(self, pid: int) -> None:
        with self.lock:
            self.pid = pid
            self.known.add(pid)

    def _pids(self) -> set[int]:
        now = time.monotonic()
        if self.tree is not None:
            self.known |= set(self.tree())
        elif self.pid is not None and now - self._tree_t > TREE_REFRESH_S:
            self._tree_t = now
            try:
                import psutil

                root = psutil.Process(self.pid)
                self.known |= {root.pid} | {c.pid for c in root.children(recursive=True)}
            except Exception:  # gone: keep what we knew
                pass
        return self.known

    def __call__(self, tick: dict) -> None:
        with self.lock:
            for pos, s in enumerate(tick.get("gpus") or []):
                t = tick["t"]
                procs = s.get("processes")
                if procs and self.pid is not None and pos not in self.by_pid:
                    if {p.get("pid") for p in procs} & self._pids():
                        self.by_pid[pos] = t
                mem = s.get("mem_used_bytes")
                act = max(s.get("sm_active_pct") or 0.0, s.get("util_gpu_pct") or 0.0)
                if pos not in self._base:
                    self._base[pos] = (mem, act)
                    if not self.active_ok:
                        continue
                if pos in self.by_rise:
                    continue
                base_mem, base_act = self._base[pos]
                rose = mem is not None and base_mem is not None and mem - base_mem >= T.MEM_RISE_BYTES
                busy = act >= T.ACTIVITY_RISE_PCT and (self.active_ok or base_act < T.ACTIVITY_RISE_PCT / 2)
                if rose or busy:
                    self.by_rise[pos] = t

    def result(self) -> tuple[dict[int, float], str]:
        """({position: first seen t}, how): how is "process list", "memory/activity rise" or "none"."""
        with self.lock:
            if self.by_pid:
                return dict(self.by_pid), "process list"
            if self.by_rise:
                return dict(self.by_rise), "memory/activity rise"
            return {}, "none"


class TickStore:
    """All ticks of a run for the final analysis, slimmed, thinned when long. Slimmed: each process list keeps
    only its pids (the classifier asks whether the watched process holds a CUDA context there: host-bound vs
    idle), NVML's per-process SM samples stay, and of the per-core CPU only the busiest core."""

    def __init__(self, max_ticks: int = MAX_TICKS):
        self.ticks: list[dict] = []
        self.max_ticks = max_ticks
        self.stride = 1
        self._n = 0
        self.lock = threading.Lock()

    def __call__(self, tick: dict) -> None:
        self._n += 1
        if (self._n - 1) % self.stride:
            return
        host = dict(tick.get("host") or {})
        cores = host.pop("cpu_per_core_pct", None)
        if cores:
            host["cpu_per_core_pct"] = [max(cores)]  # the classifier reads only the busiest core
        slim = {"t": tick["t"], "gpus": [slim_sample(s) for s in tick.get("gpus") or []], "host": host}
        with self.lock:
            self.ticks.append(slim)
            if len(self.ticks) > self.max_ticks:
                self.ticks = self.ticks[::2]
                self.stride *= 2

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.ticks)


def slim_sample(s: dict) -> dict:
    """A sample as the run's store keeps it: its process list reduced to the pids (None stays None)."""
    procs = s.get("processes")
    return dict(s, processes=None if procs is None else [{"pid": p.get("pid")} for p in procs])
