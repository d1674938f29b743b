"""What a fix would win back: the share of a GPU's time a fix of its bottleneck would recover, by class (pure).

The method, one rule per class (:data:`METHOD` says it in words; ``docs/diagnosis.md`` "What a fix would win back"
holds the rules' validation against the teaching workloads' measured fixes and the multi-GPU corpus's truths,
``gputop/evaluate/winback.py``), each what its fix removes:

* a GPU that waits for its feeder (input-starved, host-bound, PCIe-bound): **the GPU's idle share**,
  ``1 - DCGM_FI_DEV_GPU_UTIL`` (the share of time no kernel ran: more loader workers, pinned and overlapped copies,
  a faster host loop fill it), else ``1 - DCGM_FI_PROF_SM_ACTIVE`` where utilisation is not exported;
* a GPU whose kernels are resident but whose SMs wait (latency-bound: launches and tiny kernels; comms-bound:
  NCCL's kernels waiting for data): **the SMs' idle share**, ``1 - DCGM_FI_PROF_SM_ACTIVE`` (CUDA graphs, fusion and
  bigger batches; overlapped or balanced collectives: NCCL's own kernels hold a few SMs only), else the GPU's idle
  share where SM activity is not exported;
* stalled, culprit (a job held up) and idle (a GPU held, doing nothing): **all of it**;
* throttled: **the clock deficit**, ``1 - SM clock / the model's maximum SM clock`` (the work runs at the clock it
  is given);
* compute-bound on the FP32 pipe of a GPU with tensor cores (subclass ``fp32``): **mixed precision's share**, the
  SMs' busy share ``x (1 - FP32 peak / BF16 tensor peak)`` (AMP runs the same work on the tensor pipe);
* compute-bound otherwise, memory-bound, memory-capacity: **nothing** (the GPU works at its hardware's pace: a
  faster algorithm is a change of the work, which telemetry cannot price).

Recovered GPU-hours are summed per job over the range (``fleet/accounting.py``); their share of the job's GPU-hours
is the time a fix would recover: a share ``s`` is a speedup of ``1 / (1 - s)`` for a job bound by that class.
"""

from __future__ import annotations

from gputop.analysis.peaks import MODEL_FACTS, compute_peaks
from gputop.analysis.vocabulary import Cls, Sub

IDLE_GPU = (Cls.INPUT_STARVED, Cls.HOST_BOUND, Cls.PCIE_BOUND)
IDLE_SMS = (Cls.LATENCY_BOUND, Cls.COMMS_BOUND)
ALL_OF_IT = (Cls.STALLED, Cls.CULPRIT, Cls.IDLE)
CLOCK_DEFICIT = (Cls.THROTTLED,)
MIXED_PRECISION = (Cls.COMPUTE_BOUND, Sub.FP32)  # (class, subclass)
AMP_DTYPE = "bf16"  # the tensor pipe mixed precision moves FP32 work to

METHOD = {
    **{c: "the GPU's idle share (1 - GPU utilisation)" for c in IDLE_GPU},
    **{c: "the SMs' idle share (1 - SM activity)" for c in IDLE_SMS},
    **{c: "all of it" for c in ALL_OF_IT},
    Cls.THROTTLED: "the clock deficit (1 - SM clock / the model's maximum SM clock)",
    Cls.COMPUTE_BOUND: "on the FP32 pipe only: the SMs' busy share x (1 - FP32 peak / BF16 tensor peak)",
}
METHOD_TEXT = ("what a fix would win back: the GPU's idle share where it waits for its feeder (input-starved, "
               "host-bound, PCIe-bound), the SMs' idle share where its kernels wait (latency-, comms-bound), all of a "
               "stalled, culprit or idle GPU's time, a throttled GPU's clock deficit, mixed precision's share of an "
               "FP32-pipe-bound GPU's; nothing for a GPU at its hardware's pace")


def max_sm_clock(model: str | None) -> float | None:
    """The model's maximum SM clock (MHz), from its published figures (``analysis/peaks.MODEL_FACTS``)."""
    return (MODEL_FACTS.get(model or "") or {}).get("max_sm_clock_mhz")


def fp32_to_tensor(static: dict) -> float | None:
    """FP32 peak / BF16 dense tensor peak of a GPU (its static facts, else its model's published ones); None where
    it has no tensor pipe for BF16 or a peak is unknown."""
    peaks = compute_peaks(static)
    tensor = (peaks.get("tensor_dense_flops") or {}).get(AMP_DTYPE)
    return peaks["fp32_flops"] / tensor if peaks.get("fp32_flops") and tensor else None


def _idle(busy: float | None) -> float | None:
    return None if busy is None else min(1.0, max(0.0, 1.0 - busy / 100.0))


def share(cls: str | None, sm_pct: float | None = None, util_pct: float | None = None,
          sm_clock_mhz: float | None = None, max_clock_mhz: float | None = None, subclass: str | None = None,
          fp32_ratio: float | None = None) -> float | None:
    """The share (0-1) of a GPU's time in class ``cls`` a fix would recover, from its numbers (see the module's
    text); 0 for a working class, None where a number it needs is not there."""
    if cls in ALL_OF_IT:
        return 1.0
    if cls in IDLE_GPU:
        return _idle(util_pct if util_pct is not None else sm_pct)
    if cls in IDLE_SMS:
        return _idle(sm_pct if sm_pct is not None else util_pct)
    if cls in CLOCK_DEFICIT:
        if sm_clock_mhz is None or not max_clock_mhz:
            return None
        return min(1.0, max(0.0, 1.0 - sm_clock_mhz / max_clock_mhz))
    if (cls, subclass) == MIXED_PRECISION:
        busy = sm_pct if sm_pct is not None else util_pct
        if busy is None or fp32_ratio is None:
            return None
        return min(1.0, max(0.0, busy / 100.0 * (1.0 - fp32_ratio)))
    return 0.0


def window_share(cls: str | None, samples: list[dict], static: dict | None = None,
                 subclass: str | None = None) -> float | None:
    """:func:`share` over a window of samples (gputop's sample fields) of a GPU (``static``: its facts): the mean of
    each sample's share."""
    static = static or {}
    top = static.get("max_sm_clock_mhz") or max_sm_clock(static.get("name"))
    ratio = fp32_to_tensor(static) if (cls, subclass) == MIXED_PRECISION else None
    got = [share(cls, s.get("sm_active_pct"), s.get("util_gpu_pct"), s.get("sm_clock_mhz"), top, subclass, ratio)
           for s in samples]
    got = [g for g in got if g is not None]
    return sum(got) / len(got) if got else None
