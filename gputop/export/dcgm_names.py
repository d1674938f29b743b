"""The series gputop --export writes in dcgm-exporter's names, from the one DCGM <-> sample table
(``gputop/telemetry/dcgm_fields.py``, which consumer mode reads the other way): name, type, help, conversion.

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

from gputop.telemetry.dcgm_fields import FIELDS, HELP, LABEL_DEVICE, LABEL_GPU, LABEL_MODEL_NAME, LABEL_PCI_BUS_ID, MIB
from gputop.telemetry.sample import fields

# The labels dcgm-exporter puts on every per-GPU series (internal/pkg/collector), in its spelling.
GPU_LABELS = (LABEL_GPU, "UUID", LABEL_PCI_BUS_ID, LABEL_DEVICE, LABEL_MODEL_NAME, "Hostname")
# The label its HPC job mapping adds (internal/pkg/transformation/const.go: hpcJobAttribute).
JOB_LABEL = "hpc_job"
# The rows of telemetry/dcgm_fields.FIELDS (the one DCGM <-> sample table) that gputop --export writes.
EXPORTED = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
            "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
            "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED")


@dataclass(frozen=True)
class DcgmSeries:
    name: str  # dcgm-exporter's series name
    kind: str  # Prometheus type, as in dcgm-exporter's CSV
    help: str  # dcgm-exporter's help text, verbatim
    fields: tuple[str, ...]  # the sample fields it is computed from
    convert: Callable[..., float]  # sample values (in ``fields`` order, none of them None) -> the series value


def _scaled(scale: float) -> Callable[[float], float]:
    """sample value -> DCGM value (FIELDS: sample = dcgm * scale); framebuffer MiB are whole, as DCGM's."""
    if scale == MIB:
        return lambda v: float(int(v) // MIB)
    return lambda v: float(v) / scale


def _free_mib(total: float, used: float) -> float:
    return float(max(0, int(total) - int(used)) // MIB)


_ROWS = {name: (field, scale) for name, field, scale, kind in FIELDS if kind == "gauge"}

SERIES: tuple[DcgmSeries, ...] = (
    # NVML's kernel duty cycle: NVML has no graphics-engine-active counter of its own (see the module text)
    DcgmSeries("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
               fields("util_gpu_pct"), _scaled(100.0)),
    *(DcgmSeries(name, "gauge", HELP[name], fields(_ROWS[name][0]), _scaled(_ROWS[name][1])) for name in EXPORTED),
    DcgmSeries("DCGM_FI_DEV_FB_FREE", "gauge", HELP["DCGM_FI_DEV_FB_FREE"],
               fields("mem_total_bytes", "mem_used_bytes"), _free_mib),
)


def value(series: DcgmSeries, sample: dict) -> float | None:
    """The series' value for one sample, or None where a field it needs is n/a."""
    args = [sample.get(f) for f in series.fields]
    if any(a is None for a in args):
        return None
    return series.convert(*args)
