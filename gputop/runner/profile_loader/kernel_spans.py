"""The kernel timeline of a torch.profiler window, read from its chrome trace: what HolisticTraceAnalysis' idle
time breakdown needs (gputop/analysis/idle.py). Stdlib only: the profile loader loads this file by its path in
the profiled program (no gputop on that program's path); gputop and bench/tools/hta_compare.py import it.

What is kept, as HTA reads a trace (hta/analyzers/breakdown_analysis.py ``get_idle_time_breakdown``): each
event of category kernel / gpu_memcpy / gpu_memset (and the capitalised names other tracers write) on a stream,
as ``[stream, start_us, end_us, launch_us]``, where ``launch_us`` is the start of the CPU-side runtime event
(``cuda_runtime`` / ``cuda_driver``: cudaLaunchKernel, cudaMemcpyAsync, ...) with the same ``correlation``
id, or None where the trace has none. Times are microseconds from the first kept event (rounded to ns).
"""

import gzip
import json

KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
MAX_SPANS = 200_000  # a longer window keeps its first MAX_SPANS kernels (about 10 MB of JSON)


def spans_from_events(events):
    """(spans, truncated) from a chrome trace's ``traceEvents``."""
    launches, kernels = {}, []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args") or {}
        corr = args.get("correlation")
        if cat in KERNEL_CATS:
            stream = args.get("stream", e.get("tid"))
            ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
            kernels.append((stream, ts, ts + dur, corr))
        elif cat in RUNTIME_CATS and corr is not None:
            launches[corr] = float(e.get("ts", 0.0))
    kernels.sort(key=lambda k: k[1])
    truncated = len(kernels) > MAX_SPANS
    kernels = kernels[:MAX_SPANS]
    if not kernels:
        return [], False
    t0 = min([kernels[0][1]] + [launches[k[3]] for k in kernels if k[3] in launches])
    spans = [[s, round(a - t0, 3), round(b - t0, 3),
              round(launches[c] - t0, 3) if c in launches else None] for s, a, b, c in kernels]
    return spans, truncated


def spans_from_file(path):
    """(spans, truncated) of a chrome trace file (torch.profiler's ``export_chrome_trace``)."""
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        doc = json.load(f)
    return spans_from_events(doc.get("traceEvents", []) if isinstance(doc, dict) else doc)
