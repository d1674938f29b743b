"""A torch.profiler window answered (the loader's, gputop/runner/profile_loader): :func:`answer` runs on the loader's
thread for one request of a program that imported torch.

1. Wait for torch's import to finish (the loader imports nothing of torch itself: an import racing the program's
   would deadlock it).
2. A :class:`torch_window.Window` with global hooks (``nn.Module`` forward pre/post, optimizer step): it starts at
   the program's first step after the request's start time, on whichever thread makes it.
3. Where no step has started it by ``start_at + seconds`` (a plain tensor loop, CUDA graph replays, a loop of
   ``torch.matmul`` and ``all_reduce``, a server idle between requests), the loader's thread starts it then (every
   process of a job asked at once starts at the same time), and ends it ``seconds`` later. A window started at a
   step whose program makes no step after its seconds is ended on time by this thread too (one that records every
   thread: ``profile_all_threads``), ``LATE_S`` after it was due.
4. Kineto's CUPTI teardown let finish (``torch_window.settle``: one left waiting hangs the program at its exit).
5. The summary: torch's raw events (kineto_summary.py) or key averages, and the kernel timeline (kernel_spans.py).

Stdlib only. The agent hands it its siblings, loaded by path: ``M.protocol``, ``M.cupti``, ``M.kineto``,
``M.torch_window``, ``M.kernel_spans``.
"""

import os
import sys
import time
import types

M = types.SimpleNamespace(protocol=None, cupti=None, kineto=None, torch_window=None, kernel_spans=None)
START_WAIT_S = 30.0  # how long a request waits for the program's import of torch to finish
LATE_S = 2.0  # a window started at a step and due to end: this long without a step, and the loader ends it
DONE_WAIT_S = 60.0  # a window that cannot be ended from the loader's thread (an old torch): how long it waits
_NEEDED = ("torch", "torch.profiler", "torch.autograd.profiler", "torch.nn.modules.module", "torch.optim.optimizer")


def _imported(name):
    """The module once the program's import of it has finished."""
    mod = sys.modules.get(name)
    if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):
        return None
    return mod


def importing():
    """Whether an import is under way in the program (a module whose spec says it is initialising): the loader's
    thread starts no profiler then (a start that imports races the program's imports), and a program importing is
    starting up, not a loop without steps."""
    for mod in list(sys.modules.values()):
        spec = getattr(mod, "__dict__", {}).get("__spec__")
        if spec is not None and getattr(spec, "_initializing", False):
            return True
    return False


def torch_ready(deadline):
    """Wait (until ``deadline``, monotonic) for torch's import to finish: True once it has, False where the program
    has not imported torch (or its import did not finish in time)."""
    while not all(_imported(n) for n in _NEEDED):
        if "torch" not in sys.modules and M.cupti.wanted() or time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _hooks(win):
    """The global hooks that start and end the window at the program's steps (None: this torch has none)."""
    mod = sys.modules["torch.nn.modules.module"]
    pre = getattr(mod, "register_module_forward_pre_hook", None)
    post = getattr(mod, "register_module_forward_hook", None)
    step = getattr(sys.modules["torch.optim.optimizer"], "register_optimizer_step_post_hook", None)
    if pre is None or step is None:
        return []
    return [pre(win.hook), step(win.step_hook)] + ([post(win.out_hook)] if post else [])


def _wait_until(ready, unix_t):
    """Wait for ``ready()`` until Unix time ``unix_t``: whether it came."""
    while not ready():
        left = unix_t - time.time()
        if left <= 0:
            return False
        time.sleep(min(left, 0.05))
    return True


def record(torch, request, state):
    """The window of ``request`` (started at a step or on time, ended likewise); the :class:`Window`, ended."""
    win = M.torch_window.Window(torch, request.seconds, request.max_steps, request.start_at,
                                request.min_seconds)
    win.quiet()
    win.guard_profilers()
    win.handles = _hooks(win)
    state["win"] = win
    began = lambda: win.started.is_set() or win.done.is_set()  # noqa: E731
    deadline = max(request.start_at, time.time()) + request.seconds
    while not _wait_until(began, deadline):
        if importing():  # starting up (or importing lazily): steps may come once it is done
            deadline = time.time() + request.seconds
            continue
        win.start_on_time()  # no step within the window's seconds: from here, on time
        break
    if not win.started.is_set():
        win.finish()
        return win
    due = time.time() + max(0.0, request.seconds - (time.perf_counter() - win.t0))
    if win.started_by == "time":
        _wait_until(win.done.is_set, due)
        win.stop_on_time()
    elif not _wait_until(win.done.is_set, due + LATE_S):
        if not win.stop_on_time("no step after its seconds: ended on time by the loader's thread"):
            win.done.wait(DONE_WAIT_S)
    return win


def answer(request, state, folder, seq):
    """The answer to ``request`` of a program that has imported torch (``state``: the agent's, given the window
    as ``win`` so that its exit handler can end it)."""
    torch = sys.modules["torch"]
    win = record(torch, request, state)
    win.settle()  # Kineto's CUPTI teardown finished, not left waiting for the program's next CUDA call
    if win.error:
        return M.protocol.unavailable(win.error)
    if not win.started.is_set() or win.wall_s is None:
        return M.protocol.unavailable("the window did not end (no step after it, and this torch records one "
                                      "thread: it ends on that thread)")
    try:
        return _with_kernel_timeline(win, _summary(win), seq, folder)
    except Exception as exc:
        return M.protocol.unavailable("reading the profile failed: %s: %s" % (exc.__class__.__name__, exc))


