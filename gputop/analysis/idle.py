"""Where a profiler window's GPU idle time went: HolisticTraceAnalysis' idle time breakdown.

The definitions are HTA's (facebookresearch/HolisticTraceAnalysis):

* ``hta/analyzers/breakdown_analysis.py``, ``BreakdownAnalysis.get_idle_time_breakdown``: the GPU kernels of a
  trace are its events of category kernel, gpu_memcpy or gpu_memset on a CUDA stream, each joined with the
  runtime event that launched it (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...) through their correlation id
  (``hta/common/trace.py`` ``transform_correlation_to_index``); a kernel without one has no launch time.
* ``BreakdownAnalysis._analyze_idle_time_for_stream``, per stream, kernels sorted by start: each kernel's idle
  interval is its start minus the previous kernel's end on that stream (the first kernel has none), and is
  **host wait** if the kernel's launch started after the previous kernel ended (the CPU did not enqueue
  work fast enough), else **kernel wait** if the interval is shorter than ``consecutive_kernel_delay`` (the
  overhead of launching back-to-back kernels), else **other** (e.g. a kernel waiting on an event).
* ``hta/trace_analysis.py`` ``TraceAnalysis.get_idle_time_breakdown``: ``consecutive_kernel_delay`` defaults
  to 30, in the trace's time unit; torch.profiler's chrome traces are in microseconds (HTA's docstring says
  nanoseconds, but it compares the value with the trace's ``ts``).

HTA reports each stream apart; a window here sums the streams (``by_stream`` keeps them apart) and gives
each category's share of that idle time (HTA's ``idle_time_ratio``). The window's own GPU idle share (the
wall time no kernel runs on any stream, :mod:`gputop.analysis.attribution`) is then split in those
proportions (``window_shares``). One difference from HTA: an interval below zero (two kernels of one stream
overlapping by a timestamp's rounding, which HTA's parser removes by rounding starts up and ends down,
``hta/common/trace_parser.py`` ``round_down_time_stamps``) counts as no idle time here, and the times are not
rounded. Checked against HTA 0.5.0 on two of its own GPU test traces (``bench/tools/hta_compare.py``):
``tests/data/critical_path/simple_add`` (98 kernels, 2 streams, microsecond timestamps) gives HTA's numbers to the
microsecond; ``tests/data/ns_resolution_trace`` (6095 kernels, nanosecond timestamps) gives the same shares within
0.3 points, with 25% less idle time in microseconds: HTA's rounding widens each gap by up to 2 us there.

Input: the window's ``kernel_spans``, rows ``[stream, start_us, end_us, launch_us or None]`` (written by the
profile loader, gputop/runner/profile_loader). Pure: no torch, no NVML.
"""

from __future__ import annotations

from gputop.format import count

KERNEL_WAIT_US = 30.0  # HTA's consecutive_kernel_delay default (the trace's unit: microseconds)
REASONS = ("host_wait", "kernel_wait", "other")
BASIS = ("HolisticTraceAnalysis' idle time breakdown (get_idle_time_breakdown), summed over streams; "
         f"kernel wait: a gap under {KERNEL_WAIT_US:g} us")
NO_KERNELS = "no CUDA kernels in the window: the program did not use the GPU while it was recorded"
NO_SPANS = "the window carries no kernel timeline (a loader that did not keep one)"


def classify_gaps(spans, kernel_wait_us: float = KERNEL_WAIT_US) -> dict[object, dict[str, float]]:
    """Per stream: idle microseconds by reason (HTA's ``_analyze_idle_time_for_stream``)."""
    by_stream: dict[object, list] = {}
    for stream, start, end, launch in spans:
        by_stream.setdefault(stream, []).append((float(start), float(end), launch))
    out: dict[object, dict[str, float]] = {}
    for stream, ks in by_stream.items():
        ks.sort(key=lambda k: k[0])
        acc = dict.fromkeys(REASONS, 0.0)
        for (_s0, prev_end, _l0), (start, _end, launch) in zip(ks, ks[1:]):
            gap = max(0.0, start - prev_end)
            if launch is not None and float(launch) > prev_end:
                acc["host_wait"] += gap
            elif start - prev_end < kernel_wait_us:
                acc["kernel_wait"] += gap
            else:
                acc["other"] += gap
        out[stream] = acc
    return out


def idle_breakdown(spans, gpu_idle_share: float | None = None, kernel_wait_us: float = KERNEL_WAIT_US) -> dict:
    """The window's idle breakdown (see the module): microseconds and shares by reason, over all streams."""
    spans = list(spans)
    per = classify_gaps(spans, kernel_wait_us)
    totals = {r: sum(acc[r] for acc in per.values()) for r in REASONS}
    idle = sum(totals.values())
    shares = {r: round(totals[r] / idle, 4) if idle > 0 else 0.0 for r in REASONS}
    launched = sum(1 for s in spans if s[3] is not None)
    return {
        "why_none": None,
        "basis": BASIS,
        "kernel_wait_under_us": kernel_wait_us,
        "kernels": len(spans),
        "launch_matched_share": round(launched / len(spans), 4) if spans else 0.0,
        "streams": len(per),
        "idle_us": round(idle, 3),
        **{f"{r}_us": round(totals[r], 3) for r in REASONS},
        "shares": shares,
        "window_shares": ({r: round(gpu_idle_share * totals[r] / idle, 4) for r in REASONS}
                          if gpu_idle_share is not None and idle > 0 else None),
        "by_stream": [{"stream": str(s), **{f"{r}_us": round(acc[r], 3) for r in REASONS}}
                      for s, acc in sorted(per.items(), key=lambda kv: str(kv[0]))],
    }


def window_idle(win: dict, gpu_idle_share: float | None) -> dict:
    """The ``idle`` part of an analysed window: the breakdown, or ``{"why_none": one line}`` where there is none
    (no CUDA kernels: a CPU program; a window written without its kernel timeline)."""
    spans = win.get("kernel_spans")
    if spans is None:
        return {"why_none": win.get("kernel_spans_why") or (NO_SPANS if win.get("kernels") else NO_KERNELS)}
    if not spans:
        return {"why_none": win.get("kernel_spans_why") or NO_KERNELS}
    return idle_breakdown(spans, gpu_idle_share)


def idle_line(idle: dict | None) -> str:
    """One line for people: 'idle: host wait 70%, kernel wait 20%, other 10% (HTA)' or why there is none."""
    if not idle:
        return "idle breakdown: none"
    if idle.get("why_none"):
        return f"idle breakdown: none ({idle['why_none']})"
    s = idle["shares"]
    return (f"idle time: host wait {100 * s['host_wait']:.0f}%, kernel wait {100 * s['kernel_wait']:.0f}%, "
            f"other {100 * s['other']:.0f}% (HTA's breakdown, {count(idle['streams'], 'stream')})")
