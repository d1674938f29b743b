"""The GPU a measurement runs on (CUDA properties, its NVML handle, its peaks) and a probe that samples
its SM clock, board power and clock-event reasons on a thread while a measurement runs.

All NVML reads go through gputop.telemetry.nvml (the only module that imports pynvml).
"""

from __future__ import annotations

import threading


class ClockProbe:
    """SM clock, board power and clock-event reasons of one GPU, sampled on a thread during a measurement.

    ``with probe: ...`` samples every ``period_s``; ``summary()`` gives the means (one reading taken at
    the end when the measurement was too short for a sample). All values are None without NVML.
    """

    def __init__(self, nvml=None, handle=None, period_s: float = 0.01):
        self.nvml, self.handle, self.period_s = nvml, handle, period_s
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if nvml is not None:
            self._c_sm = nvml.const("NVML_CLOCK_SM", 1)

    @property
    def available(self) -> bool:
        return self.nvml is not None and self.handle is not None

    def read(self) -> tuple:
        from gputop.telemetry.sample import decode_clock_reasons

        g = self.nvml.get
        clock = g("sm_clock", "nvmlDeviceGetClockInfo", self.handle, self._c_sm)
        mw = g("power", "nvmlDeviceGetPowerUsage", self.handle)
        reasons = decode_clock_reasons(g("clock_reasons", "nvmlDeviceGetCurrentClocksEventReasons", self.handle))
        return clock, (mw / 1000.0 if mw is not None else None), reasons

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.samples.append(self.read())

    def __enter__(self) -> "ClockProbe":
        self.samples = []
        if self.available:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True, name="roofline-clock-probe")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.available and not self.samples:
            self.samples.append(self.read())

    def summary(self) -> dict:
        clocks = [s[0] for s in self.samples if s[0] is not None]
        powers = [s[1] for s in self.samples if s[1] is not None]
        reasons = sorted({r for s in self.samples for r in (s[2] or [])})
        return {
            "sm_clock_mhz": sum(clocks) / len(clocks) if clocks else None,
            "sm_clock_min_mhz": min(clocks) if clocks else None,
            "sm_clock_max_mhz": max(clocks) if clocks else None,
            "power_w": sum(powers) / len(powers) if powers else None,
            "power_max_w": max(powers) if powers else None,
            "clock_reasons": reasons if self.samples else None,
            "samples": len(self.samples),
        }



def gpu_context(cp, nvml=None) -> tuple[dict, ClockProbe]:
    """The device this process runs on (cuda:0 after CUDA_VISIBLE_DEVICES) and an NVML probe for it.

    The NVML device is found by PCI bus id; failing that, through CUDA_VISIBLE_DEVICES and the UUIDs.
    """
    from gputop.telemetry.nvml import Nvml, text

    dev_id = cp.cuda.runtime.getDevice()
    props = cp.cuda.runtime.getDeviceProperties(dev_id)
    name = props.get("name", b"")
    info = {
        "kind": "cuda",
        "name": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
        "cuda_device": dev_id,
        "pci_bus_id": cp.cuda.runtime.deviceGetPCIBusId(dev_id),
        "cc": f"{props.get('major')}.{props.get('minor')}",
        "compute_capability": [props.get("major"), props.get("minor")],
        "sm_count": props.get("multiProcessorCount"),
        "max_threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
        "max_blocks_per_sm": props.get("maxBlocksPerMultiProcessor"),
        "regs_per_sm": props.get("regsPerMultiprocessor"),
        "l2_bytes": props.get("l2CacheSize"),
        "memory_total_bytes": props.get("totalGlobalMem"),
        "cupy_version": cp.__version__,
        "cuda_runtime_version": cp.cuda.runtime.runtimeGetVersion(),
        "nvml_index": None, "uuid": None, "static": None, "peaks": None,
    }
    nvml = Nvml() if nvml is None else nvml
    handle = idx = None
    if nvml.available():
        handle = nvml.get("handle_by_pci", "nvmlDeviceGetHandleByPciBusId", info["pci_bus_id"])
        if handle is not None:
            idx = nvml.get("nvml_index", "nvmlDeviceGetIndex", handle)
        else:  # fall back to CUDA_VISIBLE_DEVICES -> NVML index through the UUIDs
            from gputop.telemetry.devices import nvml_index_for_cuda
            from gputop.telemetry.static import device_count
            from gputop.telemetry.static import handle as nvml_handle

            uuids = [text(nvml.get("uuid", "nvmlDeviceGetUUID", nvml_handle(nvml, i))) for i in range(device_count(nvml))]
            idx = nvml_index_for_cuda(dev_id, uuids)
            handle = nvml_handle(nvml, idx) if idx is not None else None
    if handle is not None and idx is not None:
        from gputop.analysis.peaks import compute_peaks
        from gputop.telemetry.static import read_static

        static = read_static(nvml, idx)
        info.update(nvml_index=idx, static=static, uuid=static.get("uuid"),
                    max_sm_clock_mhz=static.get("max_sm_clock_mhz"))
        info["peaks"] = compute_peaks(static)
    return info, ClockProbe(nvml if handle is not None else None, handle)