def _summary(win):
    """The window's kernels (microseconds), host ops and busy time: from torch's raw events (kineto_summary.py: the
    program runs on meanwhile), or torch.profiler's key averages where a torch has no raw events."""
    torch = win.torch
    cuda = torch.autograd.DeviceType.CUDA
    t0 = time.perf_counter()
    results = getattr(getattr(win.prof, "profiler", None), "kineto_results", None)
    if results is not None and hasattr(results, "events"):
        got = M.kineto.summarize(results.events(), cuda, pause=lambda: time.sleep(0.001),
                                 end_mark=M.torch_window.END_MARK)
        kernels, ops, busy, how = got["kernels"], got["ops"], M.cupti.union(got["intervals"]), "raw events"
        win.raw = got
    else:
        kernels, ops, busy = _averages(win, cuda)
        how = "key_averages"
    cuda_on = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    return {"status": M.protocol.OK, "torch": torch.__version__, "cuda": cuda_on, "wall_s": round(win.wall_s, 6),
            "started_at": round(win.started_at, 6), "started_by": win.started_by,
            "ops_threads": "all" if win.all_threads else "one", "stop_s": round(win.stop_s or 0.0, 4),
            "summary_s": round(time.perf_counter() - t0, 4), "summed_from": how,
            "gpu_busy_s": round(busy / 1e6, 6) if cuda_on else None, "steps": win.counted()[0],
            "step_kind": win.counted()[1], "ended_by": win.ended_by,
            "kernels": kernels, "ops": ops}


def _averages(win, cuda):
    """(kernels, ops, busy microseconds) from torch.profiler's key averages and events (slow: FunctionEvents)."""
    kernels, ops = [], []
    averages = win.prof.key_averages()
    # record_function ranges (the optimizer's "Optimizer.step#SGD.step", a program's own labels) are mirrored on
    # the GPU's timeline as user annotations spanning the kernels inside them, gaps included: not kernels
    host = {e.key for e in averages if getattr(e, "device_type", None) != cuda}
    annotation = lambda e: getattr(e, "is_user_annotation", False) or e.key in host  # noqa: E731
    for e in averages:
        dev_total = getattr(e, "device_time_total", None)
        if dev_total is None:
            dev_total = getattr(e, "cuda_time_total", 0.0)
        self_dev = getattr(e, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(e, "self_cuda_time_total", 0.0)
        if getattr(e, "device_type", None) == cuda:
            if annotation(e):
                continue
            kernels.append({"name": e.key, "count": e.count, "device_us": float(self_dev)})
        else:
            ops.append({"name": e.key, "count": e.count, "self_cpu_us": float(e.self_cpu_time_total),
                        "cpu_us": float(e.cpu_time_total), "device_us": float(dev_total)})
    spans = []
    for e in win.prof.events():
        if (getattr(e, "device_type", None) == cuda and e.time_range.end > e.time_range.start
                and not (getattr(e, "is_user_annotation", False) or e.name in host)):
            spans.append((e.time_range.start, e.time_range.end))
    return kernels, ops, M.cupti.union(spans)


_NEEDED = ("torch", "torch.profiler", "torch.autograd.profiler", "torch.nn.modules.module", "torch.optim.optimizer")


def _with_kernel_timeline(win, out, seq, folder):
    """The window's summary with ``kernel_spans`` (or ``kernel_spans_why``): see :func:`_kernel_timeline`."""
    out.update(_kernel_timeline(win, seq, folder) if out.get("cuda") else
               {"kernel_spans": [], "kernel_spans_why": "the program has not initialised CUDA: no kernels"})
    return out


def _kernel_timeline(win, seq, folder):
    """``kernel_spans`` (each kernel's stream, start, end and launch time: HTA's idle breakdown, kernel_spans.py)
    from torch.profiler's events in memory, else from the window's chrome trace (written in gputop's private
    folder, read, removed); or ``kernel_spans_why``, one line. ``GPUTOP_PROFILE_KEEP_TRACE=DIR`` also keeps each
    window's chrome trace there as ``trace-SEQ-PID.json`` (bench/tools/hta_compare.py)."""
    keep = os.environ.get(M.protocol.KEEP_TRACE_ENV)
    path = os.path.join(keep, "trace-%d-%d.json" % (seq, os.getpid())) if keep else \
        os.path.join(folder or ".", ".trace-%d.json" % os.getpid())
    try:
        mod = M.kernel_spans
        if win.raw is not None:  # the raw events' kernels and launches (kineto_summary.py): no FunctionEvents
            got, source = mod.relative(list(win.raw["kernels_raw"]), win.raw["launches"]), "raw events"
        else:
            got, source = mod.spans_from_function_events(win.prof.events(), win.torch.autograd.DeviceType.CUDA), \
                "events"
        if got is None or keep:
            win.prof.export_chrome_trace(path)
        if got is None:
            got, source = mod.spans_from_file(path), "chrome trace"
    except Exception as exc:
        return {"kernel_spans": None,
                "kernel_spans_why": "reading the window's kernels failed: %s: %s" % (exc.__class__.__name__, exc)}
    finally:
        if not keep:
            try:
                os.remove(path)
            except OSError:
                pass
    spans, truncated = got
    return {"kernel_spans": spans, "kernel_spans_truncated": truncated, "kernel_spans_from": source}
