"""The numbers of a window: every value the classifier's rules look at, which is also a verdict's evidence.

:func:`measure` turns a window of samples of one GPU (and the host dicts of the same ticks) into a flat
dict of named numbers, ``None`` where n/a. Pure: no NVML, no Textual.

Every name is declared once (:class:`Key`: name, unit, meaning; :func:`declare`): here for the numbers
:func:`measure` gives, in a rule's module (gputop/analysis/rules/) for those the rule adds, and in the module that
adds any other (a job's straggler: gputop/analysis/collectives.py; a run that used no GPU:
gputop/session/monitor.py). :class:`Evidence`, the classifier's evidence, refuses a name that is not declared, as a
misspelt sample field fails (gputop.telemetry.sample.fields).
"""

from __future__ import annotations

from typing import NamedTuple

from gputop.analysis import thresholds as T
from gputop.telemetry.sample import GPM_ACTIVITY_FIELDS, POWER_CAP_REASON, THERMAL_REASONS


class Key(NamedTuple):
    """One evidence number: its name (the unit in its suffix), its unit, and what it means."""

    name: str
    unit: str
    meaning: str


KEYS: dict[str, Key] = {}  # every declared evidence name -> its Key


def declare(*keys: Key) -> tuple[Key, ...]:
    """Declare evidence names (each once: a second declaration of a name raises ValueError); returns them."""
    for k in keys:
        if k.name in KEYS and KEYS[k.name] != k:
            raise ValueError(f"evidence {k.name!r} is declared twice")
        KEYS[k.name] = k
    return keys


def undeclared(names) -> list[str]:
    """The names among ``names`` that no module declared."""
    return [n for n in names if n not in KEYS]


class Evidence(dict):
    """A verdict's numbers by declared name (:data:`KEYS`): setting a name no module declared raises KeyError,
    so a misspelt key fails where it is written, not as a number missing from a verdict."""

    __slots__ = ()

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        _check(self)

    def __setitem__(self, key, value):
        _check((key,))
        super().__setitem__(key, value)

    def update(self, *args, **kw):
        more = dict(*args, **kw)
        _check(more)
        super().update(more)

    def setdefault(self, key, default=None):
        _check((key,))
        return super().setdefault(key, default)

    def copy(self) -> "Evidence":
        return Evidence(self)

    def __reduce__(self):
        return Evidence, (dict(self),)


def _check(names) -> None:
    bad = undeclared(names)
    if bad:
        raise KeyError(f"undeclared evidence {', '.join(map(repr, bad))}: declare it "
                       "(gputop.analysis.evidence.declare) in the module that adds it")


def mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None  # a float: the values are numbers (ints, floats)


def field_mean(samples: list[dict], name: str) -> float | None:
    """Mean of one field over the samples that have it (:func:`mean` of ``s.get(name)``, in one pass)."""
    vals = [v for s in samples if (v := s.get(name)) is not None]
    return sum(vals) / len(vals) if vals else None


def number(v) -> float | None:
    if v.__class__ is float:  # the common case, first
        return v
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def is_number(v) -> bool:
    """An int or a float, not a bool (what :func:`number` turns into a float)."""
    return v.__class__ in (float, int) or (isinstance(v, (int, float)) and not isinstance(v, bool))


def rounded(v):
    """A float to 4 significant digits (what a verdict's evidence keeps); anything else as it is."""
    if isinstance(v, float):
        return float(f"{v:.4g}")
    return v


def reason_key(reason: str) -> str:
    """The evidence key of a thermal clock reason's share of busy samples:
    'hardware thermal slowdown' -> 'hardware_thermal_slowdown_sample_fraction'."""
    return reason.replace(" ", "_") + "_sample_fraction"


def split_window(window: list[dict], gpu: int, host) -> tuple[list[dict], list[dict]]:
    """(samples, host dicts) from a window of samples or of whole ticks."""
    if window and isinstance(window[0], dict) and "gpus" in window[0]:
        samples = [t["gpus"][gpu] for t in window if gpu < len(t.get("gpus") or [])]
        hosts = [t.get("host") or {} for t in window]
        return samples, hosts
    if isinstance(host, dict):
        hosts = [host]
    else:
        hosts = [h or {} for h in (host or [])]
    return list(window), hosts


