"""A GPU's health as NVML and the kernel log say it, read once (``gputop --doctor``'s passive checks).

Every value is a plain JSON type and ``None`` means n/a (the reason stays in ``Nvml.na_reasons``, and
:func:`read_health` copies the reasons of its own fields into ``na``). What is read, per GPU:

* ECC: mode, and the volatile (since the driver loaded) and aggregate (lifetime) corrected/uncorrected counts;
* memory repair: remapped rows (Ampere and newer: correctable, uncorrectable, a remap pending a reset, a remap that
  failed) and retired pages (older GPUs: single- and double-bit, pending);
* PCIe: the link's current generation and width against the card's and the slot's maxima (a GPU lowers its link
  at idle to save power: the doctor judges the current link under load), the replay counter (link-level retries);
* NVLink: each link's state and its error counters (replay, recovery, CRC), where the GPU has NVLinks;
* clocks at idle: the clock-event reasons (a GPU held down while idle: a thermal or power brake, a lowered
  application clock), temperature, power draw against the enforced and the default limits;
* persistence mode, MIG mode, and the processes holding a CUDA context (someone else's job on the GPU);
* XID errors since boot, from the kernel log ("NVRM: Xid (PCI:0000:18:00): 79, ...") where it can be read:
  NVML only reports XIDs that happen while an event set listens.
"""

from __future__ import annotations

import re
import subprocess

from gputop.telemetry.nvml import Nvml, text
from gputop.telemetry.sample import decode_clock_reasons
from gputop.telemetry.static import handle

NVLINK_MAX_LINKS = 18
# nvmlNvLinkErrorCounter_t (nvml.h): the counters nvmlDeviceGetNvLinkErrorCounter reads
NVLINK_ERRORS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, pid=(\S+?))?(?:, (?:name=\S+, )?(.*))?$")
KERNEL_LOG_TIMEOUT_S = 5.0


def _bus(bus_id: str | None) -> str | None:
    """A PCI bus id without its domain's leading zeros, lower case: NVML says 00000000:18:00.0, the kernel
    0000:18:00 (no function)."""
    if not bus_id:
        return None
    parts = bus_id.lower().split(":")
    if len(parts) == 3:
        parts = parts[1:]
    return ":".join(parts).split(".")[0]


