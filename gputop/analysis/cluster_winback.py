"""What a fix would win back: the share of a GPU's time a fix of its bottleneck would recover, by class (pure).

The method, one rule per class (:data:`METHOD` says it in words; ``docs/diagnosis.md`` "What a fix would win back"
holds the rules' validation against the teaching workloads' measured fixes, ``gputop/evaluate/winback.py``):

* a GPU that waits (input-starved, host-bound, latency-bound, PCIe-bound, comms-bound): **the SMs' idle share**,
  ``1 - DCGM_FI_PROF_SM_ACTIVE`` (the share of cycles no SM had a warp), else where SM activity is not exported
  ``1 - DCGM_FI_DEV_GPU_UTIL`` (the share of time no kernel ran). A fix that removes the wait (more loader workers,
  CUDA graphs, pinned and overlapped copies, overlapped or balanced collectives) leaves the GPU its own work: for a
  comms-bound GPU the idle share is the communication no compute overlaps (NCCL's kernels hold a few SMs only);
* stalled, culprit (a job held up) and idle (a GPU held, doing nothing): **all of it**;
* throttled: **the clock deficit**, ``1 - SM clock / the model's maximum SM clock`` (the work runs at the clock it
  is given: the same work at full clock takes that much less time);
* compute-bound, memory-bound, memory-capacity: **nothing** (the GPU does its work at its hardware's pace: a faster
  algorithm or precision is a change of the work, which telemetry cannot price).

Recovered GPU-hours are summed per job over the range (``fleet/accounting.py``); its share of the job's GPU-hours is
the time a fix would recover: a share ``s`` is a speedup of ``1 / (1 - s)`` for a job bound by that class.
"""

from __future__ import annotations

from gputop.analysis.peaks import MODEL_FACTS
from gputop.analysis.vocabulary import Cls

IDLE_SHARE = (Cls.INPUT_STARVED, Cls.HOST_BOUND, Cls.LATENCY_BOUND, Cls.PCIE_BOUND, Cls.COMMS_BOUND)
ALL_OF_IT = (Cls.STALLED, Cls.CULPRIT, Cls.IDLE)
CLOCK_DEFICIT = (Cls.THROTTLED,)

METHOD = {
    **{c: "the SMs' idle share (1 - SM activity; 1 - GPU utilisation where SM activity is not exported)"
       for c in IDLE_SHARE},
    **{c: "all of it" for c in ALL_OF_IT},
    Cls.THROTTLED: "the clock deficit (1 - SM clock / the model's maximum SM clock)",
}
METHOD_TEXT = ("what a fix would win back: a waiting GPU's SM idle share (input-starved, host-bound, latency-, PCIe-, "
               "comms-bound), all of a stalled, culprit or idle GPU's time, a throttled GPU's clock deficit; nothing "
               "for a GPU at its hardware's pace")


def max_sm_clock(model: str | None) -> float | None:
    """The model's maximum SM clock (MHz), from its published figures (``analysis/peaks.MODEL_FACTS``)."""
    return (MODEL_FACTS.get(model or "") or {}).get("max_sm_clock_mhz")


def idle_share(sm_pct: float | None, util_pct: float | None) -> float | None:
    """The SMs' idle share (0-1) of one reading, else the kernel-idle share; None for neither."""
    busy = sm_pct if sm_pct is not None else util_pct
    return None if busy is None else min(1.0, max(0.0, 1.0 - busy / 100.0))


def share(cls: str | None, sm_pct: float | None = None, util_pct: float | None = None,
          sm_clock_mhz: float | None = None, max_clock_mhz: float | None = None) -> float | None:
    """The share (0-1) of a GPU's time in class ``cls`` a fix would recover, from its numbers (see the module's
    text); 0 for a working class, None where a number it needs is not there."""
    if cls in ALL_OF_IT:
        return 1.0
    if cls in IDLE_SHARE:
        return idle_share(sm_pct, util_pct)
    if cls in CLOCK_DEFICIT:
        if sm_clock_mhz is None or not max_clock_mhz:
            return None
        return min(1.0, max(0.0, 1.0 - sm_clock_mhz / max_clock_mhz))
    return 0.0


def window_share(cls: str | None, samples: list[dict], max_clock_mhz: float | None = None) -> float | None:
    """:func:`share` over a window of samples (gputop's sample fields): the mean of each sample's share."""
    got = [share(cls, s.get("sm_active_pct"), s.get("util_gpu_pct"), s.get("sm_clock_mhz"), max_clock_mhz)
           for s in samples]
    got = [g for g in got if g is not None]
    return sum(got) / len(got) if got else None
