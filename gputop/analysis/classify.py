"""The bottleneck classifier: a window of telemetry samples of one GPU -> a verdict with evidence.

Pure functions over samples (the dicts of ``gputop.telemetry.sample``), no NVML, no Textual.

:func:`classify` scores every class from the window's numbers (each score 0..1, thresholds in
:mod:`gputop.analysis.thresholds`), picks the main class, lists the other classes that also fit as
``mixed``, and says which evidence was missing (no GPM on pre-Hopper GPUs, no watched process).
:func:`timeline` classifies consecutive windows of a run and merges equal neighbours into segments;
:func:`overall` turns a timeline into one verdict for the whole run.

Classes (``class`` in the JSON, ``label`` for people):

  idle             the GPU did no work
  compute-bound    a pipe near its peak; subclass tensor / fp32 / fp64 / fp16 (None without GPM)
  memory-bound     DRAM bandwidth near its peak
  latency-bound    kernels resident but SMs barely busy (subclass launch), or busy SMs with no unit
                   near its peak (stalls / underfilled)
  input-starved    GPU idle between bursts while the feeding process tree is busy on the CPU (or,
                   with recurring bursts, waits on I/O / sleeps: lower score)
  pcie-bound       PCIe traffic high while the SMs wait
  throttled        clocks held down by heat, hardware slowdown, or a power cap far below normal
  memory-capacity  device memory near full, or an out-of-memory error
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputop.analysis import thresholds as T
from gputop.format import pct, si

LABELS = {
    "idle": "idle",
    "compute-bound": "compute-bound",
    "memory-bound": "memory-bound",
    "latency-bound": "latency/launch-bound",
    "input-starved": "input-starved",
    "pcie-bound": "PCIe/transfer-bound",
    "throttled": "power/thermal-throttled",
    "memory-capacity": "memory-capacity pressure",
}
CLASSES = tuple(LABELS)
# The "what is the GPU doing" classes, one of which always fits; throttling and capacity overlay them.
BASE_CLASSES = ("pcie-bound", "memory-bound", "compute-bound", "input-starved", "latency-bound", "idle")
PRIORITY = {c: i for i, c in enumerate(("throttled", "memory-capacity") + BASE_CLASSES)}  # ties: first wins
GPM_CLASSES = ("compute-bound", "memory-bound", "latency-bound")
# Main classes whose window is also judged sample by sample (to spot a mixed window). Not input
# starvation (a property of bursts over a window) nor the overlays (throttling, capacity).
SPLIT_CLASSES = ("compute-bound", "memory-bound", "latency-bound", "pcie-bound")

PIPE_NAMES = {"tensor": "tensor", "fp64": "FP64", "fp32": "FP32", "fp16": "FP16", "int": "INT"}
SUBCLASS_LABELS = {
    "tensor": "tensor cores", "fp64": "FP64", "fp32": "FP32 pipe", "fp16": "FP16 pipe", "int": "integer pipe",
    "cache": "on-chip memory",
    "launch": "launch/sync", "stalls": "stalls", "underfilled": "under-filled kernels",
    "thermal": "thermal", "hardware": "hardware slowdown", "power": "power cap", "oom": "out of memory",
    "startup": "startup", "link": "link near its peak", "pageable": "pageable host memory",
}

_GPM_FIELDS = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_pct", "hmma_pct", "imma_pct",
               "dfma_pct", "fp64_pct", "fp32_pct", "fp16_pct", "int_pct")


@dataclass
class Verdict:
    cls: str
    subclass: str | None
    confidence: float
    evidence: dict
    evidence_text: str
    advice: str
    mixed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scores: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABELS[self.cls]

    def to_dict(self) -> dict:
        return {
            "class": self.cls, "label": self.label, "subclass": self.subclass,
            "confidence": self.confidence, "evidence": self.evidence, "evidence_text": self.evidence_text,
            "advice": self.advice, "mixed": list(self.mixed), "missing": list(self.missing),
            "notes": list(self.notes), "scores": dict(self.scores),
        }


# -- small maths ----------------------------------------------------------------------------------------
def ramp(x: float | None, lohi: tuple[float, float]) -> float:
    """0 at or below lo, 1 at or above hi, linear between (None -> 0)."""
    lo, hi = lohi
    if x is None:
        return 0.0
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (x - lo) / (hi - lo)


def _mean(values) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _round(v):
    if isinstance(v, float):
        return float(f"{v:.4g}")
    return v


# -- the window's numbers ---------------------------------------------------------------------------------
def _split(window: list[dict], gpu: int, host) -> tuple[list[dict], list[dict]]:
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


def _feeder_cpu(hosts: list[dict], watched_pid) -> float | None:
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
    return _mean(vals)


def _is_busy(s: dict) -> bool:
    """A sample in which the GPU did work (for bursts, stretches and busy-only statistics)."""
    return ((_num(s.get("util_gpu_pct")) or 0) >= T.BUSY_UTIL_PCT
            or (_num(s.get("sm_active_pct")) or 0) >= T.BUSY_SM_ACTIVE_PCT)


def measure(samples: list[dict], static: dict, peaks: dict, hosts: list[dict] | None = None,
            watched_pid=None) -> dict:
    """Every number the rules look at, as a flat dict (None = n/a). Also the classifier's evidence."""
    samples = [s for s in samples if s and not s.get("lost")]
    hosts = hosts or []
    static, peaks = static or {}, peaks or {}
    ev: dict = {"samples": len(samples)}
    ts = [s["t"] for s in samples if _num(s.get("t")) is not None]
    ev["duration_s"] = (max(ts) - min(ts)) if len(ts) > 1 else 0.0
    ev["util_gpu_pct"] = _mean(s.get("util_gpu_pct") for s in samples)
    ev["util_mem_pct"] = _mean(s.get("util_mem_pct") for s in samples)
    for name in _GPM_FIELDS:
        ev[name] = _mean(s.get(name) for s in samples)
    util, sm = ev["util_gpu_pct"], ev["sm_active_pct"]
    ev["sm_active_per_util"] = sm / util if sm is not None and util is not None and util >= 1.0 else None

    busy = [s for s in samples if _is_busy(s)]
    ev["busy_sample_pct"] = 100.0 * len(busy) / len(samples) if samples else None
    flags = [any(s is b for b in busy) for s in samples]
    ev["bursts"] = sum(1 for i, f in enumerate(flags) if f and (i == 0 or not flags[i - 1]))

    ev["dram_peak_bytes_per_s"] = _num(peaks.get("dram_bytes_per_s"))
    dram = ev["dram_bw_pct"]
    ev["dram_bytes_per_s"] = (dram / 100.0 * ev["dram_peak_bytes_per_s"]
                              if dram is not None and ev["dram_peak_bytes_per_s"] else None)

    ev["pcie_rx_bps"] = _mean(s.get("pcie_rx_bps") for s in samples)
    ev["pcie_tx_bps"] = _mean(s.get("pcie_tx_bps") for s in samples)
    ev["pcie_link_bytes_per_s"] = _num(peaks.get("pcie_bytes_per_s_per_dir"))
    flows = [v for v in (ev["pcie_rx_bps"], ev["pcie_tx_bps"]) if v is not None]
    ev["pcie_link_fraction"] = (max(flows) / ev["pcie_link_bytes_per_s"]
                                if flows and ev["pcie_link_bytes_per_s"] else None)

    clocked = busy or samples
    ev["sm_clock_mhz"] = _mean(s.get("sm_clock_mhz") for s in clocked)
    ev["max_sm_clock_mhz"] = _num(static.get("max_sm_clock_mhz"))
    ev["sm_clock_ratio"] = (ev["sm_clock_mhz"] / ev["max_sm_clock_mhz"]
                            if ev["sm_clock_mhz"] is not None and ev["max_sm_clock_mhz"] else None)
    reasoned = [s for s in busy if s.get("clock_reasons") is not None]
    ev["busy_samples_with_reasons"] = len(reasoned)
    ev["thermal_sample_fraction"] = (sum(1 for s in reasoned if set(s["clock_reasons"]) & set(T.THERMAL_REASONS))
                                     / len(reasoned) if reasoned else None)
    ev["power_cap_sample_fraction"] = (sum(1 for s in reasoned if T.POWER_CAP_REASON in s["clock_reasons"])
                                       / len(reasoned) if reasoned else None)
    seen: list[str] = []
    for s in reasoned:
        for r in s["clock_reasons"]:
            if r in T.THERMAL_REASONS and r not in seen:
                seen.append(r)
    ev["thermal_reasons"] = seen

    ev["power_w"] = _mean(s.get("power_w") for s in samples)
    ev["power_limit_w"] = _num(static.get("power_limit_w"))
    ev["power_fraction"] = (ev["power_w"] / ev["power_limit_w"]
                            if ev["power_w"] is not None and ev["power_limit_w"] else None)

    fracs = []
    total = None
    for s in samples:
        t = _num(s.get("mem_total_bytes")) or _num(static.get("memory_total_bytes"))
        u = _num(s.get("mem_used_bytes"))
        if t and u is not None:
            fracs.append(u / t)
            total = t
    ev["mem_total_bytes"] = total
    ev["mem_used_fraction"] = _mean(fracs)
    ev["mem_used_max_fraction"] = max(fracs) if fracs else None

    ev["feeder_cpu_pct"] = _feeder_cpu(hosts, watched_pid)
    cores = [max(h["cpu_per_core_pct"]) for h in hosts if h.get("cpu_per_core_pct")]
    ev["host_busiest_core_pct"] = _mean(cores)
    return ev


