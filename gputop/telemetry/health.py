"""A GPU's health as NVML and the kernel log say it, read once (``gputop --doctor``'s passive checks).

Every value is a plain JSON type and ``None`` means n/a (the reason stays in ``Nvml.na_reasons``, and
:func:`read_health` copies the reasons of its own fields into ``na``). What is read, per GPU:

* ECC: mode, and the volatile (since the driver loaded) and aggregate (lifetime) corrected/uncorrected counts;
* memory repair: remapped rows (Ampere and newer: correctable, uncorrectable, a remap pending a reset, a remap that
  failed), the remapper's histogram (how many banks have how many spare rows left) and retired pages (older GPUs:
  single- and double-bit, pending);
* PCIe: the link's current generation and width against the card's and the slot's maxima (a GPU lowers its link
  at idle to save power: the doctor judges the link under load, :func:`read_pcie_link`), the replay counter
  (link-level retries);
* NVLink: each link's state and its error counters (replay, recovery, CRC), where the GPU has NVLinks;
* clocks at idle: the clock-event reasons (a GPU held down while idle: a thermal or power brake, a lowered
  application clock), the application clock against its default, temperature and its slowdown / shutdown
  thresholds, power draw against the enforced and the default limits;
* persistence mode, MIG mode, and the processes holding a CUDA context (someone else's job on the GPU);
* XID errors since boot, from the kernel log (``/dev/kmsg``, what ``dmesg`` reads: "NVRM: Xid (PCI:0000:18:00): 79,
  ..."), each with its age: NVML only reports XIDs that happen while an event set listens.
"""

from __future__ import annotations

import errno
import os
import re

from gputop.telemetry.nvml import Nvml, text
from gputop.telemetry.sample import decode_clock_reasons
from gputop.telemetry.static import handle

