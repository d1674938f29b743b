"""The one table from gputop's sample fields to dcgm-exporter's series: name, type, help, unit conversion.

Names, Prometheus types and help texts are dcgm-exporter's own (``etc/default-counters.csv`` and
``etc/dcp-metrics-included.csv``; copies and their commit in ``tests/data/dcgm/``, checked by
``tests/test_export.py``), so dashboards made for dcgm-exporter read these series unchanged.

Units follow dcgm-exporter: the ``DCGM_FI_PROF_*`` activities are ratios 0..1 (gputop's GPM fields are
in %), PCIe in bytes/s, clocks in MHz, power in W, temperature in C, framebuffer memory in MiB, and
``DCGM_FI_DEV_GPU_UTIL`` / ``_MEM_COPY_UTIL`` in % (NVML's duty cycles, as dcgm-exporter reports them).

``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is NVML's kernel duty cycle (``util_gpu_pct`` / 100): NVML has no
graphics-engine-active counter of its own; DCGM's is the same fraction of time measured by the profiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gputop.telemetry.sample import fields

MIB = 1024 * 1024

# The labels dcgm-exporter puts on every per-GPU series (internal/pkg/collector), in its spelling.
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
# The label its HPC job mapping adds (internal/pkg/transformation/const.go: hpcJobAttribute).
JOB_LABEL = "hpc_job"


@dataclass(frozen=True)
class DcgmSeries:
    name: str  # dcgm-exporter's series name
    kind: str  # Prometheus type, as in dcgm-exporter's CSV
    help: str  # dcgm-exporter's help text, verbatim
    fields: tuple[str, ...]  # the sample fields it is computed from
    convert: Callable[..., float]  # sample values (in ``fields`` order, none of them None) -> the series value


def _ratio(pct: float) -> float:
    return pct / 100.0


def _same(v: float) -> float:
    return float(v)


def _mib(b: float) -> float:
    return float(int(b) // MIB)


def _free_mib(total: float, used: float) -> float:
    return float(max(0, int(total) - int(used)) // MIB)


def _prof(name: str, field: str, help_text: str) -> DcgmSeries:
    return DcgmSeries(name, "gauge", help_text, fields(field), _ratio)


SERIES: tuple[DcgmSeries, ...] = (
    # Datacenter profiling (GPM on Hopper and newer): ratios 0..1
    _prof("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "util_gpu_pct", "Ratio of time the graphics engine is active."),
    _prof("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct", "The ratio of cycles an SM has at least 1 warp assigned."),
    _prof("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_pct", "The ratio of number of warps resident on an SM."),
    _prof("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_pct", "Ratio of cycles the tensor (HMMA) pipe is active."),
    _prof("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_pct", "Ratio of cycles the fp64 pipes are active."),
    _prof("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "fp32_pct", "Ratio of cycles the fp32 pipes are active."),
    _prof("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "fp16_pct", "Ratio of cycles the fp16 pipes are active."),
    _prof("DCGM_FI_PROF_DRAM_ACTIVE", "dram_bw_pct",
          "Ratio of cycles the device memory interface is active sending or receiving data."),
    DcgmSeries("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
               "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads "
               "- in bytes per second.", fields("pcie_tx_bps"), _same),
    DcgmSeries("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
               "The rate of data received over the PCIe bus - including both protocol headers and data payloads "
               "- in bytes per second.", fields("pcie_rx_bps"), _same),
    # Device fields
    DcgmSeries("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", fields("sm_clock_mhz"), _same),
    DcgmSeries("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", fields("mem_clock_mhz"), _same),
    DcgmSeries("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", fields("temp_c"), _same),
    DcgmSeries("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", fields("power_w"), _same),
    DcgmSeries("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", fields("util_gpu_pct"), _same),
    DcgmSeries("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", fields("util_mem_pct"), _same),
    DcgmSeries("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", fields("mem_used_bytes"), _mib),
    DcgmSeries("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
               fields("mem_total_bytes", "mem_used_bytes"), _free_mib),
)


def value(series: DcgmSeries, sample: dict) -> float | None:
    """The series' value for one sample, or None where a field it needs is n/a."""
    args = [sample.get(f) for f in series.fields]
    if any(a is None for a in args):
        return None
    return series.convert(*args)
