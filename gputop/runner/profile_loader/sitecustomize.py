"""gputop's profile loader (gputop/runner/profile_loader): imported by ``site`` at the start of a Python
program that ``gputop --run --profile`` started. Stdlib only; it never imports torch itself.

1. Runs the user's own ``sitecustomize`` (the next one on sys.path), as ``site`` would have.
2. Starts a daemon thread that waits for gputop's requests (the files of protocol.py, in the folder
   ``GPUTOP_PROFILE_DIR`` names); the program's main thread does no work for gputop until one comes.
3. On a request, if the program has imported torch: the PyTorch profiler is thread-local, so it is
   started on the program's own thread, at its next ``nn.Module`` call or optimizer step (global hooks,
   installed only while a window is pending), and stopped at the first such call after N seconds (or at
   exit). The window's summary (torch.profiler's key averages, the GPU's busy time, and with CUDA each
   kernel's stream, start, end and launch time from torch.profiler's events: ``kernel_spans``, see
   kernel_spans.py) is written back by the waiting thread. Every failure becomes one ``reason`` line; the
   program goes on, its output unchanged.
"""

import os
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):  # a module of this folder, by its path (the program's own folder comes first on sys.path)
    import importlib.util

    spec = importlib.util.spec_from_file_location("_gputop_" + name, os.path.join(_HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_protocol = _load("protocol")  # the request and answer files, shared with gputop
_cupti = _load("cupti_window")  # CUDA programs without torch: a CUPTI window
_kineto = _load("kineto_summary")  # a torch window summed up from the raw events (fast: no FunctionEvents)
_torch = _load("torch_window")  # a torch window started and stopped on the program's thread
_POLL_S = 0.2
_START_WAIT_S = 30.0  # how long a request waits for a module call or an optimizer step to start on
_EXIT_WAIT_S = 20.0  # at exit, how long the program waits for a recorded window to be written


def _run_user_sitecustomize():
    import importlib.machinery
    import importlib.util

    for p in sys.path:
        try:
            if os.path.abspath(p or os.curdir) == _HERE:
                continue
            spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [p or os.curdir])
        except (OSError, ImportError, ValueError):
            continue
        if spec is None or spec.loader is None:
            continue
        try:
            mod = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = mod
            spec.loader.exec_module(mod)
        except Exception as err:  # what site.execsitecustomize says
            print("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s" % (err.__class__.__name__, err),
                  file=sys.stderr)
        return


def _summary(win):
    """The window's kernels (microseconds), host ops and busy time: from torch's raw events (kineto_summary.py: the
    program runs on meanwhile), or torch.profiler's key averages where a torch has no raw events."""
    torch = win.torch
    cuda = torch.autograd.DeviceType.CUDA
    t0 = time.perf_counter()
    results = getattr(getattr(win.prof, "profiler", None), "kineto_results", None)
    if results is not None and hasattr(results, "events"):
        got = _kineto.summarize(results.events(), cuda, pause=lambda: time.sleep(0.001))
        kernels, ops, busy, how = got["kernels"], got["ops"], _cupti.union(got["intervals"]), "raw events"
        win.raw = got
    else:
        kernels, ops, busy = _averages(win, cuda)
        how = "key_averages"
    cuda_on = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    return {"status": _protocol.OK, "torch": torch.__version__, "cuda": cuda_on, "wall_s": round(win.wall_s, 6),
            "started_at": round(win.started_at, 6), "stop_s": round(win.stop_s or 0.0, 4),
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
    return kernels, ops, _cupti.union(spans)


_NEEDED = ("torch", "torch.profiler", "torch.autograd.profiler", "torch.nn.modules.module", "torch.optim.optimizer")


def _with_kernel_timeline(win, out):
    """The window's summary with ``kernel_spans`` (or ``kernel_spans_why``): see :func:`_kernel_timeline`."""
    out.update(_kernel_timeline(win) if out.get("cuda") else
               {"kernel_spans": [], "kernel_spans_why": "the program has not initialised CUDA: no kernels"})
    return out


def _kernel_timeline(win):
    """``kernel_spans`` (each kernel's stream, start, end and launch time: HTA's idle breakdown, kernel_spans.py)
    from torch.profiler's events in memory, else from the window's chrome trace (written in gputop's private
    folder, read, removed); or ``kernel_spans_why``, one line. ``GPUTOP_PROFILE_KEEP_TRACE=DIR`` also keeps each
    window's chrome trace there as ``trace-SEQ-PID.json`` (bench/tools/hta_compare.py)."""
    keep = os.environ.get(_protocol.KEEP_TRACE_ENV)
    path = os.path.join(keep, "trace-%d-%d.json" % (_state["seq"], os.getpid())) if keep else \
        os.path.join(_state["folder"] or ".", ".trace-%d.json" % os.getpid())
    try:
        mod = _load("kernel_spans")
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


def _imported(name):
    """The module once the program's import of it has finished (this thread imports nothing from torch: an
    import racing the program's own would deadlock it)."""
    mod = sys.modules.get(name)
    if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):
        return None
    return mod


def _answer(seconds, max_steps=0, start_at=0.0):
    end = time.monotonic() + _START_WAIT_S
    while not all(_imported(n) for n in _NEEDED):  # a request early in the program's start: torch may come
        if "torch" not in sys.modules and (_cupti.wanted() or time.monotonic() >= end):
            return _cupti.answer(seconds, _state)  # CUDA without torch (CuPy, JAX...): a CUPTI window
        if time.monotonic() >= end:
            torch = sys.modules["torch"]
            return _protocol.unavailable("torch %s: no torch.profiler or no global module/optimizer hooks (torch 2.0+ "
                                         "needed)" % getattr(torch, "__version__", "?"))
        time.sleep(_POLL_S)
    torch = sys.modules["torch"]
    module_hook = getattr(sys.modules["torch.nn.modules.module"], "register_module_forward_pre_hook", None)
    out_hook = getattr(sys.modules["torch.nn.modules.module"], "register_module_forward_hook", None)
    step_hook = getattr(sys.modules["torch.optim.optimizer"], "register_optimizer_step_post_hook", None)
    if module_hook is None or step_hook is None:
        return _protocol.unavailable("torch %s has no global module/optimizer hooks (torch 2.0+ needed)"
                                     % getattr(torch, "__version__", "?"))
    win = _torch.Window(torch, seconds, max_steps)
    win.start_at = start_at
    win.quiet()
    win.guard_profilers()
    win.handles = [module_hook(win.hook), step_hook(win.step_hook)] + ([out_hook(win.out_hook)] if out_hook else [])
    _state["win"] = win
    win.done.wait(_START_WAIT_S + seconds)
    if win.prof is None and not win.done.is_set():
        win.finish()
        return _protocol.unavailable("no nn.Module call or optimizer step within %.0f s to start the profiler on"
                                     % (_START_WAIT_S + seconds))
    if win.error:
        return _protocol.unavailable(win.error)
    win.done.wait(60.0)
    if win.wall_s is None:
        return _protocol.unavailable("the window did not end (no module call after it)")
    try:
        return _with_kernel_timeline(win, _summary(win))
    except Exception as exc:
        return _protocol.unavailable("reading the profile failed: %s: %s" % (exc.__class__.__name__, exc))


_state = {"seq": 1, "win": None, "folder": None}
_state_lock = threading.Lock()


def _reply(folder, seq, doc, t):
    """Write the answer to request ``seq`` once (the waiting thread or, at exit, the main thread)."""
    with _state_lock:
        if _state["seq"] != seq:
            return
        try:
            _protocol.write_answer(folder, seq, os.getpid(), t, doc)
        except OSError:
            pass
        _state["seq"], _state["win"] = seq + 1, None


def _serve(folder):
    while os.path.isdir(folder):
        seq = _state["seq"]
        asked = _protocol.read_request(folder, seq)
        if asked is None:
            time.sleep(_POLL_S)
            continue
        t = time.time()
        try:
            doc = _answer(*asked)
        except Exception as exc:
            doc = _protocol.unavailable("the loader failed: %s: %s" % (exc.__class__.__name__, exc))
        _reply(folder, seq, doc, t)


def _at_exit():
    """The program ends with a request pending: a window being recorded is stopped and still written (the
    waiting thread dies at exit); one not started gets its one line now."""
    folder, seq = _state["folder"], _state["seq"]
    if _protocol.read_request(folder, seq) is None:
        return
    win = _state["win"]
    if win is not None and win.prof is not None:
        try:
            win.stop(teardown=False)  # on the profiler's thread when that is the main one; else the window is lost
        except Exception as exc:
            win.error = "the profiler failed at exit: %s: %s" % (exc.__class__.__name__, exc)
            win.finish()
        end = time.monotonic() + _EXIT_WAIT_S
        while _state["seq"] == seq and time.monotonic() < end:
            time.sleep(0.02)
        return
    if win is not None:
        win.finish()
    why = _cupti.exit_reason() if "torch" not in sys.modules else \
        "the program ended before the window started (no nn.Module call or optimizer step after the request)"
    _reply(folder, seq, _protocol.unavailable(why), time.time())


def _start():
    _run_user_sitecustomize()
    folder = os.environ.get(_protocol.DIR_ENV)
    if folder and os.path.isdir(folder):
        import atexit

        _state["folder"] = folder
        try:
            _protocol.write_loaded(folder, os.getpid())
        except OSError:
            pass
        atexit.register(_at_exit)
        threading.Thread(target=_serve, args=(folder,), name="gputop-profile-loader", daemon=True).start()


_start()