def feeder_cpu(hosts: list[dict], watched_pid) -> float | None:
    """Mean CPU% (100 = one core) of the watched process tree, children included."""
    vals = []
    for h in hosts:
        procs = h.get("procs") or {}
        if watched_pid is not None:
            entry = procs.get(str(watched_pid))
        else:  # a trace or source watching exactly one process: that one
            entry = next(iter(procs.values())) if len(procs) == 1 else None
        if entry and entry.get("cpu_pct") is not None:
            vals.append(entry["cpu_pct"] + (entry.get("children_cpu_pct") or 0.0))
    return mean(vals)


def feeder_pid(hosts: list[dict], watched_pid) -> str | None:
    """The watched pid, or the only process a trace or source watches (as :func:`feeder_cpu`)."""
    if watched_pid is not None:
        return str(watched_pid)
    pids = {k for h in hosts for k in (h.get("procs") or {})}
    return next(iter(pids)) if len(pids) == 1 else None


def feeder_host(hosts: list[dict], pid: str | None, key: str) -> float | None:
    """Mean of one number of the feeding process's (:func:`feeder_pid`) host entry (``busiest_thread_pct``,
    ``children_cpu_pct``)."""
    if pid is None:
        return None
    return mean([number(((h.get("procs") or {}).get(pid) or {}).get(key)) for h in hosts])


def feeder_sm(samples: list[dict], pid: str | None) -> float | None:
    """Mean SM utilisation of the feeding process (:func:`feeder_pid`) itself, from NVML's per-process samples
    (``process_sm_pct``: 0 where it ran no kernel in a read); None where the samples do not carry them."""
    if pid is None:
        return None
    got = [s["process_sm_pct"] for s in samples if isinstance(s.get("process_sm_pct"), dict)]
    if not got:
        return None
    return mean([number(d.get(pid)) or 0.0 for d in got])


def on_gpu_fraction(samples: list[dict], pid: str | None) -> float | None:
    """Share of the samples (with a process list) in which the feeding process (:func:`feeder_pid`) holds a
    CUDA context on this GPU (is in NVML's process list); None: no feeding process or no process lists."""
    if pid is None:
        return None
    listed = [s.get("processes") for s in samples if s.get("processes") is not None]
    if not listed:
        return None
    return sum(1 for ps in listed if any(str(p.get("pid")) == pid for p in ps)) / len(listed)


def held_fraction(samples: list[dict]) -> float | None:
    """Share of the samples (with a process list) in which some process holds a CUDA context on this GPU (is in
    NVML's process list); None: no process lists in the window."""
    listed = [s["processes"] for s in samples if isinstance(s.get("processes"), list)]
    return sum(1 for ps in listed if ps) / len(listed) if listed else None


def busy_elsewhere(window: list[dict], gpu: int, pid: str | None) -> float | None:
    """Share of the ticks in which another GPU that the feeding process (:func:`feeder_pid`) holds is busy
    (None: a window of samples of one GPU, or no feeding process). A process that drives one GPU and merely
    holds another is not host-bound on the idle one."""
    if pid is None or not window or not isinstance(window[0], dict) or "gpus" not in window[0]:
        return None
    hit = 0
    held: dict[int, bool] = {}  # GPU position -> the process was in its last known process list
    for t in window:
        busy = False
        for i, g in enumerate(t.get("gpus") or []):
            if g.get("processes") is not None:  # NVML's process list is read every few ticks: the last one holds
                held[i] = any(str(p.get("pid")) == pid for p in g["processes"])
            busy = busy or (i != gpu and held.get(i, False) and is_busy(g))
        hit += busy
    return hit / len(window)


def is_busy(s: dict) -> bool:
    """A sample in which the GPU did work (for bursts, stretches and busy-only statistics)."""
    u, a = s.get("util_gpu_pct"), s.get("sm_active_pct")
    return (is_number(u) and u >= T.BUSY_UTIL_PCT) or (is_number(a) and a >= T.BUSY_SM_ACTIVE_PCT)


