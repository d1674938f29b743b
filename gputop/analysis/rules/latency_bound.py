"""latency-bound: kernels resident but the SMs barely busy for their time (subclass "launch": tiny kernels,
launches and syncs between them), or a busy GPU with no unit near its peak ("stalls": SMs busy, waiting on
something; "underfilled": kernels too small to fill the SMs). No subclass without GPM.

Its score has two parts: "launch" (damped by PCIe copies in the arbitration table, and itself damping
input-starved and host-bound there) and "busy" (busy with nothing near a peak: damped by any unit near its peak);
:func:`settle` takes the higher and names the subclass. References: [NCU] "achieved compute throughput and/or
memory bandwidth below 60% of peak typically indicate latency issues"; [H200] a loop of 1-element kernels with a
sync after each reads SM activity 0.03% while NVML's kernel duty cycle reads 16% or more.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.rules.base import MULTI4, TRACES, Example, Rule, Score, has_gpm, pct_text as _p, power_pct, ramp
from gputop.analysis.rules.host_bound import FEEDER_THREAD_PCT, host_detail
from gputop.analysis.vocabulary import Cls, Sub

# Kernels resident at least 15% of the time (NVML duty cycle) ...
LAUNCH_UTIL_PCT = (5.0, 15.0)
# ... while the SMs are busy for under 20% of that time: the kernels are tiny (one block, a few
# microseconds) and the GPU waits on launches and syncs between them. 1-element kernels read
# 0.03% / 16% = 0.002 [H200]; GPT-2 decoding at batch 1 (GEMV kernels of 3 us on average) 0.16 [H100];
# kernels that fill the GPU read 0.8-0.9 (an eager GPT-2 training step 0.86, ResNet-50 0.89 [H100]). At
# half the SMs' time the kernels are no longer tiny.
LAUNCH_SM_PER_UTIL = (0.20, 0.50)
# Subclasses of latency-bound: SMs active >= 80% of the time -> "stalls" (SMs busy, waiting on
# something), otherwise "underfilled" (kernels too small to fill the SMs) or "launch" (ratio above).
STALLS_SM_ACTIVE_PCT = 80.0
# Launch-bound vs input-starved: kernels in (nearly) every sample (no idle gap at 10 Hz) with the SMs busy
# for a small part of the kernels' time is a steady trickle of tiny kernels (a decode loop), not a GPU
# waiting for input between bursts. Share of busy samples: 80% has gaps, 95% has none.
CONTINUOUS_BUSY_PCT = (80.0, 95.0)
# The busy part: the GPU busy (duty cycle >= 70%, thresholds.BUSY_NOTHING_PEAK_UTIL_PCT) but neither a pipe nor
# DRAM near its peak (the arbitration table's row): latency-bound in the [NCU] sense (under-filled kernels,
# stalls on memory latency or dependencies).


def score(ev: dict, hints: dict) -> Score:
    util = ev.get("util_gpu_pct")
    gpm = has_gpm(ev)
    if gpm:
        ratio = ev.get("sm_active_per_util")
        # kernels resident often (duty cycle), or in nearly every sample (a steady trickle: a decode loop)
        often = max(ramp(util, LAUNCH_UTIL_PCT), ramp(ev.get("busy_sample_pct"), CONTINUOUS_BUSY_PCT))
        launch = often * (1 - ramp(ratio, LAUNCH_SM_PER_UTIL)) if ratio is not None else 0.0
    else:  # kernels resident while the board draws too little power for real SM work
        pf = ev.get("power_fraction")
        launch = ramp(util, LAUNCH_UTIL_PCT) * (1 - ramp(pf, T.FALLBACK_POWER_FRACTION)) if pf is not None else 0.0
    # A launch-bound loop keeps the thread that launches busy (a Python loop: one core). With the feeder's
    # busiest thread known (psutil's per-thread times) and well under a core, the gaps between the tiny
    # kernels are waits (I/O, a lock, another process), not launch overhead: launch-bound scores half.
    thread = ev.get("feeder_thread_pct")
    if thread is not None:
        launch *= 0.5 + 0.5 * ramp(thread, FEEDER_THREAD_PCT)
    parts = {"launch": launch, "busy": ramp(util, T.BUSY_NOTHING_PEAK_UTIL_PCT)}
    return Score(max(parts.values()), parts=parts, facts={"gpm": gpm, "sm": ev.get("sm_active_pct")})


def settle(parts: dict, own: Score) -> tuple[float, Sub | None]:
    launch, busy = parts["launch"], parts["busy"]
    if not own.facts["gpm"]:
        sub = None
    elif launch >= busy:
        sub = Sub.LAUNCH
    else:
        sub = Sub.STALLS if (own.facts["sm"] or 0) >= STALLS_SM_ACTIVE_PCT else Sub.UNDERFILLED
    return max(launch, busy), sub


def describe(sub, ev: dict) -> str:
    if not has_gpm(ev):
        return (f"kernels active {_p(ev.get('util_gpu_pct'))} but power only "
                f"{_p(power_pct(ev))} of the limit (no GPM: SM activity not measured)")
    if sub == Sub.LAUNCH:
        return (f"kernels active {_p(ev.get('util_gpu_pct'))} of the time but SMs only "
                f"{_p(ev.get('sm_active_pct'), 2)} busy (tiny kernels, launches and syncs)")
    pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct"))
    if sub == Sub.STALLS:
        return (f"SMs {_p(ev.get('sm_active_pct'))} active, yet no pipe (best "
                f"{_p(pipe_best)}) nor DRAM ({_p(ev.get('dram_bw_pct'))}) near its peak")
    return (f"kernels active {_p(ev.get('util_gpu_pct'))}, SMs "
            f"{_p(ev.get('sm_active_pct'))} busy, best pipe {_p(pipe_best)}, DRAM {_p(ev.get('dram_bw_pct'))}")


ADVICE = {
    Sub.LAUNCH:
        "kernels are too small and launches/syncs dominate: batch more work per kernel, remove per-step syncs "
        "(.item(), .cpu(), synchronize), use CUDA graphs or torch.compile(mode='reduce-overhead')",
    Sub.STALLS:
        "SMs wait on latency: increase parallelism and memory accesses in flight (occupancy, more independent "
        "work per thread); profile with Nsight Compute",
    Sub.UNDERFILLED:
        "kernels do not fill the GPU: increase the batch size or parallelism, fuse small ops, use CUDA graphs to "
        "cut launch gaps",
    None: "the GPU is busy but not near a peak: more parallelism (bigger batches), fewer syncs, CUDA graphs",
}


def notes(ev: dict, board, main) -> list[str]:
    """What told launch-bound from input-starved (they share a GPU that is not busy)."""
    ratio, busy = ev.get("sm_active_per_util"), ev.get("busy_sample_pct")
    if main != Cls.LATENCY_BOUND or ratio is None:
        return []
    starved = board.scores.get(Cls.INPUT_STARVED, 0)
    if ratio < LAUNCH_SM_PER_UTIL[1]:
        return [f"decided by: the SMs were busy {_p(100 * ratio)} of the kernels' time (tiny kernels) with kernels "
                f"in {_p(busy)} of the samples{host_detail(ev)}: launch-bound, not input-starved "
                f"(input-starved scored {starved:.2f})"]
    return [f"decided by: kernels ran {_p(ev.get('util_gpu_pct'))} of the time and kept the SMs busy "
            f"{_p(100 * ratio)} of it, yet no unit was near its peak: the kernels wait on latency, the GPU does "
            f"not wait for input (input-starved scored {starved:.2f})"]


EXAMPLES = (
    Example(TRACES + "tiny_kernels_sync.latency-bound.jsonl.gz", 0, 4.0, 8.0, True,
            "1-element kernels with a sync after each", Sub.LAUNCH),
    Example(TRACES + "corpus_h200_hf_gpt2_generate.jsonl.gz", 0, 20.0, 24.0, True,
            "GPT-2 decoding at batch 1: kernels in every sample, the SMs barely busy", Sub.LAUNCH),
    Example(TRACES + "wl_cudagraphs_h200.jsonl.gz", 0, 8.0, 12.0, True,
            "a CUDA graph's replay of tiny kernels: busy, nothing near a peak", Sub.UNDERFILLED),
    Example(TRACES + "wl_dataloader_h200.jsonl.gz", 0, 16.0, 20.0, False,
            "bursts of full kernels between waits for data: input-starved"),
    Example(MULTI4 + "hang_idle.jsonl.gz", 0, 24.0, 28.0, False,
            "NCCL's kernels waiting for a peer that never comes: stalled (the table damps latency)"),
)

RULE = Rule(Cls.LATENCY_BOUND, score, describe, ADVICE, examples=EXAMPLES, settle=settle, notes=notes,
            needs_gpm=True, per_sample=True)