NVLINK_MAX_LINKS = 18
# nvmlNvLinkErrorCounter_t (nvml.h): the counters nvmlDeviceGetNvLinkErrorCounter reads
NVLINK_ERRORS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
# nvmlTemperatureThresholds_t (nvml.h)
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 1
XID_TEXT = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, pid=(\S+?))?(?:, (?:name=\S+?, )?(.*))?$")
KMSG_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")  # /dev/kmsg: "PRI,SEQ,TS_USEC,FLAGS;MESSAGE"
DMESG_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")  # dmesg's own text: "[  123.456789] MESSAGE"
KMSG = "/dev/kmsg"
CPU_SET_WORDS = 64  # nvmlDeviceGetCpuAffinity: 64 words of 64 bits, 4096 CPUs


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
    """The passive health facts of GPU ``index`` (module doc); ``na``: the fields NVML could not give, and why;
    ``lost``: NVML said GpuIsLost (the GPU fell off the bus)."""
    h = handle(nvml, index)
    before = set(nvml.na_reasons)

    def g(field, fn, *a):
        return nvml.get(field, fn, h, *a, gpu=index)

    const = nvml.const
    ecc_mode = g("ecc_mode", "nvmlDeviceGetEccMode")

    def ecc(kind, counter):
        return g(f"ecc_{counter}_{kind}", "nvmlDeviceGetTotalEccErrors",
                 const(f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", 0 if kind == "corrected" else 1),
                 const(f"NVML_{counter.upper()}_ECC", 0 if counter == "volatile" else 1))

    remap = g("remapped_rows", "nvmlDeviceGetRemappedRows")  # (correctable, uncorrectable, pending, failure)
    hist = g("remap_histogram", "nvmlDeviceGetRowRemapperHistogram")
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
    sm = const("NVML_CLOCK_SM", 1)
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
        "remap_histogram": ({k: int(getattr(hist, k)) for k in ("max", "high", "partial", "low", "none")}
                            if hist is not None else None),
        "retired_pages": {**retired, "pending": bool(pending) if pending is not None else None},
        "pcie": {"gen": g("pcie_cur_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
                 "width": g("pcie_cur_width", "nvmlDeviceGetCurrPcieLinkWidth"),
                 "max_gen": g("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
                 "gpu_max_gen": g("pcie_gpu_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
                 "max_width": g("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
                 "replay_counter": g("pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter")},
        "nvlinks": links,
        "clock_reasons_idle": decode_clock_reasons(reasons) if reasons is not None else None,
        "sm_clock_mhz": g("sm_clock", "nvmlDeviceGetClockInfo", sm),
        "max_sm_clock_mhz": g("max_sm_clock", "nvmlDeviceGetMaxClockInfo", sm),
        "app_sm_clock_mhz": g("app_sm_clock", "nvmlDeviceGetApplicationsClock", sm),
        "default_app_sm_clock_mhz": g("default_app_sm_clock", "nvmlDeviceGetDefaultApplicationsClock", sm),
        "temperature_c": g("temperature", "nvmlDeviceGetTemperature", const("NVML_TEMPERATURE_GPU", 0)),
        "slowdown_temperature_c": g("slowdown_temperature", "nvmlDeviceGetTemperatureThreshold",
                                    const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", THRESHOLD_SLOWDOWN)),
        "shutdown_temperature_c": g("shutdown_temperature", "nvmlDeviceGetTemperatureThreshold",
                                    const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", THRESHOLD_SHUTDOWN)),
        "power_w": power / 1000.0 if power is not None else None,
        "power_limit_w": limit / 1000.0 if limit else None,
        "power_default_limit_w": default / 1000.0 if default else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "mig_enabled": bool(mig[0]) if mig else None,
        "processes": [_process(nvml, p) for p in procs] if procs is not None else None,
    }
    out["lost"] = index in nvml.lost
    out["na"] = {k: v for k, v in nvml.na_reasons.items() if k not in before}
    return out


def read_pcie_link(nvml: Nvml, index: int, h=None) -> tuple[int | None, int | None]:
    """GPU ``index``'s PCIe link now: (generation, width). Read under load it is the link the card trained to."""
    h = handle(nvml, index) if h is None else h
    return (nvml.get("pcie_cur_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h, gpu=index),
            nvml.get("pcie_cur_width", "nvmlDeviceGetCurrPcieLinkWidth", h, gpu=index))


def read_cpu_affinity(nvml: Nvml, index: int) -> list[int] | None:
    """The CPUs closest to GPU ``index`` (its NUMA node's, as NVML says), for pinning a process that copies to and
    from it; None when NVML cannot say."""
    words = nvml.get("cpu_affinity", "nvmlDeviceGetCpuAffinity", handle(nvml, index), CPU_SET_WORDS, gpu=index)
    if words is None:
        return None
    cpus = [w * 64 + bit for w, word in enumerate(list(words)) for bit in range(64) if int(word) >> bit & 1]
    return cpus or None


def _cuda(v) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


def _process(nvml: Nvml, p) -> dict:
    pid = int(p.pid)
    v = getattr(p, "usedGpuMemory", None)
    used = int(v) if isinstance(v, int) and 0 <= v < (1 << 63) else None
    name, user = None, None
    try:
        import psutil

        proc = psutil.Process(pid)
        name, user = proc.name(), proc.username()
    except Exception:  # another PID namespace (a container), or gone
        got = text(nvml.get("process_name", "nvmlSystemGetProcessName", pid))
        name = os.path.basename(got) if got else None
    return {"pid": pid, "name": name, "user": user, "used_bytes": used}


def _uptime_s() -> float | None:
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_kmsg() -> tuple[list[str] | None, str | None]:
    """Every record the kernel's log still holds, or (None, why not)."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except PermissionError:
        return None, (f"the kernel log ({KMSG}) is not readable by this user (kernel.dmesg_restrict): run as "
                      "root, or give CAP_SYSLOG")
    except OSError as exc:
        return None, f"the kernel log ({KMSG}) cannot be opened: {exc.strerror or exc} (a container?)"
    records: list[str] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break  # the end of the log
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while we read: go on with the next
                    continue
                return None, f"the kernel log ({KMSG}) could not be read: {exc.strerror or exc}"
            if not chunk:
                break
            records.append(chunk.decode(errors="replace").rstrip("\n"))
    finally:
        os.close(fd)
    return records, None


def read_kernel_xids(bus_ids: list[str | None], records: list[str] | None = None,
                     uptime_s: float | None = None) -> dict:
    """XID errors since boot by GPU position: ``{"readable", "why", "by_gpu": {i: [{"xid", "pid", "text",
    "age_s"}]}}``, from the kernel log (``/dev/kmsg``; ``records`` given: those, as /dev/kmsg or dmesg writes them;
    ``uptime_s``: now, in seconds since boot). A log that cannot be read (no permission: kernel.dmesg_restrict, a
    container) is said, not guessed."""
    if records is None:
        records, why = _read_kmsg()
        if records is None:
            return {"readable": False, "why": why, "by_gpu": {}}
    now = _uptime_s() if uptime_s is None else uptime_s
    wanted = {_bus(b): i for i, b in enumerate(bus_ids) if b}
    by_gpu: dict[int, list[dict]] = {}
    for record in records:
        record = record.strip("\r\n")
        if not record or record[0].isspace():  # a record's continuation (KEY=VALUE lines)
            continue
        ts, message = None, record
        m = KMSG_RECORD.match(record)
        if m:
            ts, message = int(m.group(1)) / 1e6, m.group(2)
        else:
            m = DMESG_LINE.match(record)
            if m:
                ts, message = float(m.group(1)), m.group(2)
        x = XID_TEXT.search(message.strip())
        if not x:
            continue
        pos = wanted.get(_bus(x.group(1)))
        if pos is None:
            continue
        age = round(now - ts, 1) if ts is not None and now is not None and now >= ts else None
        by_gpu.setdefault(pos, []).append({"xid": int(x.group(2)), "pid": x.group(3),
                                           "text": (x.group(4) or "")[:160], "age_s": age})
    return {"readable": True, "why": None, "by_gpu": by_gpu}