def measure(samples: list[dict], static: dict, peaks: dict, hosts: list[dict] | None = None,
            watched_pid=None) -> dict:
    """Every number the rules look at, as a flat dict (None = n/a). Also the classifier's evidence."""
    samples = [s for s in samples if s and not s.get("lost")]
    hosts = hosts or []
    static, peaks = static or {}, peaks or {}
    ev: dict = {"samples": len(samples)}
    ts = [s["t"] for s in samples if number(s.get("t")) is not None]
    ev["duration_s"] = (max(ts) - min(ts)) if len(ts) > 1 else 0.0
    ev["util_gpu_pct"] = field_mean(samples, "util_gpu_pct")
    ev["util_mem_pct"] = field_mean(samples, "util_mem_pct")
    for name in GPM_ACTIVITY_FIELDS:
        ev[name] = field_mean(samples, name)
    util, sm = ev["util_gpu_pct"], ev["sm_active_pct"]
    ev["sm_active_per_util"] = sm / util if sm is not None and util is not None and util >= 1.0 else None

    flags = [is_busy(s) for s in samples]
    busy = [s for s, f in zip(samples, flags) if f]
    ev["busy_sample_pct"] = 100.0 * len(busy) / len(samples) if samples else None
    ev["bursts"] = sum(1 for i, f in enumerate(flags) if f and (i == 0 or not flags[i - 1]))

    ev["dram_peak_bytes_per_s"] = number(peaks.get("dram_bytes_per_s"))
    dram = ev["dram_bw_pct"]
    ev["dram_bytes_per_s"] = (dram / 100.0 * ev["dram_peak_bytes_per_s"]
                              if dram is not None and ev["dram_peak_bytes_per_s"] else None)

    ev["pcie_rx_bps"] = field_mean(samples, "pcie_rx_bps")
    ev["pcie_tx_bps"] = field_mean(samples, "pcie_tx_bps")
    ev["pcie_link_bytes_per_s"] = number(peaks.get("pcie_bytes_per_s_per_dir"))
    flows = [v for v in (ev["pcie_rx_bps"], ev["pcie_tx_bps"]) if v is not None]
    ev["pcie_link_fraction"] = (max(flows) / ev["pcie_link_bytes_per_s"]
                                if flows and ev["pcie_link_bytes_per_s"] else None)

    clocked = busy or samples
    ev["sm_clock_mhz"] = field_mean(clocked, "sm_clock_mhz")
    ev["max_sm_clock_mhz"] = number(static.get("max_sm_clock_mhz"))
    ev["sm_clock_ratio"] = (ev["sm_clock_mhz"] / ev["max_sm_clock_mhz"]
                            if ev["sm_clock_mhz"] is not None and ev["max_sm_clock_mhz"] else None)
    reasoned = [s for s in busy if s.get("clock_reasons") is not None]
    ev["busy_samples_with_reasons"] = len(reasoned)

    def share(hit) -> float | None:
        return sum(1 for s in reasoned if hit(s["clock_reasons"])) / len(reasoned) if reasoned else None

    ev["thermal_sample_fraction"] = share(lambda rs: bool(set(rs) & set(THERMAL_REASONS)))
    ev["power_cap_sample_fraction"] = share(lambda rs: POWER_CAP_REASON in rs)
    for reason in THERMAL_REASONS:
        ev[reason_key(reason)] = share(lambda rs, r=reason: r in rs)

    ev["power_w"] = field_mean(samples, "power_w")
    ev["power_limit_w"] = number(static.get("power_limit_w"))
    ev["power_fraction"] = (ev["power_w"] / ev["power_limit_w"]
                            if ev["power_w"] is not None and ev["power_limit_w"] else None)

    fracs = []
    total = None
    for s in samples:
        t = number(s.get("mem_total_bytes")) or number(static.get("memory_total_bytes"))
        u = number(s.get("mem_used_bytes"))
        if t and u is not None:
            fracs.append(u / t)
            total = t
    ev["mem_total_bytes"] = total
    ev["mem_used_fraction"] = mean(fracs)
    ev["mem_used_max_fraction"] = max(fracs) if fracs else None

    ev["feeder_cpu_pct"] = feeder_cpu(hosts, watched_pid)
    ev["gpu_idle_pct"] = 100.0 - ev["util_gpu_pct"] if ev["util_gpu_pct"] is not None else None
    pid = feeder_pid(hosts, watched_pid)
    ev["feeder_on_gpu_fraction"] = on_gpu_fraction(samples, pid)
    ev["gpu_held_fraction"] = held_fraction(samples)  # by any process: a launcher's child (a torchrun rank)
    ev["feeder_thread_pct"] = feeder_host(hosts, pid, "busiest_thread_pct")  # its busiest thread
    ev["feeder_children_cpu_pct"] = feeder_host(hosts, pid, "children_cpu_pct")  # its workers
    ev["feeder_sm_pct"] = feeder_sm(samples, pid)  # NVML's per-process samples
    cores = [max(h["cpu_per_core_pct"]) for h in hosts if h.get("cpu_per_core_pct")]
    ev["host_busiest_core_pct"] = mean(cores)
    return ev