# -- scoring ----------------------------------------------------------------------------------------------
def _best_pipe(ev: dict) -> tuple[str | None, float | None]:
    """The busiest pipe: tensor (FP16/BF16/TF32/INT8), fp64 (DMMA or FP64 pipe), fp32, fp16."""
    tensor, dfma = ev.get("tensor_pct"), ev.get("dfma_pct") or 0.0
    mma = [v for v in (ev.get("hmma_pct"), ev.get("imma_pct")) if v is not None]
    if tensor is not None and dfma > 0 and dfma >= T.FP64_TENSOR_SHARE * tensor:
        tensor_only = max(mma) if mma else max(0.0, tensor - dfma)
    else:
        tensor_only = tensor if tensor is not None else (max(mma) if mma else None)
        dfma = 0.0 if tensor is not None and dfma < T.FP64_TENSOR_SHARE * tensor else dfma
    fp64 = max([v for v in (ev.get("fp64_pct"), dfma or None) if v is not None], default=None)
    pipes = {"tensor": tensor_only, "fp64": fp64, "fp32": ev.get("fp32_pct"), "fp16": ev.get("fp16_pct"),
             "int": ev.get("int_pct")}
    pipes = {k: v for k, v in pipes.items() if v is not None}
    if not pipes:
        return None, None
    name = max(pipes, key=lambda k: pipes[k])
    return name, pipes[name]


