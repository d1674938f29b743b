"""Scoring: every class gets a score 0..1 from a window's numbers; :func:`pick` chooses the main class.

Each rule is soft (:func:`ramp` between the two ends of a threshold pair in
:mod:`gputop.analysis.thresholds`), so a value near a boundary gives a middling score instead of a flip.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.collectives import score_stall
from gputop.analysis.comms import link_busy, own_dram_pct, score_comms
from gputop.analysis.evidence import number, thermal_reasons_seen
from gputop.analysis.vocabulary import BASE_CLASSES, CLASSES, PRIORITY


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


def best_pipe(ev: dict) -> tuple[str | None, float | None]:
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
        pipe, pipe_pct = best_pipe(ev)
        facts["pipe"], facts["pipe_pct"] = pipe, pipe_pct
        s["compute-bound"] = ramp(pipe_pct, T.PIPE_BUSY_PCT)
        sub["compute-bound"] = pipe
        dram = own_dram_pct(ev)  # less what NCCL's kernels move for the window's NVLink traffic
        s["memory-bound"] = ramp(dram, T.DRAM_BUSY_PCT)
        facts["strength"] = {"compute-bound": (pipe_pct or 0) / T.PIPE_BUSY_PCT[1],
                             "memory-bound": (dram or 0) / T.DRAM_BUSY_PCT[1]}
        # SMs busy and full of warps, yet no pipe and no DRAM near a peak: the warps wait on on-chip
        # memory (L2/L1 traffic of data that fits in cache, or memory latency). GPM has no cache counters.
        cache = (ramp(sm, T.CACHE_SM_ACTIVE_PCT) * ramp(ev.get("sm_occupancy_pct"), T.CACHE_OCCUPANCY_PCT)
                 * (1 - max(s["compute-bound"], s["memory-bound"])) * T.CACHE_SCORE)
        if cache > s["memory-bound"]:
            s["memory-bound"], sub["memory-bound"] = cache, "cache"
        # A busy GPU running a mix of kernels (an eager training step: GEMMs and many elementwise and
        # normalisation kernels) with DRAM the busiest unit relative to its peak: memory-bound as a mix, even
        # though no unit reaches its peak over the window (fusing the elementwise kernels is the cure).
        if dram is not None and dram >= (pipe_pct or 0.0):
            mix = (ramp(util, T.BUSY_NOTHING_PEAK_UTIL_PCT) * ramp(dram, T.MIX_DRAM_PCT)
                   * (1 - s["compute-bound"]) * T.MIX_SCORE)
            if mix > s["memory-bound"]:
                s["memory-bound"], sub["memory-bound"] = mix, "kernel mix"
                facts["mix"] = True
        ratio = ev.get("sm_active_per_util")
        # kernels resident often (duty cycle), or in nearly every sample (a steady trickle: a decode loop)
        often = max(ramp(util, T.LAUNCH_UTIL_PCT), ramp(ev.get("busy_sample_pct"), T.CONTINUOUS_BUSY_PCT))
        launch = often * (1 - ramp(ratio, T.LAUNCH_SM_PER_UTIL)) if ratio is not None else 0.0
        facts["continuous"] = ramp(ev.get("busy_sample_pct"), T.CONTINUOUS_BUSY_PCT)
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
    # A launch-bound loop keeps the thread that launches busy (a Python loop: one core). With the feeder's
    # busiest thread known (psutil's per-thread times) and well under a core, the gaps between the tiny
    # kernels are waits (I/O, a lock, another process), not launch overhead: launch-bound scores half.
    thread = ev.get("feeder_thread_pct")
    facts["thread_busy"] = ramp(thread, T.FEEDER_THREAD_PCT) if thread is not None else None
    if facts["thread_busy"] is not None:
        launch *= 0.5 + 0.5 * facts["thread_busy"]
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
    dwf = number(hints.get("data_wait_fraction"))
    if dwf is not None:
        ev["data_wait_fraction"] = dwf
        s["input-starved"] = max(s["input-starved"], ramp(dwf, T.DATA_WAIT_FRACTION))
        facts["hinted_input"] = ramp(dwf, T.DATA_WAIT_FRACTION) > 0

    s["host-bound"], sub["host-bound"] = host_bound(ev, facts, gpm, launch, pcie_raw, hints)
    if s["host-bound"] > 0 and not facts.get("hinted_input"):  # a GPU idle nearly all the time: the host is the
        s["input-starved"] *= 1 - T.HOST_OVER_STARVED * facts["quiet"]  # story, not the bursts it feeds

    idle = 1 - ramp(util, T.IDLE_UTIL_PCT)
    if gpm:
        idle *= 1 - ramp(sm, T.IDLE_SM_ACTIVE_PCT)
    s["idle"] = idle * (1 - pcie_raw) * (1 - s["host-bound"]) if util is not None or gpm else 0.0
    if facts.get("context") and ev.get("feeder_cpu_pct") is not None and facts.get("host_cpu_busy", 0) < 0.5:
        sub["idle"] = "waiting"  # holds a CUDA context, uses little CPU: sleeps, waits on I/O or a lock

    thermal = ramp(ev.get("thermal_sample_fraction"), T.THERMAL_SAMPLE_FRACTION)
    ratio_clk = ev.get("sm_clock_ratio")
    power = (ramp(ev.get("power_cap_sample_fraction"), T.POWER_CAP_SAMPLE_FRACTION)
             * (1 - ramp(ratio_clk, T.POWER_CAP_CLOCK_RATIO)) if ratio_clk is not None else 0.0)
    s["throttled"] = max(thermal, power)
    if thermal >= power:
        reasons = thermal_reasons_seen(ev)
        sub["throttled"] = "thermal" if any("thermal" in r for r in reasons) or not reasons else "hardware"
    else:
        sub["throttled"] = "power"
    facts["power_cap_normal"] = (ramp(ev.get("power_cap_sample_fraction"), T.POWER_CAP_SAMPLE_FRACTION) > 0
                                 and power < T.MIXED_MIN_SCORE)

    s["comms-bound"], sub["comms-bound"] = score_comms(ev, s, ramp)
    # NVLink busy under the GPU's own work (DDP's all-reduce overlapped with backward): comms listed in mixed
    facts["comms_overlapped"] = (max(link_busy(ev, ramp)) >= T.MIXED_MIN_SCORE
                                 and s["comms-bound"] < T.MIXED_MIN_SCORE)
    s["latency-bound"] *= 1 - s["comms-bound"]  # NCCL's kernels keep a few SMs busy while they wait on the link
    s["input-starved"] *= 1 - s["comms-bound"]  # gaps while peers exchange data (and a job's tree: every rank's CPU)
    # NCCL's kernels waiting for a peer that never comes: a few SMs resident, nothing moves (collectives.py)
    s["stalled"] = score_stall(ev, ramp) if gpm else 0.0
    s["latency-bound"] *= 1 - s["stalled"]
    # Near full on average, or at the edge at its peak (a caching allocator growing and freeing a big batch:
    # the next allocation fails at the peak, whatever the mean).
    s["memory-capacity"] = max(ramp(ev.get("mem_used_fraction"), T.MEM_USED_FRACTION),
                               ramp(ev.get("mem_used_max_fraction"), T.MEM_PEAK_FRACTION))
    if hints.get("oom"):
        s["memory-capacity"], sub["memory-capacity"] = 1.0, "oom"
    return {k: round(v, 3) for k, v in s.items()}, sub, facts


def host_bound(ev: dict, facts: dict, gpm: bool, launch: float, pcie_raw: float,
               hints: dict | None = None) -> tuple[float, str | None]:
    """(score, subclass) of host-bound: the GPU nearly idle while the process holding its CUDA context keeps
    a CPU core busy (issue 11). Sets facts["context"] and facts["host_cpu_busy"]. ``hints["on_gpu"]`` (a run:
    its command's process tree showed up on this GPU) says the tree holds the context: without process lists
    in the window (a run's stored ticks drop them), or through a child of the watched process (a launcher's
    ranks) while some process still holds the GPU (``HOST_TREE_HELD_FRACTION``)."""
    util, sm = ev.get("util_gpu_pct"), ev.get("sm_active_pct")
    if util is None and sm is None:
        return 0.0, None
    quiet = 1 - ramp(util, T.HOST_GPU_UTIL_PCT)
    if gpm:
        quiet *= 1 - ramp(sm, T.HOST_GPU_SM_PCT)
    frac = ev.get("feeder_on_gpu_fraction")
    itself = frac is not None and frac >= T.HOST_CONTEXT_FRACTION  # the watched process holds the context
    own = ev.get("feeder_sm_pct")  # NVML's per-process samples: the process's own kernels
    if own is not None and itself:  # it barely uses the SMs, whatever another process does on the GPU
        quiet = max(quiet, 1 - ramp(own, T.HOST_GPU_UTIL_PCT))
    held = ev.get("gpu_held_fraction")
    tree = bool((hints or {}).get("on_gpu")) and (frac is None or (held is not None
                                                                   and held >= T.HOST_TREE_HELD_FRACTION))
    context = itself or tree
    cpu = ramp(ev.get("feeder_cpu_pct"), T.HOST_FEEDER_CPU_PCT)
    facts["context"], facts["host_cpu_busy"], facts["quiet"] = context, cpu, quiet
    elsewhere = ramp(ev.get("feeder_busy_elsewhere_fraction"), T.HOST_BUSY_ELSEWHERE_FRACTION)
    # Which host work: one thread at a core with the workers idle is the training process's own loop (CPU-side
    # overhead, or preprocessing in that process); worker processes busier than it is an input pipeline.
    thread, workers = ev.get("feeder_thread_pct"), ev.get("feeder_children_cpu_pct") or 0.0
    sub = None
    if (workers >= T.HOST_WORKERS_CPU_PCT and workers > (ev.get("feeder_cpu_pct") or 0.0) - workers
            and (itself or frac is None)):  # a launcher's children are the GPUs' processes, not its workers
        sub = "workers"
    elif thread is not None and thread >= T.FEEDER_THREAD_PCT[1]:
        sub = "one thread"
    return (quiet * cpu * (1 - launch) * (1 - pcie_raw) * (1 - elsewhere) if context else 0.0), sub


def pick(s: dict, ev: dict, facts: dict, hints: dict, prefer: str | None = None) -> str:
    """The main class: throttling or capacity when they score high enough, else the best base class.

    ``prefer``: the class shown so far for this segment (hysteresis): it stays while it scores within
    ``STICKY_MARGIN`` of the best base class and fits (>= ``MIXED_MIN_SCORE``)."""
    strength = facts.get("strength", {})
    base = max(BASE_CLASSES, key=lambda c: (s[c], strength.get(c, 0.0), -PRIORITY[c]))
    if (prefer in BASE_CLASSES and prefer != base and s.get(prefer, 0.0) >= T.MIXED_MIN_SCORE
            and s[prefer] >= s[base] - T.STICKY_MARGIN):
        base = prefer
    if s["throttled"] >= T.MIXED_MIN_SCORE:
        return "throttled"
    if s["memory-capacity"] >= T.MIXED_MIN_SCORE:
        full = (ev.get("mem_used_max_fraction") or 0) >= T.MEM_FULL_FRACTION or hints.get("oom")
        weak = (base in ("idle", "input-starved", "latency-bound") or s[base] < T.MIXED_MIN_SCORE
                or (base == "memory-bound" and facts.get("mix")))
        if full or weak:
            return "memory-capacity"
    return base
