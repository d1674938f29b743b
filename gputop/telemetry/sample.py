"""One dynamic sample of one GPU: NVML duty cycles, GPM counters, clocks, power, memory, processes.

A sample is a flat dict of JSON types (``None`` = n/a). Field names carry their unit. The two NVML
"utilization" numbers are *duty cycles* (fraction of time a kernel / the memory controller was busy),
not throughput; the GPM counters (Hopper and newer) say how busy the SMs, pipes and DRAM really were
over the window since the previous sample.
"""

from __future__ import annotations

import ctypes
import math
import os
import platform
import time

from gputop.telemetry.nvml import Nvml, reason_name, text
from gputop.telemetry.process_job import JobReader
from gputop.telemetry.static import handle

# GPM metric ids from nvml.h (NVML_GPM_METRIC_*), by the sample field they fill.
GPM_METRICS = {
    "sm_active_pct": 2,  # SM_UTIL: % of SMs busy
    "sm_occupancy_pct": 3,  # SM_OCCUPANCY: resident warps vs the maximum
    "int_pct": 4,  # INTEGER_UTIL
    "tensor_pct": 5,  # ANY_TENSOR_UTIL
    "dfma_pct": 6,  # DFMA_TENSOR_UTIL (FP64 tensor)
    "hmma_pct": 7,  # HMMA_TENSOR_UTIL (FP16/BF16/TF32 tensor)
    "imma_pct": 9,  # IMMA_TENSOR_UTIL (INT8 tensor)
    "dram_bw_pct": 10,  # DRAM_BW_UTIL: % of the theoretical DRAM bandwidth
    "fp64_pct": 11,  # FP64_UTIL (non-tensor)
    "fp32_pct": 12,  # FP32_UTIL (non-tensor)
    "fp16_pct": 13,  # FP16_UTIL (non-tensor)
    "pcie_tx_bps": 20,  # PCIE_TX_PER_SEC (MiB/s -> bytes/s)
    "pcie_rx_bps": 21,  # PCIE_RX_PER_SEC
    "nvlink_rx_bps": 60,  # NVLINK_TOTAL_RX_PER_SEC
    "nvlink_tx_bps": 61,  # NVLINK_TOTAL_TX_PER_SEC
}
_MIB = 1024 * 1024