def score(ev: dict, hints: dict | None = None) -> tuple[dict, dict, dict]:
    """(scores, subclasses, facts) for every class from the measured numbers."""
    hints = hints or {}
    gpm = ev.get("sm_active_pct") is not None
    util, sm = ev.get("util_gpu_pct"), ev.get("sm_active_pct")
    s: dict[str, float] = {}
    sub: dict[str, str | None] = {c: None for c in CLASSES}
    facts: dict = {"gpm": gpm}

    pcie_raw = ramp(ev.get("pcie_link_fraction"), T.PCIE_LINK_FRACTION)
    if gpm:
        pipe, pipe_pct = _best_pipe(ev)
        facts["pipe"], facts["pipe_pct"] = pipe, pipe_pct
        s["compute-bound"] = ramp(pipe_pct, T.PIPE_BUSY_PCT)
        sub["compute-bound"] = pipe
        s["memory-bound"] = ramp(ev.get("dram_bw_pct"), T.DRAM_BUSY_PCT)
        facts["strength"] = {"compute-bound": (pipe_pct or 0) / T.PIPE_BUSY_PCT[1],
                             "memory-bound": (ev.get("dram_bw_pct") or 0) / T.DRAM_BUSY_PCT[1]}
        # SMs busy and full of warps, yet no pipe and no DRAM near a peak: the warps wait on on-chip
        # memory (L2/L1 traffic of data that fits in cache, or memory latency). GPM has no cache counters.
        cache = (ramp(sm, T.CACHE_SM_ACTIVE_PCT) * ramp(ev.get("sm_occupancy_pct"), T.CACHE_OCCUPANCY_PCT)
                 * (1 - max(s["compute-bound"], s["memory-bound"])) * T.CACHE_SCORE)
        if cache > s["memory-bound"]:
            s["memory-bound"], sub["memory-bound"] = cache, "cache"
        ratio = ev.get("sm_active_per_util")
        launch = ramp(util, T.LAUNCH_UTIL_PCT) * (1 - ramp(ratio, T.LAUNCH_SM_PER_UTIL)) if ratio is not None else 0.0
    else:
        busy = ramp(util, T.FALLBACK_BUSY_UTIL_PCT)
        pf = ev.get("power_fraction")
        real = ramp(pf, T.FALLBACK_POWER_FRACTION) if pf is not None else 1.0
        memsh = ramp(ev.get("util_mem_pct"), T.FALLBACK_MEM_UTIL_PCT)
        s["compute-bound"] = busy * real * (1 - memsh)
        s["memory-bound"] = busy * real * memsh
        facts["strength"] = {}
        launch = ramp(util, T.LAUNCH_UTIL_PCT) * (1 - real) if pf is not None else 0.0
    # A copy with no kernel running is not a launch problem (NVML's duty cycle counts copies too).
    launch *= 1 - pcie_raw
    peak_used = max(s["compute-bound"], s["memory-bound"])
    s["pcie-bound"] = pcie_raw * (1 - peak_used)
    facts["pcie_overlapped"] = pcie_raw >= T.MIXED_MIN_SCORE and s["pcie-bound"] < T.MIXED_MIN_SCORE

    busy_nothing = ramp(util, T.BUSY_NOTHING_PEAK_UTIL_PCT) * (1 - max(peak_used, pcie_raw))
    s["latency-bound"] = max(launch, busy_nothing)
    if not gpm:
        sub["latency-bound"] = None
    elif launch >= busy_nothing:
        sub["latency-bound"] = "launch"
    else:
        sub["latency-bound"] = "stalls" if (sm or 0) >= T.STALLS_SM_ACTIVE_PCT else "underfilled"

    starved = 1 - ramp(util, T.STARVED_UTIL_PCT)
    if ev.get("feeder_cpu_pct") is not None:
        cpu, facts["feeder"] = ramp(ev["feeder_cpu_pct"], T.FEEDER_CPU_PCT), "process"
    elif ev.get("host_busiest_core_pct") is not None:
        cpu, facts["feeder"] = ramp(ev["host_busiest_core_pct"], T.HOST_CORE_BUSY_PCT), "host"
    else:
        cpu, facts["feeder"] = 0.0, None
    facts["cpu_busy"] = cpu
    # The GPU works in bursts and waits between them. With the feeder busy on the CPU any work in the
    # window counts; with the feeder idle (waiting on I/O, a sleep, a lock) the bursts must recur.
    active = (ev.get("busy_sample_pct") or 0) > 0
    recurring = (ev.get("bursts") or 0) >= T.MIN_RECURRING_BURSTS
    feeder = max(cpu, T.IDLE_FEEDER_SCORE if recurring else 0.0) if active else 0.0
    facts["feeder_idle"] = active and recurring and cpu < T.IDLE_FEEDER_SCORE
    s["input-starved"] = starved * feeder * (1 - launch) * (1 - pcie_raw)
    link = ev.get("pcie_link_fraction") or 0.0
    sub["pcie-bound"] = "link" if link >= T.PCIE_NEAR_LINK_FRACTION else ("pageable" if cpu >= 0.5 else None)
    dwf = _num(hints.get("data_wait_fraction"))
    if dwf is not None:
        ev["data_wait_fraction"] = dwf
        s["input-starved"] = max(s["input-starved"], ramp(dwf, T.DATA_WAIT_FRACTION))
        facts["hinted_input"] = ramp(dwf, T.DATA_WAIT_FRACTION) > 0

    idle = 1 - ramp(util, T.IDLE_UTIL_PCT)
    if gpm:
        idle *= 1 - ramp(sm, T.IDLE_SM_ACTIVE_PCT)
    s["idle"] = idle * (1 - pcie_raw) if util is not None or gpm else 0.0

    thermal = ramp(ev.get("thermal_sample_fraction"), T.THERMAL_SAMPLE_FRACTION)
    ratio_clk = ev.get("sm_clock_ratio")
    power = (ramp(ev.get("power_cap_sample_fraction"), T.POWER_CAP_SAMPLE_FRACTION)
             * (1 - ramp(ratio_clk, T.POWER_CAP_CLOCK_RATIO)) if ratio_clk is not None else 0.0)
    s["throttled"] = max(thermal, power)
    if thermal >= power:
        reasons = ev.get("thermal_reasons") or []
        sub["throttled"] = "thermal" if any("thermal" in r for r in reasons) or not reasons else "hardware"
    else:
        sub["throttled"] = "power"
    facts["power_cap_normal"] = (ramp(ev.get("power_cap_sample_fraction"), T.POWER_CAP_SAMPLE_FRACTION) > 0
                                 and power < T.MIXED_MIN_SCORE)

    s["memory-capacity"] = ramp(ev.get("mem_used_fraction"), T.MEM_USED_FRACTION)
    if hints.get("oom"):
        s["memory-capacity"], sub["memory-capacity"] = 1.0, "oom"
    return {k: round(v, 3) for k, v in s.items()}, sub, facts


