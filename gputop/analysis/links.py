"""The NVLink peak of a GPU, always, and where the number came from.

NVML's common speed field (``NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON``) reads NotSupported on some drivers (580 on
H100 and H200, 2026-11). Then, in order:

1. each link's speed field (``NVML_FI_DEV_NVLINK_GET_SPEED``, scope = the link): 26562 MB/s a link on an H100 (the
   link's signalling rate, a little over its payload rate);
2. the NVLink version of the links (``nvmlDeviceGetNvLinkVersion``, an enum: 6 = NVLink 4, 7 = NVLink 5) with the
   generation's payload rate per link per direction;
3. for a trace recorded before gputop read either (its header has the active links but no speed): the generation
   the GPU's architecture ships with.

The payload rates are NVIDIA's published totals per GPU, both directions, divided by the links and by 2: NVLink 1
(P100) 160 GB/s over 4 links = 20 GB/s a link a direction; NVLink 2 (V100) 300 GB/s over 6 = 25; NVLink 3 (A100)
600 GB/s over 12 = 25; NVLink 4 (H100, H200) 900 GB/s over 18 = 25; NVLink 5 (B200) 1.8 TB/s over 18 = 50.

Pure: reads the static facts of ``gputop.telemetry.static.read_nvlink``. The classifier's peaks
(:func:`gputop.analysis.peaks.compute_peaks`), the allreduce workload's link peak
(:func:`link_peak`, between two GPUs: NVLink or PCIe), ``--once`` and ``--export`` all come here.
"""

from __future__ import annotations


# nvmlDeviceGetNvLinkVersion's enum (nvml.h nvmlNvlinkVersion_t) -> the NVLink generation
NVML_NVLINK_VERSION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}
GEN_NAME = {1: "NVLink 1", 2: "NVLink 2", 3: "NVLink 3", 4: "NVLink 4", 5: "NVLink 5"}
# payload GB/s per link per direction (NVIDIA's published per-GPU totals / links / 2)
GEN_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# PCIe per-lane transfer rate (GT/s) and line-code efficiency by generation: 8b/10b for gen 1-2,
# 128b/130b for gen 3-5, gen 6 flit mode (242 of every 256 bytes are TLP/DLLP; 8 B CRC + 6 B FEC).
PCIE_GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
ARCH_GEN = {"Pascal": 1, "Volta": 2, "Ampere": 3, "Hopper": 4, "Blackwell": 5}


def _pos(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def generation(facts: dict) -> int | None:
    """The NVLink generation NVML reported (``nvlink_version``, its enum), else None."""
    v = facts.get("nvlink_version")
    return NVML_NVLINK_VERSION.get(v) if isinstance(v, int) and not isinstance(v, bool) else None


def nvlink_peak(facts: dict | None) -> tuple[float | None, str | None]:
    """(bytes/s per direction, source) of a GPU's NVLinks: the active links times a link's speed from the first
    source that gives one (module doc); (None, None) without active links."""
    facts = facts or {}
    links = _pos(facts.get("nvlink_links_active"))
    if not links:
        return None, None
    n = int(links)
    common = _pos(facts.get("nvlink_speed_mbps"))
    if common:
        return n * common * 1e6, f"{n} NVLinks x {common / 1000:.1f} GB/s (NVML common speed)"
    per_link = _pos(facts.get("nvlink_link_speed_mbps"))
    if per_link:
        return n * per_link * 1e6, f"{n} NVLinks x {per_link / 1000:.1f} GB/s (NVML per-link speed)"
    gen = generation(facts)
    if gen in GEN_GBPS_PER_LINK:
        rate = GEN_GBPS_PER_LINK[gen]
        return n * rate * 1e9, f"{n} NVLinks x {rate:.0f} GB/s ({GEN_NAME[gen]}, NVML's NVLink version)"
    gen = ARCH_GEN.get(facts.get("architecture"))
    if gen in GEN_GBPS_PER_LINK:
        rate = GEN_GBPS_PER_LINK[gen]
        return n * rate * 1e9, (f"{n} NVLinks x {rate:.0f} GB/s ({GEN_NAME[gen]}, from the {facts['architecture']} "
                                "architecture: NVML gave no link speed)")
    return None, None


def link_peak(facts: dict | None) -> dict | None:
    """The peak per direction of the link NVML says joins two GPUs (``static.read_link``'s facts), with where it
    came from: NVLink = :func:`nvlink_peak`; PCIe = generation x width, less line encoding."""
    if not facts:
        return None
    out = {"kind": facts.get("kind"), "gpus": facts.get("gpus"), "peak_gbps": None, "source": None}
    peak, source = nvlink_peak(facts)
    if facts.get("kind") == "nvlink" and peak:
        out["peak_gbps"], out["source"] = peak / 1e9, source
    elif facts.get("kind") == "pcie":
        gen = facts.get("pcie_max_gen") or facts.get("pcie_cur_gen")
        width = facts.get("pcie_cur_width") or facts.get("pcie_max_width")
        if gen in PCIE_GT_PER_S and width:
            out["peak_gbps"] = PCIE_GT_PER_S[gen] * PCIE_ENCODING[gen] / 8 * width
            out["source"] = f"PCIe gen {gen} x{width} (NVML)"
    return out