# nvmlClocksEventReason* bits, in words: the one home of these words (samples record them, traces keep them,
# the classifier and the workloads look for them). Everything below derives from this table.
CLOCK_REASONS = {
    0x1: "idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
# Clocks slowed by heat or hardware: abnormal on any load.
THERMAL_REASONS = tuple(CLOCK_REASONS[bit] for bit in (0x20, 0x40, 0x8, 0x80))
# The board at its power limit: normal under a heavy load, a problem when it holds the clocks far down.
POWER_CAP_REASON = CLOCK_REASONS[0x4]
# Either: the clocks were held below what the load asked for, so timings may be low.
THROTTLE_REASONS = (POWER_CAP_REASON, *THERMAL_REASONS)

# The fields of a sample (besides "index", "t", "processes" and "lost").
SAMPLE_FIELDS = (
    "util_gpu_pct", "util_mem_pct", *GPM_METRICS, "sm_clock_mhz", "mem_clock_mhz", "clock_reasons",
    "power_w", "temp_c", "mem_used_bytes", "mem_total_bytes",
)
# The GPM activity fields: how busy the SMs, the pipes and DRAM were, in % (GPM's throughputs are *_bps).
GPM_ACTIVITY_FIELDS = tuple(name for name in GPM_METRICS if name.endswith("_pct"))


def fields(*names: str) -> tuple[str, ...]:
    """``names``, each checked to be a sample field: a module that picks fields by name fails at import
    when a field is renamed here, instead of silently reading n/a."""
    unknown = [n for n in names if n not in SAMPLE_FIELDS]
    if unknown:
        raise ValueError(f"not sample fields: {', '.join(unknown)} (see gputop.telemetry.sample.SAMPLE_FIELDS)")
    return names


_PLAIN: dict[type, type] = {}


def plain_struct(struct: type) -> type:
    """A ctypes Structure with ``struct``'s fields (the same layout) and none of its Python attribute hooks."""
    if struct not in _PLAIN:
        _PLAIN[struct] = type(f"Plain{struct.__name__}", (ctypes.Structure,), {"_fields_": struct._fields_})
    return _PLAIN[struct]


def decode_clock_reasons(mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    return [word for bit, word in CLOCK_REASONS.items() if mask & bit]


class GpmWindow:
    """Two alternating GPM sample buffers; each read gives the metrics since the previous read."""

    def __init__(self, nvml: Nvml, index: int, h):
        self.nvml, self.index, self.h = nvml, index, h
        lib = nvml.lib
        self.bufs = [nvml.get("gpm_alloc", "nvmlGpmSampleAlloc"), nvml.get("gpm_alloc", "nvmlGpmSampleAlloc")]
        self.ok = all(b is not None for b in self.bufs)
        self.cur = 0
        self.have_prev = False
        self.ids = list(GPM_METRICS.values())
        self.names = list(GPM_METRICS)
        self.scales = [_MIB if name.endswith("_bps") else 1.0 for name in self.names]  # GPM's MiB/s -> bytes/s
        self.ok = self.ok and hasattr(lib, "c_nvmlGpmMetricsGet_t")
        if self.ok:  # one request struct, reused every read (its metrics array has ~480 slots)
            self.mg = lib.c_nvmlGpmMetricsGet_t()
            self.mg.version = getattr(lib, "NVML_GPM_METRICS_GET_VERSION", 1)
            self.mg.numMetrics = len(self.ids)
            # its first metrics, seen through plain ctypes structs of the same fields: pynvml's structs run
            # Python code on every attribute read and write, ~45 of them a read (gputop's side of a read:
            # 16.9 -> 8.1 us on the CPU machine, docs/benchmarks.md)
            self.metrics = (plain_struct(lib.c_nvmlGpmMetric_t) * len(self.ids)).from_address(
                ctypes.addressof(self.mg) + type(self.mg).metrics.offset)
            for m, mid in zip(self.metrics, self.ids):  # NVML reads the ids and writes value and nvmlReturn
                m.metricId = mid

    def read(self) -> dict | None:
        if not self.ok:
            return None
        nvml = self.nvml
        buf = self.bufs[self.cur]
        if nvml.get("gpm_sample", "nvmlGpmSampleGet", self.h, buf, gpu=self.index) is None:
            self.have_prev = False
            return None
        if not self.have_prev:  # the first read only opens a window
            self.have_prev = True
            self.cur ^= 1
            return None
        mg = self.mg
        mg.sample1 = self.bufs[self.cur ^ 1]
        mg.sample2 = buf
        metrics = self.metrics
        for m in metrics:  # in case NVML writes a code only where a metric fails
            m.nvmlReturn = 0
        self.cur ^= 1
        if nvml.get("gpm_metrics", "nvmlGpmMetricsGet", mg, gpu=self.index) is None:
            return None
        out = {}
        for m, name, scale in zip(metrics, self.names, self.scales):
            if m.nvmlReturn != 0:
                out[name] = None
                nvml.na_reasons.setdefault(name, reason_name(m.nvmlReturn))
                continue
            v = m.value  # a Python float (c_double)
            # the first window after a counter reset can read NaN
            out[name] = v * scale if math.isfinite(v) else None
        return out

    def close(self) -> None:
        for b in self.bufs:
            if b is not None:
                self.nvml.get("gpm_free", "nvmlGpmSampleFree", b)
        self.bufs = [None, None]
        self.ok = False


# NVML field ids (nvml.h) of the cumulative NVLink data counters (KiB), summed over every link with the scope
# id UINT_MAX: the NVLink traffic of a GPU without GPM (Ampere and older), as a rate between two reads.
FI_NVLINK_THROUGHPUT_DATA_TX = 138
FI_NVLINK_THROUGHPUT_DATA_RX = 139
ALL_LINKS = 0xFFFFFFFF


class NvlinkCounters:
    """NVLink rx/tx in bytes/s from NVML's cumulative counters (field values), for a GPU without GPM.
    The first read opens the window (None); a GPU whose counters NVML does not give is not asked again."""

    def __init__(self, nvml: Nvml, index: int, h):
        self.nvml, self.index, self.h = nvml, index, h
        self.ok = True
        self.prev: tuple[float, float, float] | None = None  # (t, tx KiB, rx KiB)

    def read(self, t: float) -> tuple[float | None, float | None]:
        if not self.ok:
            return None, None
        ids = [(FI_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS), (FI_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS)]
        vals = self.nvml.field_values("nvlink_throughput", self.h, ids, gpu=self.index)
        if not vals or None in vals:
            self.ok = vals is not None and self.prev is not None  # never given: stop asking; a gap: go on
            self.prev = None
            return None, None
        tx, rx = float(vals[0]), float(vals[1])
        prev, self.prev = self.prev, (t, tx, rx)
        if prev is None or t <= prev[0] or tx < prev[1] or rx < prev[2]:  # first read, or a counter reset
            return None, None
        dt = t - prev[0]
        return (rx - prev[2]) * 1024.0 / dt, (tx - prev[1]) * 1024.0 / dt


def _pgid(pid: int) -> int | None:
    """The process group of ``pid`` (a job's processes share it: torchrun's ranks, mp.spawn's children, one shell
    job); None where it is not ours to see (another PID namespace) or gone."""
    try:
        return os.getpgid(pid)
    except OSError:
        return None


PROCESS_EVERY = 10  # the live view lists GPU processes on every 10th read (once a second at 10 Hz)


class GpuReader:
    """Reads dynamic samples of one GPU. Processes are refreshed every ``process_every`` reads, each with its job
    (gputop/telemetry/process_job.py: what groups a node's processes into jobs, read once per process)."""

    def __init__(self, nvml: Nvml, index: int, gpm: bool = True, process_every: int = PROCESS_EVERY):
        self.nvml, self.index = nvml, index
        self.jobs = JobReader(platform.node())
        self.h = handle(nvml, index)
        sup = nvml.get("gpm_supported", "nvmlGpmQueryDeviceSupport", self.h, gpu=index) if gpm else None
        self.gpm = GpmWindow(nvml, index, self.h) if sup is not None and sup.isSupportedDevice else None
        self.nvlink = NvlinkCounters(nvml, index, self.h) if self.gpm is None else None
        self.process_every = max(1, process_every)
        self._n = 0
        self._names: dict[int, tuple[str | None, str | None]] = {}
        self._util_since = int(time.time() * 1e6) - 1_000_000  # NVML's per-process samples: from 1 s ago
        self._c_sm = nvml.const("NVML_CLOCK_SM", 1)
        self._c_mem = nvml.const("NVML_CLOCK_MEM", 2)
        self._t_gpu = nvml.const("NVML_TEMPERATURE_GPU", 0)
        # v2 reports the driver's reserved memory apart, so "used" matches nvidia-smi's memory.used
        self._mem_v2 = nvml.const("nvmlMemory_v2")

    def read(self, t: float | None = None) -> dict:
        nvml, h, i = self.nvml, self.h, self.index
        g = lambda field, fn, *a: nvml.get(field, fn, h, *a, gpu=i)  # noqa: E731
        s: dict = {"index": i, "t": time.monotonic() if t is None else t}
        util = g("util", "nvmlDeviceGetUtilizationRates")
        s["util_gpu_pct"] = float(util.gpu) if util else None
        s["util_mem_pct"] = float(util.memory) if util else None
        gpm = self.gpm.read() if self.gpm else None
        for name in GPM_METRICS:
            s[name] = gpm.get(name) if gpm else None
        if gpm is None and self.gpm is None and self._n % self.process_every == 0:
            # No GPM: NVML's own PCIe counter (each call blocks ~20 ms, so only now and then).
            tx = g("pcie_tx", "nvmlDeviceGetPcieThroughput", 0)
            rx = g("pcie_rx", "nvmlDeviceGetPcieThroughput", 1)
            s["pcie_tx_bps"] = tx * 1024.0 if tx is not None else None
            s["pcie_rx_bps"] = rx * 1024.0 if rx is not None else None
        if self.nvlink is not None:  # no GPM: NVLink traffic from NVML's cumulative counters
            s["nvlink_rx_bps"], s["nvlink_tx_bps"] = self.nvlink.read(s["t"])
        s["sm_clock_mhz"] = g("sm_clock", "nvmlDeviceGetClockInfo", self._c_sm)
        s["mem_clock_mhz"] = g("mem_clock", "nvmlDeviceGetClockInfo", self._c_mem)
        s["clock_reasons"] = decode_clock_reasons(g("clock_reasons", "nvmlDeviceGetCurrentClocksEventReasons"))
        mw = g("power", "nvmlDeviceGetPowerUsage")
        s["power_w"] = mw / 1000.0 if mw is not None else None
        s["temp_c"] = g("temperature", "nvmlDeviceGetTemperature", self._t_gpu)
        mem = self._memory(g)
        s["mem_used_bytes"] = int(mem.used) if mem else None
        s["mem_total_bytes"] = int(mem.total) if mem else None
        s["processes"] = self._processes() if self._n % self.process_every == 0 else None
        if s["processes"]:
            s["process_sm_pct"] = self._process_sm()
        s["lost"] = i in nvml.lost
        self._n += 1
        return s

    def _memory(self, g):
        if self._mem_v2:
            mem = g("memory", "nvmlDeviceGetMemoryInfo", self._mem_v2)
            if mem is not None:
                return mem
            self._mem_v2 = None  # an older driver: v1, whose "used" includes the reserved memory
        return g("memory_v1", "nvmlDeviceGetMemoryInfo")

    def _processes(self) -> list[dict] | None:
        procs = self.nvml.get("processes", "nvmlDeviceGetComputeRunningProcesses", self.h, gpu=self.index)
        if procs is None:
            return None
        out = []
        for p in procs:
            name, user = self._who(p.pid)
            used = getattr(p, "usedGpuMemory", None)
            one = {"pid": int(p.pid), "name": name, "user": user, "pgid": _pgid(int(p.pid)),
                   "gpu_memory_bytes": int(used) if isinstance(used, int) else None}
            job = self.jobs.of_process(one)
            one["job"], one["job_source"] = (job.job, job.source) if job else (None, None)
            out.append(one)
        self.jobs.forget_gone({int(p.pid) for p in procs})
        self.jobs.take_unreadable()  # counted for --export's series (export/jobs.py reads its own)
        return out

    def _process_sm(self) -> dict[str, float] | None:
        """Each process's mean SM utilisation (NVML's per-process samples) since the previous read."""
        got = self.nvml.process_utilization(self.h, self._util_since, gpu=self.index)
        if got is None:
            return None
        per: dict[str, list[float]] = {}
        for x in got:
            per.setdefault(str(x["pid"]), []).append(x["sm_pct"])
            self._util_since = max(self._util_since, x["t_us"])
        return {pid: round(sum(v) / len(v), 1) for pid, v in per.items()}

    def _who(self, pid: int) -> tuple[str | None, str | None]:
        if pid not in self._names:
            try:
                import psutil

                p = psutil.Process(pid)
                self._names[pid] = (p.name(), p.username())
            except Exception:  # another PID namespace (containers), or gone
                name = text(self.nvml.get("process_name", "nvmlSystemGetProcessName", pid))
                self._names[pid] = (os.path.basename(name) if name else None, None)
        return self._names[pid]

    def close(self) -> None:
        if self.gpm:
            self.gpm.close()