def thermal_reasons_seen(ev: dict) -> list[str]:
    """The thermal clock reasons with a share of busy samples in ``ev``, in CLOCK_REASONS' words."""
    return [r for r in THERMAL_REASONS if (ev.get(reason_key(r)) or 0) > 0]


_GPM_MEANING = {
    "sm_active_pct": "GPM: share of the SMs busy (SM activity)",
    "sm_occupancy_pct": "GPM: resident warps vs the maximum",
    "int_pct": "GPM: integer pipe busy", "tensor_pct": "GPM: any tensor pipe busy (DMMA included)",
    "dfma_pct": "GPM: FP64 tensor (DMMA) busy", "hmma_pct": "GPM: FP16/BF16/TF32 tensor busy",
    "imma_pct": "GPM: INT8 tensor busy", "dram_bw_pct": "GPM: DRAM bandwidth, % of its theoretical peak",
    "fp64_pct": "GPM: FP64 pipe busy (not tensor)", "fp32_pct": "GPM: FP32 pipe busy (not tensor)",
    "fp16_pct": "GPM: FP16 pipe busy (not tensor)",
}
declare(
    Key("samples", "count", "samples judged (lost ones left out; a merged verdict: summed)"),
    Key("duration_s", "s", "from the window's first sample to its last"),
    Key("util_gpu_pct", "%", "NVML's kernel duty cycle: share of the time a kernel ran"),
    Key("util_mem_pct", "%", "NVML's memory-controller duty cycle"),
    *(Key(name, "%", _GPM_MEANING[name] + " (mean over the window)") for name in GPM_ACTIVITY_FIELDS),
    Key("sm_active_per_util", "ratio", "SM activity per kernel duty cycle: how busy the SMs were while kernels ran"),
    Key("busy_sample_pct", "%", "share of the samples in which the GPU did work (is_busy)"),
    Key("bursts", "count", "runs of busy samples in the window"),
    Key("dram_peak_bytes_per_s", "B/s", "the GPU's DRAM peak bandwidth (gputop.analysis.peaks)"),
    Key("dram_bytes_per_s", "B/s", "DRAM bandwidth used (dram_bw_pct of the peak)"),
    Key("pcie_rx_bps", "B/s", "PCIe host-to-device traffic (GPM)"),
    Key("pcie_tx_bps", "B/s", "PCIe device-to-host traffic (GPM)"),
    Key("pcie_link_bytes_per_s", "B/s", "the PCIe link's peak per direction"),
    Key("pcie_link_fraction", "fraction", "the busier PCIe direction's share of the link's peak"),
    Key("sm_clock_mhz", "MHz", "SM clock, mean over the busy samples (all samples if none is busy)"),
    Key("max_sm_clock_mhz", "MHz", "the GPU's highest SM clock"),
    Key("sm_clock_ratio", "fraction", "SM clock over its maximum"),
    Key("busy_samples_with_reasons", "count", "busy samples that carry NVML's clock event reasons"),
    Key("thermal_sample_fraction", "fraction", "share of those with a thermal or hardware slowdown reason"),
    Key("power_cap_sample_fraction", "fraction", "share of those at the software power cap"),
    *(Key(reason_key(r), "fraction", f"share of those with the clock reason '{r}'") for r in THERMAL_REASONS),
    Key("power_w", "W", "board power, mean"),
    Key("power_limit_w", "W", "the board's power limit"),
    Key("power_fraction", "fraction", "board power over its limit"),
    Key("mem_total_bytes", "B", "device memory"),
    Key("mem_used_fraction", "fraction", "device memory used, mean share"),
    Key("mem_used_max_fraction", "fraction", "device memory used, highest share in the window"),
    Key("feeder_cpu_pct", "% of a core", "CPU of the watched process tree, children included (100 = one core)"),
    Key("gpu_idle_pct", "%", "100 - util_gpu_pct"),
    Key("feeder_on_gpu_fraction", "fraction", "share of the process lists in which the watched process is on this GPU"),
    Key("gpu_held_fraction", "fraction", "share of the process lists in which some process is on this GPU"),
    Key("feeder_thread_pct", "% of a core", "the watched process's busiest thread"),
    Key("feeder_children_cpu_pct", "% of a core", "CPU of the watched process's children (its workers)"),
    Key("feeder_sm_pct", "%", "SM use of the watched process's own kernels (NVML's per-process samples)"),
    Key("host_busiest_core_pct", "%", "the busiest host core, mean"),
    Key("feeder_busy_elsewhere_fraction", "fraction",
        "share of the ticks in which another GPU the watched process holds is busy (busy_elsewhere)"),
)
