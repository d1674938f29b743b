"""DCGM field names <-> gputop sample fields: the one home of this mapping (plain data, no logic).

Read by ``telemetry/dcgm.py`` (consumer mode: gputop reads a dcgm-exporter's ``/metrics``) and meant for the
exporter (the reverse direction). Names and units as NVIDIA's dcgm-exporter publishes them
(``etc/default-counters.csv``, ``etc/dcp-metrics-included.csv``; the DCGM_FI_PROF_* ids 1001-1016 from
DCGM's ``dcgm_fields.h``):

* ``DCGM_FI_PROF_*`` activity fields are ratios 0-1 of peak: sample % = value * 100;
* ``DCGM_FI_PROF_PCIE_*_BYTES`` / ``NVLINK_*_BYTES`` are rates in bytes/s (a gauge, despite the name);
* ``DCGM_FI_DEV_FB_*`` are MiB; ``DCGM_FI_DEV_GPU_UTIL`` / ``MEM_COPY_UTIL`` are already %; power W,
  temperature C, clocks MHz;
* ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` is NVML's clocks-event bitmask (``sample.CLOCK_REASONS`` decodes it).

Each row of ``FIELDS`` is ``(dcgm_name, sample_field, scale, kind)``: ``sample value = dcgm value * scale``
(so ``dcgm value = sample value / scale``); ``kind`` is ``"gauge"`` (a number) or ``"bitmask"``
(``clock_reasons``: a list of words in the sample, an integer mask in DCGM). dcgm-exporter publishes every
row as a Prometheus gauge.
"""

from __future__ import annotations

from gputop.telemetry.sample import fields

MIB = 1024 * 1024
RATIO = 100.0  # DCGM's 0-1 ratio -> gputop's %

FIELDS: tuple[tuple[str, str, float, str], ...] = (
    ("DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "hmma_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "imma_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "dfma_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_bw_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "fp32_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "fp16_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PIPE_INT_ACTIVE", "int_pct", RATIO, "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bps", 1.0, "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bps", 1.0, "gauge"),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_bps", 1.0, "gauge"),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "nvlink_rx_bps", 1.0, "gauge"),
    ("DCGM_FI_DEV_GPU_UTIL", "util_gpu_pct", 1.0, "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "util_mem_pct", 1.0, "gauge"),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", 1.0, "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", 1.0, "gauge"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "clock_reasons", 1.0, "bitmask"),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", 1.0, "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "temp_c", 1.0, "gauge"),
    ("DCGM_FI_DEV_FB_USED", "mem_used_bytes", MIB, "gauge"),
)
fields(*(row[1] for row in FIELDS))  # fails at import if a sample field is renamed

# mem_total_bytes has no DCGM field of its own: it is the sum of these (MiB), as NVML's v2 memory info
# (total = used + free + reserved). An exporter without the reserved part publishes FREE = total - used.
MEM_TOTAL_PARTS: tuple[str, ...] = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
MEM_TOTAL_SCALE = MIB

# Sample fields that are integers in a sample (NVML gives them as integers).
INTEGER_FIELDS = frozenset({"sm_clock_mhz", "mem_clock_mhz", "temp_c", "mem_used_bytes", "mem_total_bytes"})

# dcgm-exporter's labels on a GPU's series (internal/pkg/rendermetrics/render_metrics.go) -> static keys.
# The UUID label is "uuid" with --use-old-namespace; the host label is "Hostname" in released versions
# (4.x) and "hostname" after dcgm-exporter #655 (May 2026): both are read.
LABEL_GPU = "gpu"
LABELS_UUID = ("UUID", "uuid")
LABEL_PCI_BUS_ID = "pci_bus_id"
LABEL_DEVICE = "device"
LABEL_MODEL_NAME = "modelName"
LABELS_HOSTNAME = ("Hostname", "hostname")
LABEL_DRIVER_VERSION = "DCGM_FI_DRIVER_VERSION"  # a "label" row in the counters CSV
LABELS_MIG = ("GPU_I_PROFILE", "GPU_I_ID")

# Values at or above these are DCGM's "blank" sentinels (DCGM_INT64_BLANK, DCGM_FP64_BLANK): no value.
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0

# dcgm-exporter's HELP text for each field above (from its CSVs where it has the field; else DCGM's).
HELP = {
    "DCGM_FI_PROF_SM_ACTIVE": "The ratio of cycles an SM has at least 1 warp assigned.",
    "DCGM_FI_PROF_SM_OCCUPANCY": "The ratio of number of warps resident on an SM.",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "Ratio of cycles the tensor (HMMA) pipe is active.",
    "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE": "Ratio of cycles the HMMA tensor pipe is active.",
    "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE": "Ratio of cycles the IMMA tensor pipe is active.",
    "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE": "Ratio of cycles the tensor (DFMA) pipe is active.",
    "DCGM_FI_PROF_DRAM_ACTIVE": "Ratio of cycles the device memory interface is active sending or receiving data.",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "Ratio of cycles the fp64 pipes are active.",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "Ratio of cycles the fp32 pipes are active.",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "Ratio of cycles the fp16 pipes are active.",
    "DCGM_FI_PROF_PIPE_INT_ACTIVE": "Ratio of cycles the integer pipe is active.",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "The rate of data transmitted over the PCIe bus - including both protocol headers "
                                  "and data payloads - in bytes per second.",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "The rate of data received over the PCIe bus - including both protocol headers "
                                  "and data payloads - in bytes per second.",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "The rate of data transmitted over NVLink, header and payload, in bytes per second.",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "The rate of data received over NVLink, header and payload, in bytes per second.",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "Memory utilization (in %).",
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency (in MHz).",
    "DCGM_FI_DEV_MEM_CLOCK": "Memory clock frequency (in MHz).",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "Current clock event reasons (bitmask of nvmlClocksEventReason*).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_RESERVED": "Framebuffer memory reserved (in MiB).",
}
