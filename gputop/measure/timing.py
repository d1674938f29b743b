"""Timing the way the seed does it: warm-up launches, then timed runs with CUDA events, back to back.

``time_launches`` (CuPy) and ``time_torch`` (torch) return milliseconds per run (a host function's:
``measure/host.time_host``, which a stop can end mid-measurement); ``timing_stats`` turns them into the seed's mean
and RMS deviation, plus the median.
"""

from __future__ import annotations

import statistics

from gputop.workload import util as wu


def timing_stats(times_ms: list[float]) -> dict:
    """The seed's statistics of timed runs: mean, RMS deviation in % of the mean; plus the median."""
    st = wu.stats(times_ms)
    return {"mean_ms": st["mean"], "median_ms": statistics.median(times_ms), "rms_pct": st["rms_pct"] or 0.0,
            "runs": st["n"]}



def time_launches(cp, launch, warmup: int, runs: int) -> list[float]:
    """Milliseconds of ``runs`` launches, timed with CUDA events on the current stream.

    The timed launches are queued back to back behind one more untimed launch, so the GPU is still
    busy while the host queues them: no host launch latency lands between a start event and its kernel.
    """
    for _ in range(warmup):
        launch()
    cp.cuda.get_current_stream().synchronize()
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(runs)]
    launch()
    for start, stop in events:
        start.record()
        launch()
        stop.record()
    events[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(start, stop) for start, stop in events]



def time_torch(torch, fn, warmup: int, runs: int) -> list[float]:
    """:func:`time_launches` for torch work: CUDA events around each call, queued back to back."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    fn()  # keeps the GPU busy while the timed calls are queued
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    events[-1][1].synchronize()
    return [start.elapsed_time(stop) for start, stop in events]






