"""memory-bound: DRAM bandwidth near its peak; or SMs full of warps waiting on on-chip memory (subclass "cache");
or a busy GPU whose kernel mix has DRAM as its busiest unit (subclass "kernel mix").

Its score has three parts the arbitration table damps where a pipe is near its peak (gputop/analysis/
arbitration.py): "dram", "cache" and "mix"; :func:`settle` takes the highest. DRAM moved by NCCL's kernels for the
window's NVLink traffic is left out (:func:`gputop.analysis.rules.comms_bound.own_dram_pct`).
References: [NCU] Nsight Compute's Speed Of Light rule (60% of a unit's peak); [H200] a large copy reads DRAM 87%,
tensor 0%.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.rules.base import (MULTI2, MULTI4, TRACES, Example, Rule, Score, has_gpm, no_gpm, pct_text as _p,
                                        ramp)
from gputop.analysis.rules.comms_bound import own_dram_pct
from gputop.analysis.rules.compute_bound import best_pipe, busiest_unit, dram_text
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import si

# DRAM bandwidth >= 60% of the theoretical peak is the limiter [NCU]; a streaming copy reaches ~87% [H200].
DRAM_BUSY_PCT = (40.0, 60.0)
# Memory-bound on chip: SMs >= 90% active with >= 60% occupancy (many warps resident, as in a streaming
# kernel: the H200 copy reads 80% occupancy, a bf16 GEMM 20%, tiny kernels 0.06%) while no pipe and no
# DRAM is near its peak: the warps wait on L2/L1 or memory latency (data that fits in the 50 MB L2).
# GPM has no cache counters, so this scores at most CACHE_SCORE.
CACHE_SM_ACTIVE_PCT = (70.0, 90.0)
CACHE_OCCUPANCY_PCT = (40.0, 60.0)
CACHE_SCORE = 0.8
# A busy GPU (duty cycle >= 70%, BUSY_NOTHING_PEAK_UTIL_PCT) whose DRAM, at 20-35% of its peak, is the busiest
# unit relative to its peak is memory-bound as a kernel mix: an eager GPT-2 training step on an H100 reads DRAM 45%,
# tensor 10%, SMs 81% active, and torch.profiler puts 66% of its kernel time in elementwise, normalisation and
# optimizer kernels (each at its own bandwidth limit [NCU]) and 34% in GEMMs. The same step on an H200 moves about
# as many bytes a second (1.6 TB/s) but that is 33% of the H200's 4.8 TB/s (tensor 11%, SMs 74%; GEMMs 40% of the
# kernel time): hence a ramp from 20% (it was 25-45% until the H200 corpus). Scored at most 0.9: the window's
# mean does not show a unit at its peak, the kernel breakdown does.
MIX_DRAM_PCT = (20.0, 35.0)
MIX_SCORE = 0.9


def score(ev: dict, hints: dict) -> Score:
    if not has_gpm(ev):
        busy, real, memsh = no_gpm(ev)
        return Score(busy * real * memsh)
    _, pipe_pct = best_pipe(ev)
    dram = own_dram_pct(ev)  # less what NCCL's kernels move for the window's NVLink traffic
    parts = {"dram": ramp(dram, DRAM_BUSY_PCT),
             # SMs busy and full of warps (yet no pipe and no DRAM near a peak: the table's row)
             "cache": ramp(ev.get("sm_active_pct"), CACHE_SM_ACTIVE_PCT) * ramp(ev.get("sm_occupancy_pct"),
                                                                                 CACHE_OCCUPANCY_PCT)}
    if dram is not None and dram >= (pipe_pct or 0.0):  # DRAM the busiest unit relative to its peak
        parts["mix"] = ramp(ev.get("util_gpu_pct"), T.BUSY_NOTHING_PEAK_UTIL_PCT) * ramp(dram, MIX_DRAM_PCT)
    return Score(parts["dram"], parts=parts, strength=(dram or 0) / DRAM_BUSY_PCT[1])


def settle(parts: dict, own: Score) -> tuple[float, Sub | None]:
    """The highest of DRAM, on-chip memory (at most CACHE_SCORE) and a kernel mix (at most MIX_SCORE)."""
    if "dram" not in parts:
        return parts["score"], None
    m, sub = parts["dram"], None
    cache = parts["cache"] * CACHE_SCORE
    if cache > m:
        m, sub = cache, Sub.CACHE
    if "mix" in parts:
        mix = parts["mix"] * MIX_SCORE
        if mix > m:
            m, sub = mix, Sub.KERNEL_MIX
    return m, sub


def describe(sub, ev: dict) -> str:
    if not has_gpm(ev):
        return (f"memory controller busy {_p(ev.get('util_mem_pct'))}, kernels active "
                f"{_p(ev.get('util_gpu_pct'))} (no GPM: DRAM bandwidth not measured)")
    dram = dram_text(ev)
    if sub == Sub.CACHE:
        pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "int_pct"))
        return (f"SMs {_p(ev.get('sm_active_pct'))} active at "
                f"{_p(ev.get('sm_occupancy_pct'))} occupancy, yet no pipe (best {_p(pipe_best)}) and {dram}: "
                "warps wait on L2/L1 traffic or memory latency (GPM has no cache counters)")
    got = f" ({si(ev['dram_bytes_per_s'], 'B/s')})" if ev.get("dram_bytes_per_s") else ""
    if sub == Sub.KERNEL_MIX:
        return (f"kernels active {_p(ev.get('util_gpu_pct'))}, {dram}{got} the busiest unit (tensor "
                f"{_p(ev.get('tensor_pct'))}, FP32 {_p(ev.get('fp32_pct'))}), SMs {_p(ev.get('sm_active_pct'))} "
                "active: a mix of memory-bound kernels")
    return (f"{dram}{got}, tensor {_p(ev.get('tensor_pct'))}, FP32 {_p(ev.get('fp32_pct'))}, "
            f"SMs {_p(ev.get('sm_active_pct'))} active")


ADVICE = {
    Sub.CACHE:
        "on-chip memory traffic is the limit (data that fits in L2, or latency of scattered accesses): fuse ops "
        "so data is reused in registers/shared memory, coalesce accesses",
    Sub.KERNEL_MIX:
        "a mix of small memory-bound kernels (elementwise, normalisation, optimizer) takes most of the time and "
        "DRAM is the busiest unit: fuse them (torch.compile, fused optimizers such as AdamW(fused=True), fused "
        "LayerNorm/attention kernels), use bf16 activations",
    None:
        "DRAM bandwidth is the limit: fuse elementwise ops (torch.compile), use lower-precision data (bf16/fp8), "
        "fix access patterns (contiguous, coalesced), reuse data in cache",
}


def notes(ev: dict, board, main) -> list[str]:
    return busiest_unit(ev, main) if main == Cls.MEMORY_BOUND else []



EXAMPLES = (
    Example(TRACES + "elementwise.memory-bound.jsonl.gz", 0, 4.0, 8.0, True, "a streaming elementwise kernel"),
    Example(TRACES + "corpus_h200_cupy_fft.jsonl.gz", 0, 4.0, 8.0, True, "CuPy's FFTs: DRAM the busiest unit"),
    Example(MULTI2 + "fsdp_gpt2.jsonl.gz", 1, 36.0, 40.0, True,
            "FSDP GPT-2's step: elementwise, normalisation and optimizer kernels, DRAM the busiest unit",
            Sub.KERNEL_MIX),
    Example(TRACES + "matmul_bf16.compute-bound.jsonl.gz", 0, 4.0, 8.0, False, "a bf16 matmul: the tensor pipe"),
    Example(MULTI4 + "comms_mlp.jsonl.gz", 3, 20.0, 24.0, False,
            "an all-reduce loop: its DRAM traffic is NCCL's own, for the link's bytes"),
)

RULE = Rule(Cls.MEMORY_BOUND, score, describe, ADVICE, examples=EXAMPLES, settle=settle, notes=notes, needs_gpm=True,
            per_sample=True)
