"""The live source: NVML (and GPM) for the chosen GPUs plus host metrics, one tick per read.

Host metrics are read at most every ``HOST_PERIOD_S`` (0.5 s) while a process is watched, else once a
second (``HOST_IDLE_PERIOD_S``); ticks in between carry the last reading. Linux counts CPU time in 10 ms
jiffies, so a 0.1 s window could only show a core's CPU% in steps of 10%; and the host read (/proc/stat,
/proc/meminfo, the watched process trees) is the costliest part of a tick after GPM's sample: ~350 of
~600 us at the sampler's pace on the H100 machine (bench/perf/sample_cost.py --paced).
"""

from __future__ import annotations

import platform
import time

from gputop.telemetry.host import HOST_PERIOD_S, HostReader, PeriodicHost
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.sample import PROCESS_EVERY, GpuReader
from gputop.telemetry.static import device_count, read_static


class LiveSource:
    """NVML's GPUs on this machine (a :class:`gputop.telemetry.source.Source`)."""

    kind = "live"
    label = "live"
    path = None
    loop = False
    finished = False

    def __init__(self, nvml: Nvml | None = None, gpus: list[int] | None = None, gpm: bool = True,
                 process_every: int = PROCESS_EVERY, host_period_s: float = HOST_PERIOD_S,
                 static: dict[int, dict] | None = None):
        self.nvml = nvml or Nvml()
        self._known = static or {}  # NVML index -> static facts already read (telemetry.nvml_early)
        self.hostname = platform.node()
        self.header: dict = {}  # nothing recorded
        self.na_reasons = self.nvml.na_reasons  # the same dict: it fills as NVML calls fail
        n = device_count(self.nvml) if self.nvml.available() else 0
        self.indices = list(range(n)) if gpus is None else [i for i in gpus if 0 <= i < n]
        self._static: list[dict] | None = None
        self.readers = [GpuReader(self.nvml, i, gpm=gpm, process_every=process_every) for i in self.indices]
        self.host = HostReader()
        self._host = PeriodicHost(self.host, host_period_s)

    def static(self) -> list[dict]:
        if self._static is None:
            self._static = [self._known.get(i) or read_static(self.nvml, i) for i in self.indices]
        return self._static

    def read(self) -> dict:
        t = time.monotonic()
        gpus = [r.read(t) for r in self.readers]
        return {"t": t, "gpus": gpus, "host": self._host.read(t)}

    def delay(self, interval: float) -> float:
        return interval

    def watch(self, pid: int) -> None:
        self.host.watch(pid)
        self._host.again()  # the next tick reads the host again, with this process tree in it

    def unwatch(self, pid: int) -> None:
        self.host.unwatch(pid)

    def close(self) -> None:
        for r in self.readers:
            r.close()
