"""Static facts of each GPU, read once through the NVML choke point.

Every value is a plain JSON type; ``None`` means n/a (the reason is in ``Nvml.na_reasons``).
"""

from __future__ import annotations

from gputop.telemetry.nvml import Nvml, text

# CUDA cores per SM by compute capability (CUDA C Programming Guide, "Arithmetic Instructions"
# throughput table: FP32 lanes per SM). Used only when NVML cannot count the cores itself.
FP32_LANES_PER_SM = {
    (6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
    (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128,
}


def device_count(nvml: Nvml) -> int:
    return nvml.get("device_count", "nvmlDeviceGetCount") or 0


def handle(nvml: Nvml, index: int):
    return nvml.get(f"handle[{index}]", "nvmlDeviceGetHandleByIndex", index, gpu=index)


def read_uuid(nvml: Nvml, index: int) -> str | None:
    """GPU ``index``'s UUID (for CUDA_VISIBLE_DEVICES), or None when NVML cannot say."""
    return text(nvml.get("uuid", "nvmlDeviceGetUUID", handle(nvml, index), gpu=index))


def read_static(nvml: Nvml, index: int) -> dict:
    """Everything about GPU ``index`` that does not change while gputop runs."""
    h = handle(nvml, index)
    g = lambda field, fn, *a: nvml.get(field, fn, h, *a, gpu=index)  # noqa: E731

    cc = g("compute_capability", "nvmlDeviceGetCudaComputeCapability")
    cc = list(cc) if cc else None
    mem = g("memory_total", "nvmlDeviceGetMemoryInfo")
    pci = g("pci_bus_id", "nvmlDeviceGetPciInfo")
    mig = g("mig_mode", "nvmlDeviceGetMigMode")
    power_limit = g("power_limit", "nvmlDeviceGetEnforcedPowerLimit")
    gpm = g("gpm_supported", "nvmlGpmQueryDeviceSupport")
    cores = g("cuda_cores", "nvmlDeviceGetNumGpuCores")
    attrs = g("device_attributes", "nvmlDeviceGetAttributes")
    sm_count = getattr(attrs, "multiprocessorCount", None) if attrs else None
    if not sm_count and cores and cc and tuple(cc) in FP32_LANES_PER_SM:
        sm_count = cores // FP32_LANES_PER_SM[tuple(cc)]
    clk = lambda field, name: g(field, "nvmlDeviceGetMaxClockInfo", nvml.const(name))  # noqa: E731
    cuda = nvml.get("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")
    pcie_max_gen = g("pcie_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration") or g(
        "pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"
    )
    info = {
        "index": index,
        "name": text(g("name", "nvmlDeviceGetName")),
        "uuid": text(g("uuid", "nvmlDeviceGetUUID")),
        "pci_bus_id": text(pci.busId) if pci else None,
        "driver_version": text(nvml.get("driver_version", "nvmlSystemGetDriverVersion")),
        "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
        "nvml_version": text(nvml.get("nvml_version", "nvmlSystemGetNVMLVersion")),
        "compute_capability": cc,
        "architecture": _arch_name(cc),
        "sm_count": sm_count,
        "cuda_cores": cores,
        "memory_bus_width_bits": g("memory_bus_width", "nvmlDeviceGetMemoryBusWidth"),
        "max_sm_clock_mhz": clk("max_sm_clock", "NVML_CLOCK_SM"),
        "max_mem_clock_mhz": clk("max_mem_clock", "NVML_CLOCK_MEM"),
        "max_graphics_clock_mhz": clk("max_graphics_clock", "NVML_CLOCK_GRAPHICS"),
        "memory_total_bytes": int(mem.total) if mem else None,
        "pcie_max_gen": pcie_max_gen,
        "pcie_max_width": g("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
        "pcie_cur_gen": g("pcie_cur_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
        "pcie_cur_width": g("pcie_cur_width", "nvmlDeviceGetCurrPcieLinkWidth"),
        "power_limit_w": power_limit / 1000.0 if power_limit else None,
        "mig_mode": bool(mig[0]) if mig else None,
        "gpm_supported": bool(gpm.isSupportedDevice) if gpm is not None else False,
        **read_nvlink(nvml, index),
    }
    return info


def _arch_name(cc: list | None) -> str | None:
    if not cc:
        return None
    major, minor = cc
    names = {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}
    if (major, minor) == (7, 5):
        return "Turing"
    if (major, minor) == (8, 9):
        return "Ada Lovelace"
    return names.get(major)


# NVML field ids (nvml.h NVML_FI_DEV_*), for nvmlDeviceGetFieldValues.
FI_NVLINK_SPEED_MBPS_COMMON = 90  # the common speed of the active links, MB/s per direction
FI_NVLINK_LINK_COUNT = 91  # the NVLinks the device has
FI_NVLINK_GET_SPEED = 164  # one link's speed, MB/s (scope id = the link)
P2P_CAPS_INDEX_NVLINK = 2  # nvmlDeviceGetP2PStatus: can the two GPUs talk over NVLink
NVLINK_MAX_LINKS = 18  # the most links a GPU has had so far (Hopper, Blackwell)


def read_nvlink(nvml: Nvml, index: int) -> dict:
    """GPU ``index``'s NVLinks: how many are up and their common speed (MB/s per direction); where NVML says the
    common speed is NotSupported (driver 580 on H100/H200), the slowest active link's own speed field
    (``nvlink_link_speed_mbps``) and the links' NVLink version (``nvlink_version``: NVML's enum, 6 = NVLink 4).
    ``gputop.analysis.links.nvlink_peak`` turns these into the peak, saying which gave it. None = n/a."""
    h = handle(nvml, index)
    vals = nvml.field_values("nvlink_fields", h, [FI_NVLINK_LINK_COUNT, FI_NVLINK_SPEED_MBPS_COMMON], gpu=index)
    count, speed = vals if vals else (None, None)
    active = None
    up: list[int] = []
    for link in range(count if isinstance(count, int) and count > 0 else NVLINK_MAX_LINKS):
        state = nvml.get("nvlink_state", "nvmlDeviceGetNvLinkState", h, link, gpu=index)
        if state is None:
            break
        active = (active or 0) + (1 if state else 0)
        if state:
            up.append(link)
    out = {"nvlink_links": count, "nvlink_links_active": active, "nvlink_speed_mbps": speed}
    if speed is None and up:  # the common field is n/a: each link's own speed, and the links' version
        speeds = nvml.field_values("nvlink_link_speed", h, [(FI_NVLINK_GET_SPEED, link) for link in up], gpu=index)
        speeds = [v for v in speeds or [] if isinstance(v, (int, float)) and v > 0]
        out["nvlink_link_speed_mbps"] = min(speeds) if speeds else None
        out["nvlink_version"] = nvml.get("nvlink_version", "nvmlDeviceGetNvLinkVersion", h, up[0], gpu=index)
    return out


def read_link(nvml: Nvml, a: int, b: int) -> dict:
    """What joins GPUs ``a`` and ``b`` (NVML indices): ``kind`` "nvlink" when NVML says peer-to-peer over
    NVLink works between them, else "pcie"; with the facts each kind's peak needs (of GPU ``a``)."""
    ha, hb = handle(nvml, a), handle(nvml, b)
    p2p = nvml.get("p2p_nvlink", "nvmlDeviceGetP2PStatus", ha, hb, nvml.const("NVML_P2P_CAPS_INDEX_NVLINK",
                                                                                P2P_CAPS_INDEX_NVLINK), gpu=a)
    g = lambda field, fn: nvml.get(field, fn, ha, gpu=a)  # noqa: E731
    facts = {"gpus": [a, b], "kind": "nvlink" if p2p == 0 else "pcie", "p2p_nvlink_status": p2p,
             **read_nvlink(nvml, a),
             "pcie_max_gen": g("pcie_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
             "pcie_cur_gen": g("pcie_cur_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
             "pcie_cur_width": g("pcie_cur_width", "nvmlDeviceGetCurrPcieLinkWidth"),
             "pcie_max_width": g("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth")}
    if facts["kind"] == "nvlink" and not facts["nvlink_links_active"]:
        facts["kind"] = "pcie"  # P2P says NVLink but no link is up: the traffic takes PCIe
    return facts