def _pick(s: dict, ev: dict, facts: dict, hints: dict) -> str:
    strength = facts.get("strength", {})
    base = max(BASE_CLASSES, key=lambda c: (s[c], strength.get(c, 0.0), -PRIORITY[c]))
    if s["throttled"] >= T.MIXED_MIN_SCORE:
        return "throttled"
    if s["memory-capacity"] >= T.MIXED_MIN_SCORE:
        full = (ev.get("mem_used_max_fraction") or 0) >= T.MEM_FULL_FRACTION or hints.get("oom")
        weak = base in ("idle", "input-starved", "latency-bound") or s[base] < T.MIXED_MIN_SCORE
        if full or weak:
            return "memory-capacity"
    return base


# -- words --------------------------------------------------------------------------------------------------
def _p(v, digits=0):
    if v is not None and 0.01 <= v < 1 and digits == 0:
        return pct(v, 2)
    return pct(v, digits)


def describe(cls: str, sub: str | None, ev: dict) -> str:
    """The one-line evidence of a verdict, from its numbers."""
    gpm = ev.get("sm_active_pct") is not None
    dram = (f"DRAM {_p(ev.get('dram_bw_pct'))} of {si(ev.get('dram_peak_bytes_per_s'), 'B/s')}"
            if ev.get("dram_peak_bytes_per_s") else f"DRAM {_p(ev.get('dram_bw_pct'))}")
    clock = ""
    if ev.get("sm_clock_mhz") is not None:
        top = f"/{ev['max_sm_clock_mhz']:.0f}" if ev.get("max_sm_clock_mhz") else ""
        clock = f", SM clock {ev['sm_clock_mhz']:.0f}{top} MHz"
    if cls == "compute-bound":
        if not gpm:
            return (f"compute-bound: kernels active {_p(ev.get('util_gpu_pct'))}, memory controller "
                    f"{_p(ev.get('util_mem_pct'))}, power {_p(_pf(ev))} of the limit (no GPM: which pipe is unknown)")
        pipe_pct = {"tensor": ev.get("tensor_pct") if not ev.get("hmma_pct") and not ev.get("imma_pct")
                    else max(ev.get("hmma_pct") or 0, ev.get("imma_pct") or 0),
                    "fp64": max(ev.get("fp64_pct") or 0, ev.get("dfma_pct") or 0),
                    "fp32": ev.get("fp32_pct"), "fp16": ev.get("fp16_pct"), "int": ev.get("int_pct")}.get(sub)
        dmma = sub == "fp64" and (ev.get("dfma_pct") or 0) > (ev.get("fp64_pct") or 0)
        which = "FP64 tensor (DMMA)" if dmma else PIPE_NAMES.get(sub, sub)
        return (f"compute-bound ({which}): {which} {_p(pipe_pct)} busy, {dram}, "
                f"SMs {_p(ev.get('sm_active_pct'))} active{clock}")
    if cls == "memory-bound":
        if not gpm:
            return (f"memory-bound: memory controller busy {_p(ev.get('util_mem_pct'))}, kernels active "
                    f"{_p(ev.get('util_gpu_pct'))} (no GPM: DRAM bandwidth not measured)")
        if sub == "cache":
            pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "int_pct"))
            return (f"memory-bound (on-chip): SMs {_p(ev.get('sm_active_pct'))} active at "
                    f"{_p(ev.get('sm_occupancy_pct'))} occupancy, yet no pipe (best {_p(pipe_best)}) and {dram}: "
                    "warps wait on L2/L1 traffic or memory latency (GPM has no cache counters)")
        got = f" ({si(ev['dram_bytes_per_s'], 'B/s')})" if ev.get("dram_bytes_per_s") else ""
        return (f"memory-bound: {dram}{got}, tensor {_p(ev.get('tensor_pct'))}, FP32 {_p(ev.get('fp32_pct'))}, "
                f"SMs {_p(ev.get('sm_active_pct'))} active")
    if cls == "latency-bound":
        if not gpm:
            return (f"latency/launch-bound: kernels active {_p(ev.get('util_gpu_pct'))} but power only "
                    f"{_p(_pf(ev))} of the limit (no GPM: SM activity not measured)")
        if sub == "launch":
            return (f"latency/launch-bound: kernels active {_p(ev.get('util_gpu_pct'))} of the time but SMs only "
                    f"{_p(ev.get('sm_active_pct'), 2)} busy (tiny kernels, launches and syncs)")
        pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct"))
        if sub == "stalls":
            return (f"latency-bound (stalls): SMs {_p(ev.get('sm_active_pct'))} active, yet no pipe (best "
                    f"{_p(pipe_best)}) nor DRAM ({_p(ev.get('dram_bw_pct'))}) near its peak")
        return (f"latency-bound (under-filled): kernels active {_p(ev.get('util_gpu_pct'))}, SMs "
                f"{_p(ev.get('sm_active_pct'))} busy, best pipe {_p(pipe_best)}, DRAM {_p(ev.get('dram_bw_pct'))}")
    if cls == "input-starved":
        sm = f" (SMs {_p(ev.get('sm_active_pct'))})" if gpm else ""
        cpu = (f"the process tree used {_p(ev['feeder_cpu_pct'])} CPU" if ev.get("feeder_cpu_pct") is not None
               else f"the busiest CPU core was {_p(ev.get('host_busiest_core_pct'))} busy")
        text = (f"input-starved: kernels active {_p(ev.get('util_gpu_pct'))}{sm}, GPU busy in "
                f"{_p(ev.get('busy_sample_pct'))} of samples ({ev.get('bursts', 0):.0f} bursts), while {cpu}")
        if ev.get("data_wait_fraction") is not None:
            text += f"; the workload waited for data {_p(100 * ev['data_wait_fraction'])} of the step"
        return text
    if cls == "pcie-bound":
        rx, tx = ev.get("pcie_rx_bps") or 0, ev.get("pcie_tx_bps") or 0
        way, v = ("host-to-device (rx)", rx) if rx >= tx else ("device-to-host (tx)", tx)
        busy = f"SMs {_p(ev.get('sm_active_pct'))} busy" if gpm else f"kernels active {_p(ev.get('util_gpu_pct'))}"
        text = (f"PCIe/transfer-bound: {way} {si(v, 'B/s')} = {_p(100 * (ev.get('pcie_link_fraction') or 0))} of the "
                f"{si(ev.get('pcie_link_bytes_per_s'), 'B/s')} link, {busy}")
        if sub == "pageable":
            cpu = ev.get("feeder_cpu_pct")
            text += f", CPU {_p(cpu if cpu is not None else ev.get('host_busiest_core_pct'))} staging pageable memory"
        return text
    if cls == "throttled":
        if sub == "power":
            share = _p(100 * (ev.get("power_cap_sample_fraction") or 0))
            return (f"throttled (power cap): power cap in {share} of busy "
                    f"samples at {_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W, SM clock "
                    f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max{clock}")
        reasons = ", ".join(ev.get("thermal_reasons") or []) or "thermal slowdown"
        return (f"throttled ({SUBCLASS_LABELS.get(sub, sub)}): {reasons} in "
                f"{_p(100 * (ev.get('thermal_sample_fraction') or 0))} of busy samples{clock}")
    if cls == "memory-capacity":
        text = (f"memory-capacity pressure: {_p(100 * (ev.get('mem_used_fraction') or 0))} of "
                f"{si(ev.get('mem_total_bytes'), 'B')} used (max {_p(100 * (ev.get('mem_used_max_fraction') or 0))})")
        if sub == "oom":
            text += "; the command reported an out-of-memory error"
        return text
    if sub == "startup":
        return "startup: the command had not created a CUDA context on this GPU yet"
    text = f"idle: kernels active {_p(ev.get('util_gpu_pct'))}"
    if gpm:
        text += f", SMs {_p(ev.get('sm_active_pct'))} busy"
    if ev.get("feeder_cpu_pct") is not None:
        text += f", process tree CPU {_p(ev['feeder_cpu_pct'])}"
    return text


def _pf(ev):
    return 100 * ev["power_fraction"] if ev.get("power_fraction") is not None else None


def _w(v):
    return "n/a" if v is None else f"{v:.0f}"


ADVICE = {
    ("compute-bound", "tensor"):
        "tensor cores are the limit, which is the GPU doing useful work: to go faster use lower precision "
        "(FP8/INT8 where accuracy allows) or do fewer FLOPs (smaller model, fused ops)",
    ("compute-bound", "fp32"):
        "FP32 pipes are the limit: move the math onto tensor cores (bf16/fp16 autocast, "
        "torch.backends.cuda.matmul.allow_tf32=True) or lower precision, reduce instruction count",
    ("compute-bound", "fp64"):
        "FP64 is the limit: use FP32/TF32 or mixed precision where the numerics allow",
    ("compute-bound", "fp16"):
        "FP16 pipes are the limit: use tensor cores (matmul-shaped work) or fewer instructions",
    ("compute-bound", "int"):
        "integer pipes are the limit (indexing, hashing, bit ops): simplify index math, use vector loads, move "
        "work to tensor cores or lookup tables",
    ("memory-bound", "cache"):
        "on-chip memory traffic is the limit (data that fits in L2, or latency of scattered accesses): fuse ops "
        "so data is reused in registers/shared memory, coalesce accesses",
    ("compute-bound", None):
        "compute is the limit: use tensor cores and lower precision (AMP), reduce instruction count",
    ("memory-bound", None):
        "DRAM bandwidth is the limit: fuse elementwise ops (torch.compile), use lower-precision data (bf16/fp8), "
        "fix access patterns (contiguous, coalesced), reuse data in cache",
    ("latency-bound", "launch"):
        "kernels are too small and launches/syncs dominate: batch more work per kernel, remove per-step syncs "
        "(.item(), .cpu(), synchronize), use CUDA graphs or torch.compile(mode='reduce-overhead')",
    ("latency-bound", "stalls"):
        "SMs wait on latency: increase parallelism and memory accesses in flight (occupancy, more independent "
        "work per thread); profile with Nsight Compute",
    ("latency-bound", "underfilled"):
        "kernels do not fill the GPU: increase the batch size or parallelism, fuse small ops, use CUDA graphs to "
        "cut launch gaps",
    ("latency-bound", None):
        "the GPU is busy but not near a peak: more parallelism (bigger batches), fewer syncs, CUDA graphs",
    ("input-starved", None):
        "the GPU waits for its input: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
        "prefetch_factor), move preprocessing to the GPU, cache decoded data; if the busy CPU time is the "
        "training loop itself (Python and kernel launches, no data work), use a larger batch, CUDA graphs or "
        "torch.compile instead",
    ("pcie-bound", None):
        "host-device copies are the limit: pin host memory (pin_memory=True) and copy with non_blocking=True, "
        "overlap copies with compute, keep data on the GPU, send less (lower precision)",
    ("pcie-bound", "pageable"):
        "copies from pageable host memory are staged by the CPU far below the link's speed: pin the host buffers "
        "(pin_memory=True, tensor.pin_memory()) and copy with non_blocking=True, overlap copies with compute, "
        "keep data on the GPU",
    ("pcie-bound", "link"):
        "the PCIe link is near its peak: send less (keep data on the GPU, lower precision, compress), overlap "
        "copies with compute on separate streams",
    ("throttled", "power"):
        "the power limit holds the clocks far below max: check `nvidia-smi -q -d POWER` for a lowered limit; "
        "numbers from this window are not representative",
    ("throttled", None):
        "clocks are lowered by heat or a hardware slowdown: check cooling, airflow and power delivery; numbers "
        "from this window are not representative",
    ("memory-capacity", None):
        "GPU memory is near full: smaller batch, activation checkpointing, lower-precision weights, free cached "
        "tensors, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
    ("idle", None):
        "the GPU did no work: if it should, check the code runs on cuda (tensor.device) and on this GPU "
        "(CUDA_VISIBLE_DEVICES)",
    ("idle", "startup"):
        "nothing to do: the command was starting (imports, CUDA initialisation)",
}


def advise(cls: str, sub: str | None) -> str:
    return ADVICE.get((cls, sub)) or ADVICE[(cls, None)]


# -- the classifier ---------------------------------------------------------------------------------------
def classify(window: list[dict], static: dict | None = None, peaks: dict | None = None,
             host: list[dict] | dict | None = None, watched_pid=None, hints: dict | None = None,
             gpu: int = 0) -> Verdict:
    """Verdict for a window of samples of one GPU (or of whole ticks: then GPU position ``gpu``).

    ``host``: host dicts of the same ticks (``procs`` gives the watched tree's CPU%); ``watched_pid``
    picks the tree; ``hints``: a workload's own numbers (``data_wait_fraction``) or events (``oom``).
    """
    hints = hints or {}
    samples, hosts = _split(window, gpu, host)
    stretch = _one_busy_stretch(samples)
    if stretch is not None:  # set-up on the CPU, then the work: judge the work, say the rest was idle
        lo, hi = stretch
        inner = classify(samples[lo:hi], static, peaks, hosts[lo:hi] if len(hosts) == len(samples) else hosts,
                         watched_pid, hints)
        if inner.cls not in ("idle", "input-starved"):
            share = (hi - lo) / len(samples)
            inner.notes.insert(0, f"the GPU worked in one stretch of {_p(100 * share)} of this window and was idle "
                                  f"for the rest (set-up or teardown): this verdict is for that stretch")
            inner.confidence = round(inner.confidence * (0.5 + 0.5 * share), 2)
            return inner
    ev = measure(samples, static or {}, peaks or {}, hosts, watched_pid)
    s, sub, facts = score(ev, hints)
    main = _pick(s, ev, facts, hints)
    weak = main in BASE_CLASSES and max(s[c] for c in BASE_CLASSES) < T.WEAK_SCORE
    split = {}
    if facts["gpm"] and len(samples) >= T.MIN_SAMPLES and (weak or main in SPLIT_CLASSES):
        split = _sample_split(samples, static or {}, peaks or {}, ev)
    if weak and split:  # nothing fits the window as a whole: what most of its samples look like
        main = max(split, key=lambda c: (split[c], -PRIORITY[c]))
    others = [c for c in CLASSES if c != main and s[c] >= T.MIXED_MIN_SCORE]
    if main in ("throttled", "memory-capacity"):
        second = 0.0  # overlays: the class underneath is listed in mixed, it does not compete
    else:
        second = max((s[c] for c in BASE_CLASSES if c != main), default=0.0)
    missing = _missing(ev, facts, static or {}, main, s)
    factor = 1.0
    if not facts["gpm"] and main in GPM_CLASSES:
        factor = T.NO_GPM_CONFIDENCE
    if main == "input-starved" and facts.get("feeder") != "process" and not facts.get("hinted_input"):
        factor = T.NO_FEEDER_CONFIDENCE
    if main == "input-starved" and facts.get("feeder_idle"):
        notes_extra = ["the feeding process was not busy on the CPU: it waited on I/O, a sleep, a lock or another "
                       "process between the GPU's bursts"]
    else:
        notes_extra = []
    conf = min(T.MAX_CONFIDENCE, s[main] * factor * (1 - T.SECOND_CLASS_PENALTY * second))
    if weak and split:
        conf = T.WEAK_SCORE * split[main]
    if ev["samples"] < T.MIN_SAMPLES:
        conf *= 0.5
    notes = _notes(ev, s, facts, main) + notes_extra
    if split:
        share_main = split.get(main, 0.0)
        for c, share in sorted(split.items(), key=lambda x: -x[1]):
            if c != main and share >= T.MIXED_SAMPLE_FRACTION:
                if c == "idle":
                    notes.append(f"the GPU was idle in {_p(100 * share)} of this window's samples")
                    continue
                if c not in others:
                    others.append(c)
                notes.append(f"the window changes: {_p(100 * share)} of its samples look {LABELS[c]}")
        conf *= 0.5 + 0.5 * share_main
    return Verdict(
        cls=main, subclass=sub.get(main), confidence=round(max(0.0, conf), 2),
        evidence={k: _round(v) for k, v in ev.items()}, evidence_text=describe(main, sub.get(main), ev),
        advice=advise(main, sub.get(main)), mixed=others, missing=missing, notes=notes, scores=s,
    )


def _one_busy_stretch(samples: list[dict]) -> tuple[int, int] | None:
    """(start, end) of the one long run of busy samples in a window that is otherwise idle, or None.

    Recurring bursts are input starvation; one stretch of work after (or before) a long idle stretch is
    a change of regime (a phase that starts with set-up on the CPU), to be judged on the work alone."""
    flags = [_is_busy(s) for s in samples]
    busy = sum(flags)
    best, start = (0, 0, 0), None
    for i, f in enumerate(flags + [False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            best = max(best, (i - start, start, i))
            start = None
    length, lo, hi = best
    if (length >= T.MIN_SAMPLES and length >= T.ONE_STRETCH_SHARE * busy
            and 1 - busy / len(samples) >= T.ONE_STRETCH_IDLE_FRACTION):
        return lo, hi
    return None


def _sample_split(samples: list[dict], static: dict, peaks: dict, ev: dict) -> dict:
    """Share of the window's samples whose own GPU-side class (no CPU, no bursts) is each class."""
    fill = {k: ev.get(k) for k in ("pcie_rx_bps", "pcie_tx_bps")}
    counts: dict[str, int] = {}
    for smp in samples:
        one = dict(smp)
        for k, v in fill.items():
            if one.get(k) is None:
                one[k] = v
        sc, _, facts = score(measure([one], static, peaks))
        strength = facts.get("strength", {})
        c = max(("pcie-bound", "memory-bound", "compute-bound", "latency-bound", "idle"),
                key=lambda k: (sc[k], strength.get(k, 0.0), -PRIORITY[k]))
        counts[c] = counts.get(c, 0) + 1
    n = sum(counts.values())
    return {c: k / n for c, k in counts.items()}


def _missing(ev: dict, facts: dict, static: dict, main: str, s: dict) -> list[str]:
    out = []
    if not facts["gpm"]:
        why = ("not supported on this GPU (needs Hopper or newer)" if not static.get("gpm_supported")
               else "no GPM values in this window")
        out.append(f"GPM counters (SM activity, tensor/FP pipes, DRAM bandwidth): {why}; judged from NVML duty "
                   "cycles, clocks and power, so compute vs memory vs launch-bound is less certain")
        if ev.get("power_fraction") is None:
            out.append("board power or power limit (the no-GPM fallback uses it to tell real work from tiny kernels)")
    if facts.get("feeder") != "process" and (1 - ramp(ev.get("util_gpu_pct"), T.STARVED_UTIL_PCT)) >= 0.5 \
            and not facts.get("hinted_input"):
        out.append("CPU% of the command's process tree (no process watched): input starvation judged "
                   + ("from the busiest host core" if facts.get("feeder") == "host" else "without CPU evidence"))
    if ev.get("pcie_link_fraction") is None:
        out.append("PCIe throughput or link peak")
    if ev.get("max_sm_clock_mhz") is None or ev.get("sm_clock_mhz") is None:
        out.append("SM clock vs max (throttling check)")
    if ev.get("mem_used_fraction") is None:
        out.append("device memory use")
    return out


def _notes(ev: dict, s: dict, facts: dict, main: str) -> list[str]:
    notes = []
    if facts.get("power_cap_normal") and main != "throttled":
        notes.append(f"power cap reached in {_p(100 * ev['power_cap_sample_fraction'])} of busy samples "
                     f"({_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W) with the SM clock at "
                     f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max: normal under a heavy load")
    if facts.get("pcie_overlapped"):
        notes.append(f"PCIe also busy ({_p(100 * ev['pcie_link_fraction'])} of the link), overlapped with GPU work")
    if main == "idle" and facts.get("cpu_busy", 0) >= 0.5 and facts.get("feeder") == "process":
        notes.append(f"the process tree was busy on the CPU ({_p(ev['feeder_cpu_pct'])}) while the GPU did nothing: "
                     "if it was preparing GPU input, the GPU is starved")
    best = max(s[c] for c in BASE_CLASSES)
    if best < T.WEAK_SCORE and main in BASE_CLASSES:
        notes.append("no class fits this window well; the verdict is a best guess")
    if ev["samples"] < T.MIN_SAMPLES:
        notes.append(f"only {ev['samples']} samples in this window")
    return notes


# -- timeline -----------------------------------------------------------------------------------------------
def _windows(ticks: list[dict], window_s: float) -> list[list[dict]]:
    out: list[list[dict]] = []
    start = None
    for t in ticks:
        if start is None or t["t"] - start >= window_s:
            out.append([])
            start = t["t"]
        out[-1].append(t)
    if len(out) > 1 and out[-1][-1]["t"] - out[-1][0]["t"] < window_s * T.MIN_LAST_WINDOW_FRACTION:
        out[-2].extend(out.pop())
    return out


def _span(ticks: list[dict], nxt: dict | None) -> tuple[float, float]:
    """A window's [start, end): it ends where the next window starts (or one sample after its last)."""
    t0 = ticks[0]["t"]
    if nxt is not None:
        return t0, nxt["t"]
    step = (ticks[-1]["t"] - t0) / (len(ticks) - 1) if len(ticks) > 1 else 0.1
    return t0, ticks[-1]["t"] + step


def _startup_verdict(ticks, gpu_pos) -> Verdict:
    ev = {"samples": len(ticks)}
    return Verdict("idle", "startup", 1.0, ev, describe("idle", "startup", ev), advise("idle", "startup"))


def timeline(ticks: list[dict], gpu_pos: int, static: dict, peaks: dict, window_s: float = T.WINDOW_S,
             watched_pid=None, hints=None, t_on_gpu: float | None = None, t0: float | None = None) -> list[dict]:
    """Classify consecutive ``window_s`` windows of ``ticks`` (GPU position ``gpu_pos``) into segments.

    ``hints``: a dict for every window, or ``f(t_start, t_end) -> dict``. ``t_on_gpu``: when the command
    first showed up on this GPU; the ticks before it form one "startup" segment. Segment times are
    seconds since ``t0`` (default: the first tick).
    """
    ticks = [t for t in ticks if gpu_pos < len(t.get("gpus") or [])]
    if not ticks:
        return []
    t0 = ticks[0]["t"] if t0 is None else t0
    items: list[tuple[float, float, Verdict]] = []
    if t_on_gpu is not None:
        before = [t for t in ticks if t["t"] < t_on_gpu]
        ticks = [t for t in ticks if t["t"] >= t_on_gpu]
        if before:
            end = ticks[0]["t"] if ticks else _span(before, None)[1]
            items.append((before[0]["t"], end, _startup_verdict(before, gpu_pos)))
    wins = _windows(ticks, window_s)
    for i, w in enumerate(wins):
        a, b = _span(w, wins[i + 1][0] if i + 1 < len(wins) else None)
        h = hints(a, b) if callable(hints) else hints
        items.append((a, b, classify(w, static, peaks, watched_pid=watched_pid, hints=h, gpu=gpu_pos)))
    _smooth(items)
    segs: list[list] = []
    for a, b, v in items:
        prev = segs[-1][2][-1] if segs else None
        if prev is not None and prev.cls == v.cls and (prev.subclass == "startup") == (v.subclass == "startup"):
            segs[-1][1] = b
            segs[-1][2].append(v)
            segs[-1][3].append(b - a)
        else:
            segs.append([a, b, [v], [b - a]])
    out = []
    for a, b, vs, ds in segs:
        v = merge(vs, ds)
        out.append({"class": v.cls, "label": v.label, "subclass": v.subclass,
                    "t_start": round(a - t0, 3), "t_end": round(b - t0, 3), "windows": len(vs),
                    "confidence": v.confidence, "evidence_text": v.evidence_text, "verdict": v.to_dict()})
    return out


def _smooth(items: list) -> None:
    """An idle window with a busy feeder between two input-starved windows is an input gap, not idleness."""
    for i in range(1, len(items) - 1):
        v = items[i][2]
        busy_feeder = ramp(v.evidence.get("feeder_cpu_pct"), T.FEEDER_CPU_PCT) >= 0.5
        if (v.cls == "idle" and v.subclass != "startup" and items[i - 1][2].cls == "input-starved"
                and items[i + 1][2].cls == "input-starved" and busy_feeder):
            ev = dict(v.evidence)
            items[i] = (items[i][0], items[i][1], Verdict(
                "input-starved", None, round(v.confidence * 0.7, 2), ev, describe("input-starved", None, ev),
                advise("input-starved", None), [], v.missing,
                v.notes + ["an idle gap between input-starved windows while the process was busy on the CPU"],
                v.scores))


def merge(verdicts: list[Verdict], weights: list[float]) -> Verdict:
    """One verdict for consecutive windows of the same class: duration-weighted evidence and confidence."""
    if len(verdicts) == 1:
        return verdicts[0]
    if not sum(weights):
        weights = [1.0] * len(weights)
    total = sum(weights)
    cls = verdicts[0].cls
    subs: dict = {}
    for v, w in zip(verdicts, weights):
        subs[v.subclass] = subs.get(v.subclass, 0.0) + w
    sub = max(subs, key=subs.get)
    ev: dict = {}
    keys = [k for k in verdicts[0].evidence]
    for k in keys:
        vals = [(v.evidence.get(k), w) for v, w in zip(verdicts, weights)]
        nums = [(x, w) for x, w in vals if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if k == "samples":
            ev[k] = sum(x for x, _ in nums)
        elif k == "duration_s":
            ev[k] = _round(float(total))
        elif k.endswith("max_fraction"):
            ev[k] = max((x for x, _ in nums), default=None)
        elif nums:
            ev[k] = _round(sum(x * w for x, w in nums) / sum(w for _, w in nums))
        else:
            ev[k] = next((x for x, _ in vals if x is not None), None)
    mixed_w: dict = {}
    for v, w in zip(verdicts, weights):
        for c in v.mixed:
            mixed_w[c] = mixed_w.get(c, 0.0) + w
    mixed = [c for c in CLASSES if mixed_w.get(c, 0.0) >= 0.5 * total and c != cls]
    conf = sum(v.confidence * w for v, w in zip(verdicts, weights)) / total
    missing, notes, kinds = [], [], set()
    for v in verdicts:
        missing += [m for m in v.missing if m not in missing]
        for n in v.notes:
            kind = re.sub(r"[\d.]+", "#", n)  # the same note with other numbers: keep the first
            if kind not in kinds and not n.startswith("only "):
                kinds.add(kind)
                notes.append(n)
    scores = {c: round(sum(v.scores.get(c, 0.0) * w for v, w in zip(verdicts, weights)) / total, 3)
              for c in verdicts[0].scores}
    return Verdict(cls, sub, round(conf, 2), ev, describe(cls, sub, ev), advise(cls, sub), mixed, missing,
                   notes[:6], scores)


def overall(segments: list[dict]) -> dict | None:
    """One verdict for a whole run from its timeline (startup segments left out)."""
    segs = [s for s in segments if s.get("subclass") != "startup"]
    if not segs:
        return None
    time_by: dict[str, float] = {}
    for s in segs:
        time_by[s["class"]] = time_by.get(s["class"], 0.0) + max(0.0, s["t_end"] - s["t_start"])
    total = sum(time_by.values()) or 1.0
    busy = {c: d for c, d in time_by.items() if c != "idle"}
    busy_total = sum(busy.values())
    if not busy or time_by.get("idle", 0.0) / total > T.OVERALL_IDLE_FRACTION:
        main = "idle"
    else:
        main = max(busy, key=lambda c: (busy[c], -PRIORITY[c]))
    chosen = [s for s in segs if s["class"] == main]
    v = merge([_from_dict(s["verdict"]) for s in chosen], [s["t_end"] - s["t_start"] for s in chosen])
    share = time_by[main] / (total if main == "idle" else busy_total)
    mixed = [c for c in CLASSES if c != main and c != "idle" and busy_total
             and busy.get(c, 0.0) / busy_total >= T.OVERALL_MIXED_FRACTION]
    mixed += [c for c in v.mixed if c not in mixed and c != main]
    out = v.to_dict()
    out["confidence"] = round(v.confidence * share ** 0.5, 2)
    out["mixed"] = mixed
    out["share"] = round(share, 3)
    out["time_by_class_s"] = {c: round(d, 2) for c, d in sorted(time_by.items(), key=lambda x: -x[1])}
    return out


def _from_dict(d: dict) -> Verdict:
    return Verdict(d["class"], d.get("subclass"), d.get("confidence", 0.0), dict(d.get("evidence") or {}),
                   d.get("evidence_text", ""), d.get("advice", ""), list(d.get("mixed") or []),
                   list(d.get("missing") or []), list(d.get("notes") or []), dict(d.get("scores") or {}))


def format_timeline(segments: list[dict]) -> list[str]:
    """Readable lines: '  0.0-  3.1 s  compute-bound (tensor)  0.90  tensor 94% busy, ...'."""
    lines = []
    for s in segments:
        name = s["label"] + (f" ({SUBCLASS_LABELS.get(s['subclass'], s['subclass'])})" if s.get("subclass") else "")
        text = s["evidence_text"].split(": ", 1)[-1]
        lines.append(f"  {s['t_start']:6.1f}-{s['t_end']:6.1f} s  {name:<44} {s['confidence']:.2f}  {text}")
    return lines
