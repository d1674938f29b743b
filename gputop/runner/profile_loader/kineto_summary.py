"""A profiler window summed up from torch's raw profiler events, not from torch.profiler's FunctionEvents.

torch.profiler's ``key_averages()`` / ``events()`` first build a FunctionEvent per event, with its tree: for a window
of GPT-2 training (tens of thousands of kernels and a few times as many ops) that took 13 s on an H100 machine,
holding the GIL, the program stalled meanwhile (bench/tools/attribution_check.py, docs/diagnosis.md). The raw events
(``prof.profiler.kineto_results.events()``: C++ KinetoEvent objects, already made by the profiler's stop) give the
same facts for a pass of Python over them: on the CPU machine 74k events in 0.08 s against key_averages' 5.7 s.

From the raw events (:func:`summarize`):

* ``kernels``: [{name, count, device_us}] by name, every device event (kernels, memcpy, memset) but the user
  annotations (``record_function`` ranges that torch mirrors on the GPU's timeline: spans, not kernels);
* ``ops``: [{name, count, self_cpu_us, cpu_us, device_us}] by name of the CPU-side events, the self time by their
  nesting on each thread (an event's time less its children's, as key_averages' ``self_cpu_time_total``; an op
  whose only child has its name, the dispatcher entering aten::mean twice, is one op, as key_averages counts it), and
  ``device_us`` the time of the kernels each op launched, counted for it and each op around it (as
  ``device_time_total``): a kernel belongs to the op whose span holds the runtime call (cudaLaunchKernel, ...) with
  the kernel's correlation id;
* ``intervals``: each kernel's (start_us, end_us), whose union is the GPU's busy time (``cupti_window.union``);
* ``kernels_raw``: (stream, start_us, end_us, correlation) of each kernel and ``launches`` {correlation: start_us} of
  the runtime calls, for the kernel timeline (kernel_spans.py);
* ``ended_at_us``: where the window's end mark (``end_mark``: torch_window.END_MARK, a ``record_function`` range the
  loader opens just before the profiler's stop, in the events' own clock) put its end, else None. Device work after
  it is not the window's: a kernel that began after it is left out, one running across it counts up to it. A job's
  rank stops without waiting for its device (torch_window.py): kernels still queued then run during the stop, and
  the peers' stops are waits in them (accelerate on 4 H100s, 2026-11-27: the rank that drained its queue counted
  0.27 s more NCCL time than its peer, 56% of its kernel time against 29%).

Stdlib only (the loader loads it by path in the profiled program); the events are duck-typed, so tests build them.
"""

RUNTIME_PREFIXES = ("cuda", "cu")  # the CUDA runtime's and driver's calls (cudaLaunchKernel, cuLaunchKernelEx, ...)
YIELD_EVERY = 5000  # events between two short sleeps: the program's own thread gets the GIL meanwhile


def summarize(events, cuda_type, pause=None, end_mark=None):
    """The window's kernels, ops, kernel intervals and kernel timeline from raw events; ``cuda_type`` is
    ``torch.autograd.DeviceType.CUDA``; ``pause()`` is called every ``YIELD_EVERY`` events (``time.sleep(0.001)``
    in the loader: the program runs on while its window is summed up); ``end_mark``: the name of the host range that
    marks the window's end (``ended_at_us``)."""
    kernels, ops_by_thread, launches = {}, {}, {}
    device, raw, intervals, end = [], [], [], None
    for i, e in enumerate(events):
        if pause is not None and i and i % YIELD_EVERY == 0:
            pause()
        start, dur = e.start_ns() / 1e3, e.duration_ns() / 1e3
        if e.device_type() == cuda_type:
            if e.is_user_annotation():  # a record_function range mirrored on the GPU: not a kernel
                continue
            device.append((e.name(), start, dur, e.device_resource_id(), e.correlation_id()))
            continue
        name = e.name()
        if name == end_mark:
            end = start if end is None else min(end, start)
            continue
        if name.startswith(RUNTIME_PREFIXES) and e.correlation_id():
            launches[e.correlation_id()] = start
        ops_by_thread.setdefault(e.start_thread_id(), []).append((start, -dur, name, e.correlation_id()))
    for name, start, dur, stream, corr in device:
        if end is not None:
            if start >= end:
                continue
            dur = min(dur, end - start)
        k = kernels.get(name)
        if k is None:
            kernels[name] = [1, dur]
        else:
            k[0] += 1
            k[1] += dur
        if dur > 0:
            intervals.append((start, start + dur))
        raw.append((stream, start, start + dur, corr))
    launch_of = {c: s for c, s in launches.items()}
    kernel_us_by_corr = {}
    for _, a, b, c in raw:
        if c:
            kernel_us_by_corr[c] = kernel_us_by_corr.get(c, 0.0) + (b - a)
    ops = {}

    def add(name, self_us, total_us, dev_us):
        o = ops.get(name)
        if o is None:
            ops[name] = o = [0, 0.0, 0.0, 0.0]
        o[0] += 1
        o[1] += self_us
        o[2] += total_us
        o[3] += dev_us

    def close(frame, parent):
        # frame: [start, end, name, dur, children's time, device time, children, a same-named only child]
        _, _, name, dur, child, dev, kids, dup = frame
        if dup is not None:
            if kids == 1:  # a dispatcher's re-entry (aten::mean inside aten::mean): one op, as key_averages counts it
                child = dup[4]
            else:
                add(*dup[:4])
        if parent is not None and parent[2] == name:
            if parent[7] is not None:  # a second same-named child: the parent has more than one
                add(*parent[7][:4])
            parent[7] = (name, max(0.0, dur - child), dur, dev, child)  # held until the parent knows its children
        else:
            add(name, max(0.0, dur - child), dur, dev)

    n = 0
    for evs in ops_by_thread.values():
        evs.sort()  # by start, the longest first where two start together (the parent)
        stack = []  # frames, as close() reads them
        for start, neg, name, corr in evs:
            n += 1
            if pause is not None and n % YIELD_EVERY == 0:
                pause()
            dur = -neg
            while stack and stack[-1][1] <= start:
                frame = stack.pop()
                close(frame, stack[-1] if stack else None)
            if stack:
                stack[-1][4] += dur
                stack[-1][6] += 1
            dev = kernel_us_by_corr.get(corr, 0.0) if corr in launch_of else 0.0
            if dev:
                for frame in stack:  # every op around the launch counts the kernel's time (inclusive)
                    frame[5] += dev
            stack.append([start, start + dur, name, dur, 0.0, dev, 0, None])
        while stack:
            frame = stack.pop()
            close(frame, stack[-1] if stack else None)
    return {
        "kernels": [{"name": k, "count": c, "device_us": round(us, 3)} for k, (c, us) in kernels.items()],
        "ops": [{"name": k, "count": c, "self_cpu_us": round(s, 3), "cpu_us": round(t, 3), "device_us": round(d, 3)}
                for k, (c, s, t, d) in ops.items() if not k.startswith(RUNTIME_PREFIXES)],
        "intervals": intervals,
        "kernels_raw": raw,
        "launches": launches,
        "ended_at_us": end,
    }
