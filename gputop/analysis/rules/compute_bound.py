"""compute-bound: a pipe (tensor, FP32, FP64, FP16, INT) busy near its peak (subclass: which; None without GPM).

References: [NCU] Nsight Compute's "GPU Speed Of Light" rule: a unit above 60% of its peak throughput is a
limiter. [H200] measured on an H200 with gputop (GPM over 0.1 s windows): a bf16 matmul loop reads tensor 94%,
DRAM 16%. Without GPM (pre-Hopper) the rule reads NVML's duty cycles and power (:func:`.base.no_gpm`).
"""

from __future__ import annotations

from gputop.analysis.rules.base import (MULTI4, TRACES, Example, Rule, Score, has_gpm, no_gpm, pct_text as _p,
                                        power_pct, ramp)
from gputop.analysis.vocabulary import PIPE_NAMES, Cls, Sub
from gputop.format import si

# A pipe (tensor, FP32, FP64, FP16) busy >= 60% of the time is the limiter [NCU]; below 40% it is not.
PIPE_BUSY_PCT = (40.0, 60.0)
# FP64 tensor (DMMA) counts as "fp64" rather than "tensor" when it is at least this share of all tensor
# activity (ANY_TENSOR includes DMMA).
FP64_TENSOR_SHARE = 0.5


def best_pipe(ev: dict) -> tuple[Sub | None, float | None]:
    """The busiest pipe: tensor (FP16/BF16/TF32/INT8), fp64 (DMMA or FP64 pipe), fp32, fp16, int."""
    tensor, dfma = ev.get("tensor_pct"), ev.get("dfma_pct") or 0.0
    mma = [v for v in (ev.get("hmma_pct"), ev.get("imma_pct")) if v is not None]
    if tensor is not None and dfma > 0 and dfma >= FP64_TENSOR_SHARE * tensor:
        tensor_only = max(mma) if mma else max(0.0, tensor - dfma)
    else:
        tensor_only = tensor if tensor is not None else (max(mma) if mma else None)
        dfma = 0.0 if tensor is not None and dfma < FP64_TENSOR_SHARE * tensor else dfma
    fp64 = max([v for v in (ev.get("fp64_pct"), dfma or None) if v is not None], default=None)
    pipes = {Sub.TENSOR: tensor_only, Sub.FP64: fp64, Sub.FP32: ev.get("fp32_pct"), Sub.FP16: ev.get("fp16_pct"),
             Sub.INT: ev.get("int_pct")}
    pipes = {k: v for k, v in pipes.items() if v is not None}
    if not pipes:
        return None, None
    name = max(pipes, key=lambda k: pipes[k])
    return name, pipes[name]


def score(ev: dict, hints: dict) -> Score:
    if has_gpm(ev):
        pipe, pipe_pct = best_pipe(ev)
        return Score(ramp(pipe_pct, PIPE_BUSY_PCT), pipe, strength=(pipe_pct or 0) / PIPE_BUSY_PCT[1])
    busy, real, memsh = no_gpm(ev)
    return Score(busy * real * (1 - memsh))


def dram_text(ev: dict) -> str:
    """'DRAM 16% of 4.8 TB/s' (the peak where known)."""
    return (f"DRAM {_p(ev.get('dram_bw_pct'))} of {si(ev.get('dram_peak_bytes_per_s'), 'B/s')}"
            if ev.get("dram_peak_bytes_per_s") else f"DRAM {_p(ev.get('dram_bw_pct'))}")


def clock_text(ev: dict) -> str:
    """', SM clock 1410/1980 MHz' (empty without a clock)."""
    if ev.get("sm_clock_mhz") is None:
        return ""
    top = f"/{ev['max_sm_clock_mhz']:.0f}" if ev.get("max_sm_clock_mhz") else ""
    return f", SM clock {ev['sm_clock_mhz']:.0f}{top} MHz"


