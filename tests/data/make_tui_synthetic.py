"""Write tests/data/tui_synthetic.jsonl.gz: a small SYNTHETIC trace for TUI development only.

Real traces (gputop/data/demo.jsonl.gz, tests/data/traces/*.jsonl.gz) drive the committed snapshot
tests once they exist; this one only stands in until then. Deterministic (no randomness).
Run: python tests/data/make_tui_synthetic.py
"""

import gzip
import json
import math
from pathlib import Path

STATIC = {
    "index": 0, "name": "NVIDIA H100 80GB HBM3 (synthetic)", "uuid": "GPU-00000000-synthetic",
    "pci_bus_id": "00000000:19:00.0", "driver_version": "570.00.00", "cuda_driver_version": "12.8",
    "nvml_version": "12.570.00", "compute_capability": [9, 0], "architecture": "Hopper", "sm_count": 132,
    "cuda_cores": 16896, "memory_bus_width_bits": 5120, "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 2619,
    "max_graphics_clock_mhz": 1980, "memory_total_bytes": 85520809984, "pcie_max_gen": 5, "pcie_max_width": 16,
    "pcie_cur_gen": 5, "pcie_cur_width": 16, "power_limit_w": 700.0, "mig_mode": False, "gpm_supported": True,
}
PHASES = [(0.0, None), (5.0, "stream (memory-bound)"), (15.0, "fma (compute-bound)"), (25.0, "matmul bf16")]


def sample(t: float, n: int) -> dict:
    w = 0.5 + 0.5 * math.sin(t * 1.3)
    if t < 5:
        sm, occ, dram, tc, util = 0.0, 0.0, 0.0, 0.0, 0.0
    elif t < 15:
        sm, occ, dram, tc, util = 70 + 8 * w, 55 + 5 * w, 85 + 5 * w, 0.0, 100.0
    elif t < 25:
        sm, occ, dram, tc, util = 97 + 2 * w, 45 + 4 * w, 6 + 3 * w, 0.0, 100.0
    else:
        sm, occ, dram, tc, util = 92 + 4 * w, 30 + 3 * w, 35 + 8 * w, 70 + 10 * w, 100.0
    busy = util > 0
    s = {
        "index": 0, "t": round(t, 4), "util_gpu_pct": util, "util_mem_pct": round(dram * 0.9, 1),
        "sm_active_pct": round(sm, 1), "sm_occupancy_pct": round(occ, 1), "int_pct": round(sm * 0.1, 1),
        "tensor_pct": round(tc, 1), "dfma_pct": 0.0, "hmma_pct": round(tc, 1), "imma_pct": 0.0,
        "dram_bw_pct": round(dram, 1), "fp64_pct": 0.0, "fp32_pct": round(sm * 0.6 if 15 <= t < 25 else sm * 0.1, 1),
        "fp16_pct": 0.0, "pcie_tx_bps": 2.0e8 * w, "pcie_rx_bps": 1.2e9 * w if busy else 1.0e6,
        "nvlink_tx_bps": 0.0, "nvlink_rx_bps": 0.0,
        "sm_clock_mhz": 1980 if busy else 345, "mem_clock_mhz": 2619,
        "clock_reasons": (["software power cap"] if t >= 25 else []) if busy else ["idle"],
        "power_w": round(70 + (520 + 120 * w if busy else 0), 1), "temp_c": int(34 + (t / 40) * 20),
        "mem_used_bytes": int(5.2e8 + (3.4e10 if busy else 0)), "mem_total_bytes": STATIC["memory_total_bytes"],
        "processes": None, "lost": False,
    }
    if n % 10 == 0:
        s["processes"] = [{"pid": 4242, "name": "python3", "user": "alice", "gpu_memory_bytes": 34 * 2**30}] if busy else []
    return s


def main() -> None:
    out = Path(__file__).with_name("tui_synthetic.jsonl.gz")
    header = {"type": "header", "format": "gputop-trace", "version": 1, "gputop_version": "0.1.0",
              "recorded_at": "2025-01-01T00:00:00+00:00", "hostname": "synthetic-host", "rate_hz": 10.0,
              "note": "SYNTHETIC trace for TUI development (not a measurement)", "devices": [STATIC]}
    rows = [header]
    marks = list(PHASES[1:])
    for n in range(400):
        t = round(n * 0.1, 4)
        while marks and marks[0][0] <= t:
            rows.append({"type": "mark", "t": t, "label": marks.pop(0)[1]})
        host = {"cpu_pct": 12.5 + (n % 7), "cpu_per_core_pct": [10.0 + (n % 5)] * 8,
                "ram_used_bytes": 16 * 2**30, "ram_total_bytes": 128 * 2**30}
        rows.append({"type": "tick", "t": t, "gpus": [sample(t, n)], "host": host})
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode())
    print(out)


if __name__ == "__main__":
    main()
