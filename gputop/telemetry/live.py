"""The live source: NVML (and GPM) for the chosen GPUs plus host metrics, one tick per read."""

from __future__ import annotations

import time

from gputop.telemetry.host import HostReader
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.sample import GpuReader
from gputop.telemetry.static import device_count, read_static


class LiveSource:
    kind = "live"
    label = "live"
    finished = False

    def __init__(self, nvml: Nvml | None = None, gpus: list[int] | None = None, gpm: bool = True,
                 process_every: int = 10):
        self.nvml = nvml or Nvml()
        n = device_count(self.nvml) if self.nvml.available() else 0
        self.indices = list(range(n)) if gpus is None else [i for i in gpus if 0 <= i < n]
        self._static: list[dict] | None = None
        self.readers = [GpuReader(self.nvml, i, gpm=gpm, process_every=process_every) for i in self.indices]
        self.host = HostReader()

    def static(self) -> list[dict]:
        if self._static is None:
            self._static = [read_static(self.nvml, i) for i in self.indices]
        return self._static

    def read(self) -> dict:
        t = time.monotonic()
        return {"t": t, "gpus": [r.read(t) for r in self.readers], "host": self.host.read()}

    def delay(self, interval: float) -> float:
        return interval

    def watch(self, pid: int) -> None:
        self.host.watch(pid)

    def close(self) -> None:
        for r in self.readers:
            r.close()