def read_health(nvml: Nvml, index: int) -> dict:
    """The passive health facts of GPU ``index`` (module doc); ``na``: the fields NVML could not give, and why."""
    h = handle(nvml, index)
    before = set(nvml.na_reasons)

    def g(field, fn, *a):
        return nvml.get(field, fn, h, *a, gpu=index)

    const = nvml.const
    ecc_mode = g("ecc_mode", "nvmlDeviceGetEccMode")

    def ecc(kind, counter):
        return g(f"ecc_{kind}_{counter}", "nvmlDeviceGetTotalEccErrors",
                 const(f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", 0 if kind == "corrected" else 1),
                 const(f"NVML_{counter.upper()}_ECC", 0 if counter == "volatile" else 1))

    remap = g("remapped_rows", "nvmlDeviceGetRemappedRows")  # (correctable, uncorrectable, pending, failure)
    retired = {}
    for cause, key in (("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", "single_bit"),
                       ("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", "double_bit")):
        pages = g(f"retired_pages_{key}", "nvmlDeviceGetRetiredPages", const(cause, 0 if key == "single_bit" else 1))
        retired[key] = len(pages) if pages is not None else None
    pending = g("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")
    links = []
    for link in range(NVLINK_MAX_LINKS):
        state = nvml.get(f"nvlink_state[{link}]", "nvmlDeviceGetNvLinkState", h, link, gpu=index)
        if state is None:
            if link == 0:
                break  # no NVLinks (or NVML cannot say): the reason is kept for link 0
            continue
        errors = {name: nvml.get(f"nvlink_error_{name}", "nvmlDeviceGetNvLinkErrorCounter", h, link, code,
                                 gpu=index) for name, code in NVLINK_ERRORS.items()}
        links.append({"link": link, "active": bool(state), "errors": errors})
    procs = g("processes", "nvmlDeviceGetComputeRunningProcesses")
    reasons = g("clock_reasons", "nvmlDeviceGetCurrentClocksEventReasons")
    power = g("power", "nvmlDeviceGetPowerUsage")
    limit = g("power_limit", "nvmlDeviceGetEnforcedPowerLimit")
    default = g("power_default_limit", "nvmlDeviceGetPowerManagementDefaultLimit")
    persistence = g("persistence_mode", "nvmlDeviceGetPersistenceMode")
    mig = g("mig_mode", "nvmlDeviceGetMigMode")
    pci = g("pci_bus_id", "nvmlDeviceGetPciInfo")
    out = {
        "index": index,
        "name": text(g("name", "nvmlDeviceGetName")),
        "uuid": text(g("uuid", "nvmlDeviceGetUUID")),
        "serial": text(g("serial", "nvmlDeviceGetSerial")),
        "pci_bus_id": text(pci.busId) if pci else None,
        "driver_version": text(nvml.get("driver_version", "nvmlSystemGetDriverVersion")),
        "cuda_driver_version": _cuda(nvml.get("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")),
        "ecc_enabled": bool(ecc_mode[0]) if ecc_mode else None,
        "ecc_pending": bool(ecc_mode[1]) if ecc_mode else None,
        "ecc": {f"{counter}_{kind}": ecc(kind, counter) for counter in ("volatile", "aggregate")
                for kind in ("corrected", "uncorrected")},
        "remapped_rows": ({"correctable": int(remap[0]), "uncorrectable": int(remap[1]),
                           "pending": bool(remap[2]), "failure": bool(remap[3])} if remap else None),
        "retired_pages": {**retired, "pending": bool(pending) if pending is not None else None},
        "pcie": {"gen": g("pcie_cur_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
                 "width": g("pcie_cur_width", "nvmlDeviceGetCurrPcieLinkWidth"),
                 "max_gen": g("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
                 "gpu_max_gen": g("pcie_gpu_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
                 "max_width": g("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
                 "replay_counter": g("pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter")},
        "nvlinks": links,
        "clock_reasons_idle": decode_clock_reasons(reasons) if reasons is not None else None,
        "sm_clock_mhz": g("sm_clock", "nvmlDeviceGetClockInfo", const("NVML_CLOCK_SM", 1)),
        "max_sm_clock_mhz": g("max_sm_clock", "nvmlDeviceGetMaxClockInfo", const("NVML_CLOCK_SM", 1)),
        "temperature_c": g("temperature", "nvmlDeviceGetTemperature", const("NVML_TEMPERATURE_GPU", 0)),
        "power_w": power / 1000.0 if power is not None else None,
        "power_limit_w": limit / 1000.0 if limit else None,
        "power_default_limit_w": default / 1000.0 if default else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "mig_enabled": bool(mig[0]) if mig else None,
        "processes": ([{"pid": int(p.pid), "used_bytes": _used(p)} for p in procs] if procs is not None else None),
    }
    out["na"] = {k: v for k, v in nvml.na_reasons.items() if k not in before}
    return out


def _cuda(v) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


def _used(p) -> int | None:
    v = getattr(p, "usedGpuMemory", None)
    return int(v) if isinstance(v, int) and v >= 0 and v < (1 << 63) else None


def read_kernel_xids(bus_ids: list[str | None], lines: list[str] | None = None) -> dict:
    """XID errors since boot by GPU position ({"by_gpu": {i: [{"xid", "pid", "text"}]}, "readable", "why"}), from
    the kernel log (``dmesg``; ``lines`` given: those). A log that cannot be read (no permission:
    kernel.dmesg_restrict, a container) is said, not guessed."""
    why = None
    if lines is None:
        try:
            got = subprocess.run(["dmesg", "--notime"], capture_output=True, text=True, errors="replace",
                                 timeout=KERNEL_LOG_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"readable": False, "why": f"the kernel log could not be read: {exc}", "by_gpu": {}}
        if got.returncode != 0:
            why = " ".join(got.stderr.split())[:160] or f"dmesg exited {got.returncode}"
            return {"readable": False, "why": f"the kernel log could not be read ({why}): run as root, or "
                    "sysctl kernel.dmesg_restrict=0", "by_gpu": {}}
        lines = got.stdout.splitlines()
    wanted = {_bus(b): i for i, b in enumerate(bus_ids) if b}
    by_gpu: dict[int, list[dict]] = {}
    for line in lines:
        m = XID_LINE.search(line.strip())
        if not m:
            continue
        pos = wanted.get(_bus(m.group(1)))
        if pos is None:
            continue
        by_gpu.setdefault(pos, []).append({"xid": int(m.group(2)), "pid": m.group(3),
                                           "text": (m.group(4) or "")[:160]})
    return {"readable": True, "why": None, "by_gpu": by_gpu}