def describe(sub, ev: dict) -> str:
    if not has_gpm(ev):
        return (f"kernels active {_p(ev.get('util_gpu_pct'))}, memory controller "
                f"{_p(ev.get('util_mem_pct'))}, power {_p(power_pct(ev))} of the limit (no GPM: which pipe is unknown)")
    pipe_pct = {Sub.TENSOR: ev.get("tensor_pct") if not ev.get("hmma_pct") and not ev.get("imma_pct")
                else max(ev.get("hmma_pct") or 0, ev.get("imma_pct") or 0),
                Sub.FP64: max(ev.get("fp64_pct") or 0, ev.get("dfma_pct") or 0),
                Sub.FP32: ev.get("fp32_pct"), Sub.FP16: ev.get("fp16_pct"), Sub.INT: ev.get("int_pct")}.get(sub)
    dmma = sub == Sub.FP64 and (ev.get("dfma_pct") or 0) > (ev.get("fp64_pct") or 0)
    which = "FP64 tensor (DMMA)" if dmma else PIPE_NAMES.get(sub, sub)
    return f"{which} {_p(pipe_pct)} busy, {dram_text(ev)}, SMs {_p(ev.get('sm_active_pct'))} active{clock_text(ev)}"


ADVICE = {
    Sub.TENSOR:
        "tensor cores are the limit, which is the GPU doing useful work: to go faster use lower precision "
        "(FP8/INT8 where accuracy allows) or do fewer FLOPs (smaller model, fused ops)",
    Sub.FP32:
        "FP32 pipes are the limit: move the math onto tensor cores (bf16/fp16 autocast, "
        "torch.backends.cuda.matmul.allow_tf32=True) or lower precision, reduce instruction count",
    Sub.FP64: "FP64 is the limit: use FP32/TF32 or mixed precision where the numerics allow",
    Sub.FP16: "FP16 pipes are the limit: use tensor cores (matmul-shaped work) or fewer instructions",
    Sub.INT:
        "integer pipes are the limit (indexing, hashing, bit ops): simplify index math, use vector loads, move "
        "work to tensor cores or lookup tables",
    None: "compute is the limit: use tensor cores and lower precision (AMP), reduce instruction count",
}


def busiest_unit(ev: dict, main) -> list[str]:
    """The "decided by" note of a compute- or memory-bound verdict: which unit is the busiest relative to its
    peak (empty where that is not the verdict's unit, or without GPM)."""
    if not has_gpm(ev):
        return []
    pipes = {PIPE_NAMES.get(k[:-4], k): ev.get(k) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct")
             if ev.get(k) is not None}
    best = max(pipes, key=pipes.get) if pipes else None
    if best is None or ev.get("dram_bw_pct") is None:
        return []
    if main == Cls.MEMORY_BOUND and ev["dram_bw_pct"] >= pipes[best]:
        return [f"decided by: DRAM at {_p(ev['dram_bw_pct'])} of its peak is the busiest unit relative to its "
                f"peak (the busiest pipe, {best}, at {_p(pipes[best])})"]
    if main == Cls.COMPUTE_BOUND and pipes[best] >= ev["dram_bw_pct"]:
        return [f"decided by: the {best} pipe at {_p(pipes[best])} is the busiest unit relative to its peak "
                f"(DRAM at {_p(ev['dram_bw_pct'])})"]
    return []


def notes(ev: dict, board, main) -> list[str]:
    return busiest_unit(ev, main) if main == Cls.COMPUTE_BOUND else []



EXAMPLES = (
    Example(TRACES + "matmul_bf16.compute-bound.jsonl.gz", 0, 4.0, 8.0, True, "a bf16 matmul loop: the tensor pipe 93% busy",
            Sub.TENSOR),
    Example(TRACES + "matmul_fp32.compute-bound.jsonl.gz", 0, 4.0, 8.0, True, "an FP32 matmul without TF32", Sub.FP32),
    Example(TRACES + "matmul_fp64.compute-bound.jsonl.gz", 0, 4.0, 8.0, True, "an FP64 matmul: DMMA", Sub.FP64),
    Example(MULTI4 + "hang_exit.jsonl.gz", 1, 12.0, 16.0, True,
            "a rank's FP32 work before its job hangs", Sub.FP32),
    Example(TRACES + "elementwise.memory-bound.jsonl.gz", 0, 4.0, 8.0, False, "a streaming elementwise kernel: DRAM"),
    Example(TRACES + "tiny_kernels_sync.latency-bound.jsonl.gz", 0, 4.0, 8.0, False, "tiny kernels: no pipe busy"),
)

RULE = Rule(Cls.COMPUTE_BOUND, score, describe, ADVICE, examples=EXAMPLES, notes=notes, needs_gpm=True,
            per_sample=True)
