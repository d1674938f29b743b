"""The kernel timeline of a torch.profiler window: what HolisticTraceAnalysis' idle time breakdown needs
(gputop/analysis/idle.py). Stdlib only: the profile loader loads this file by its path in the profiled program
(no gputop on that program's path); gputop and bench/tools/hta_compare.py import it.

What is kept, as HTA reads a trace (hta/analyzers/breakdown_analysis.py ``get_idle_time_breakdown``): each GPU
kernel, memcpy and memset on a stream, as ``[stream, start_us, end_us, launch_us]``, where ``launch_us`` is the
start of the CPU-side runtime call that launched it (cudaLaunchKernel, cudaMemcpyAsync, cuLaunchKernel, ...: the
one with the same CUPTI correlation id), or None where the window has none. Times are microseconds from the
first kept event (rounded to ns). Two readers of the same data:

* :func:`spans_from_function_events`: torch.profiler's own events, already in the program's memory
  (``prof.events()``: a kernel's ``device_resource_id`` is its stream, its ``id`` the correlation id, which the
  runtime call that launched it shares; the loader's first choice: no file, no JSON);
* :func:`spans_from_events` / :func:`spans_from_file`: a chrome trace (``prof.export_chrome_trace``: category
  kernel / gpu_memcpy / gpu_memset with ``args.stream`` and ``args.correlation``; cuda_runtime / cuda_driver
  with the same ``args.correlation``), exactly what HTA reads: the loader's fallback where the events lack
  those fields (an older torch), and what bench/tools/hta_compare.py compares with HTA.
"""

import gzip
import json

KERNEL_CATS = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
MAX_SPANS = 200_000  # a longer window keeps its first MAX_SPANS kernels (about 10 MB of JSON)


RUNTIME_PREFIXES = ("cuda", "cu")  # the CUDA runtime's and driver's calls by name (a torch without activity_type)


def relative(kernels, launches):
    """(spans, truncated) of ``kernels`` [(stream, start, end, correlation)] and ``launches`` {correlation: start}."""
    kernels.sort(key=lambda k: k[1])
    truncated = len(kernels) > MAX_SPANS
    kernels = kernels[:MAX_SPANS]
    if not kernels:
        return [], False
    t0 = min([kernels[0][1]] + [launches[k[3]] for k in kernels if k[3] in launches])
    spans = [[s, round(a - t0, 3), round(b - t0, 3),
              round(launches[c] - t0, 3) if c in launches else None] for s, a, b, c in kernels]
    return spans, truncated


def spans_from_function_events(events, cuda_type):
    """(spans, truncated) from torch.profiler's FunctionEvents (``prof.events()``; ``cuda_type``:
    ``torch.autograd.DeviceType.CUDA``), or None where a kernel carries no stream (an older torch)."""
    launches, kernels = {}, []
    for e in events:
        if e.device_type == cuda_type:
            stream = getattr(e, "device_resource_id", None)
            if stream is None:
                return None
            kernels.append((stream, float(e.time_range.start), float(e.time_range.end), e.id))
        else:  # the runtime's calls: by their activity (the trace's category) where torch says it, else by name
            act = getattr(e, "activity_type", None)
            if act in RUNTIME_CATS or act is None and e.name.startswith(RUNTIME_PREFIXES):
                launches[e.id] = float(e.time_range.start)
    return relative(kernels, launches)


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
    return relative(kernels, launches)


def spans_from_file(path):
    """(spans, truncated) of a chrome trace file (torch.profiler's ``export_chrome_trace``)."""
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        doc = json.load(f)
    return spans_from_events(doc.get("traceEvents", []) if isinstance(doc, dict) else doc)
