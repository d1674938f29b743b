"""memory-capacity (memory-capacity pressure): device memory near full, or an out-of-memory error (subclass
"oom", a hint: the command said so on its stderr). An overlay: at the edge (``MEM_FULL_FRACTION``) or after an OOM
it takes the verdict whatever the GPU does; between 90% and 97% only where the GPU is not clearly compute-, memory-
or transfer-bound. References: [HTA] memory above 90% of the device is near its capacity.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.rules.base import TRACES, Example, Rule, Score, pct_text as _p, ramp
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import si

# Device memory above 90% used is near capacity [HTA]; 88% is not yet.
MEM_USED_FRACTION = (0.88, 0.92)
# ... or a window whose peak reached 97% (MEM_FULL_FRACTION: the next allocation fails there); 95% is not yet.
# The batch-size sweep's batch 8192 on an H200 swings between 53% and 98% as the allocator grows and frees.
MEM_PEAK_FRACTION = (0.95, 0.97)
# At or above 97% (or an out-of-memory error) capacity is the main verdict whatever else is going on:
# the next allocation fails. Between 90% and 97% it is the main verdict only when the GPU is not
# clearly compute-, memory- or transfer-bound (inference servers and PyTorch's caching allocator
# routinely hold 90% of the memory while running at full speed).
MEM_FULL_FRACTION = 0.97
# The classes that do not hide a capacity problem: the GPU is not doing full-speed work.
WEAK_BASES = (Cls.IDLE, Cls.INPUT_STARVED, Cls.LATENCY_BOUND)


def score(ev: dict, hints: dict) -> Score:
    if hints.get("oom"):
        return Score(1.0, Sub.OOM)
    # Near full on average, or at the edge at its peak (a caching allocator growing and freeing a big batch:
    # the next allocation fails at the peak, whatever the mean).
    return Score(max(ramp(ev.get("mem_used_fraction"), MEM_USED_FRACTION),
                     ramp(ev.get("mem_used_max_fraction"), MEM_PEAK_FRACTION)))


def takes_over(ev: dict, board, base, hints: dict) -> bool:
    s = board.scores
    if s[Cls.MEMORY_CAPACITY] < T.MIXED_MIN_SCORE:
        return False
    full = (ev.get("mem_used_max_fraction") or 0) >= MEM_FULL_FRACTION or hints.get("oom")
    weak = (base in WEAK_BASES or s[base] < T.MIXED_MIN_SCORE
            or (base == Cls.MEMORY_BOUND and board.sub(Cls.MEMORY_BOUND) == Sub.KERNEL_MIX))
    return bool(full or weak)


def describe(sub, ev: dict) -> str:
    text = (f"{_p(100 * (ev.get('mem_used_fraction') or 0))} of "
            f"{si(ev.get('mem_total_bytes'), 'B')} used (max {_p(100 * (ev.get('mem_used_max_fraction') or 0))})")
    if sub == Sub.OOM:
        text += "; the command reported an out-of-memory error"
    return text


ADVICE = {
    None:
        "GPU memory is near full: smaller batch, activation checkpointing, lower-precision weights, free cached "
        "tensors, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
}


def missing(ev: dict, board) -> list[str]:
    return ["device memory use"] if ev.get("mem_used_fraction") is None else []


EXAMPLES = (
    Example(TRACES + "memory_full.memory-capacity.jsonl.gz", 0, 4.0, 8.0, True, "device memory held near full"),
    Example(TRACES + "wl_batchsize_h200.jsonl.gz", 0, 16.0, 20.0, True,
            "the batch-size sweep's largest batch: the allocator's peak at the edge"),
    Example(TRACES + "oom.memory-capacity.jsonl.gz", 0, 4.0, 8.0, True, "the command reported an out-of-memory error",
            Sub.OOM, hints={"oom": True}),
    Example(TRACES + "oom.memory-capacity.jsonl.gz", 0, 4.0, 8.0, False,
            "the same window without the error: its memory is not near full, its matmul compute-bound"),
    Example(TRACES + "matmul_bf16.compute-bound.jsonl.gz", 0, 4.0, 8.0, False, "a bf16 matmul loop"),
)

RULE = Rule(Cls.MEMORY_CAPACITY, score, describe, ADVICE, examples=EXAMPLES, missing=missing, takes_over=takes_over,
            overlay=True)
