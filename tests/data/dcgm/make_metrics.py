"""Write the dcgm-exporter /metrics texts in this folder from one tick of gputop's recorded H200 trace.

    PYTHONPATH=. python tests/data/dcgm/make_metrics.py

The format is dcgm-exporter's own (internal/pkg/rendermetrics/render_metrics.go in released 4.x: HELP and
TYPE lines from the counters CSV, labels gpu, UUID, pci_bus_id, device, modelName, Hostname, then the CSV's
"label" fields; int64 fields as %d, double fields as %f). See README.md here.
"""

from __future__ import annotations

from pathlib import Path

from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.trace import demo_trace_path, read_trace, segments

HERE = Path(__file__).parent

# etc/default-counters.csv of NVIDIA/dcgm-exporter (commit d5e5f51), its uncommented rows, in order.
DEFAULT_COUNTERS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
]
# The same CSV's DCP rows that ship commented out ("# DCGM_FI_PROF_SM_ACTIVE, ..."): a node that wants
# gputop's full classification uncomments them (docs/fleet.md).
DCP_COMMENTED = [
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active."),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active."),
]
DOUBLE = {name for name, *_ in DEFAULT_COUNTERS + DCP_COMMENTED if name.startswith("DCGM_FI_PROF_")
          and not name.endswith("_BYTES")} | {"DCGM_FI_DEV_POWER_USAGE"}


def dcgm_values(sample: dict) -> dict[str, float]:
    """The DCGM value of each field the trace's sample has (the reverse of dcgm_fields.FIELDS)."""
    out = {}
    for name, field, scale, kind in F.FIELDS:
        v = sample.get(field)
        if v is not None and kind == "gauge":
            out[name] = v / scale
    if sample.get("mem_total_bytes") is not None and sample.get("mem_used_bytes") is not None:
        out["DCGM_FI_DEV_FB_FREE"] = (sample["mem_total_bytes"] - sample["mem_used_bytes"]) / F.MIB
    return out


def render(counters, static: dict, hostname: str, values: dict) -> str:
    labels = (f'gpu="{static["index"]}",UUID="{static["uuid"]}",pci_bus_id="{static["pci_bus_id"]}",'
              f'device="nvidia{static["index"]}",modelName="{static["name"]}",Hostname="{hostname}",'
              f'DCGM_FI_DRIVER_VERSION="{static["driver_version"]}"')
    out = []
    for name, prom_type, help_text in counters:
        if name not in values:  # the trace has no value for it: left out, as dcgm-exporter leaves blanks out
            continue
        v = values[name]
        text = f"{v:f}" if name in DOUBLE else f"{int(round(v))}"
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {prom_type}", f"{name}{{{labels}}} {text}"]
    return "\n".join(out) + "\n"


def middle_tick(rows, phase: str) -> dict:
    for label, ticks in segments(rows):
        if label and label.startswith(phase):
            gpm = [t for t in ticks if t["gpus"][0].get("sm_active_pct") is not None]
            return gpm[len(gpm) // 2]
    raise SystemExit(f"no phase {phase!r} in the trace")


def main() -> None:
    header, rows = read_trace(demo_trace_path())
    static, host = header["devices"][0], header["hostname"]
    files = [("h200_matmul_bf16.prom", "matmul bf16", DEFAULT_COUNTERS + DCP_COMMENTED),
             ("h200_device_copy.prom", "device copy", DEFAULT_COUNTERS + DCP_COMMENTED),
             ("h200_matmul_bf16_default_counters.prom", "matmul bf16", DEFAULT_COUNTERS)]
    for fname, phase, counters in files:
        tick = middle_tick(rows, phase)
        (HERE / fname).write_text(render(counters, static, host, dcgm_values(tick["gpus"][0])))
        print(f"{fname}: phase {phase!r}, tick t={tick['t']}")


if __name__ == "__main__":
    main()
