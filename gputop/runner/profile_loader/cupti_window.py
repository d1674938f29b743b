"""A profiler window through CUPTI, for a Python child that runs CUDA without PyTorch (CuPy, JAX, Numba...).

Loaded by the profile loader's ``sitecustomize`` (by its path); it sends a request here when the program has not
imported torch (at once if a module of :data:`CUDA_MODULES` is imported or torch is not installed, else once the
loader's wait for torch is over). Stdlib only at import; NVIDIA's ``cupti-python`` (module
``cupti``, ``from cupti import cupti``) is imported only when a window starts, from the loader's waiting thread.

The window (:func:`answer`, on that thread): subscribe to CUPTI under the name ``gputop`` (before CUDA 13.3 /
driver r610 CUPTI takes one subscriber: a program whose own profiler, JAX's or Nsight's, holds it gets one line,
and gputop leaves it alone), enable the activity kinds CONCURRENT_KERNEL, MEMCPY and MEMSET, wait N seconds
(or the program's exit), disable them, wait for the GPU to run what was launched (:func:`_drain`), flush the
records, unsubscribe. The records are reduced in CUPTI's buffer-completed callback to ``(name, start_ns, end_ns)`` rows (:func:`row`) and summed by :func:`summary` into
the loader's window format (``kernels`` [{name, count, device_us}], ``ops`` empty, ``gpu_busy_s``, ``wall_s``),
with ``"profiler": "cupti"``. Copies and fills are named as torch.profiler names them ("Memcpy HtoD",
"Memset"), so gputop.analysis.attribution puts them in memcpy/memset.

Every failure is one ``reason`` line; the program goes on, its output unchanged.
"""

import importlib.util
import os
import sys
import threading

NO_CUPTI = "the program has not imported torch and has no cupti-python in its environment"  # (no_cupti's start)
ENDED = "the program has not imported torch and ended before the CUPTI window started"
# Modules that run CUDA without torch: a request while one is imported (and torch is not) goes to CUPTI at once.
CUDA_MODULES = ("cupy", "jax", "jaxlib", "numba.cuda", "pycuda", "cuda.core", "cuda.bindings", "cudf",
                "tensorflow", "warp")
_INJECTORS = ("CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID")  # Nsight (or another tool) injects CUPTI
_COPY_NAMES = {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP", "ATOA": "AtoA",
               "ATOD": "AtoD", "ATOH": "AtoH", "DTOA": "DtoA", "HTOA": "HtoA"}
BUFFER_BYTES = 8 << 20
NO_SPANS = ("a CUPTI window records kernels, not the API calls that launched them: no host/kernel wait split "
            "of the idle time")


_FOUND = {}


def _found(name):
    """Whether the child's environment has the top-level module ``name`` (looked up once, not imported)."""
    if name not in _FOUND:
        try:
            _FOUND[name] = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            _FOUND[name] = False
    return _FOUND[name]


def wanted():
    """A request now goes to CUPTI rather than waiting for torch: torch is not imported and either it is not
    installed or a module that runs CUDA without it is imported."""
    if "torch" in sys.modules:
        return False
    return any(n in sys.modules for n in CUDA_MODULES) or not _found("torch")


def driver_cuda():
    """(major, minor) of the CUDA version the driver supports (``cuDriverGetVersion`` of libcuda, which a CUDA
    program has loaded; it initialises nothing), or None (no driver, not Linux)."""
    try:
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
            return None
        return v.value // 1000, (v.value % 1000) // 10
    except Exception:
        return None


def no_cupti(driver=None, python=None):
    """The one line of a program without torch and without cupti-python: what to install, into which Python, for
    which CUDA (cupti-python's major is CUDA's: 13.x pulls CUPTI 13 and cuda-bindings 13; the driver's major, as a
    newer minor of it worked on driver 580 / CUDA 13.0, gputop's CuPy window of 2026-11-26). ``driver``: (major,
    minor), else read (:func:`driver_cuda`); ``python``: the program's interpreter."""
    driver = driver_cuda() if driver is None else driver
    python = python or sys.executable or "python3"
    spec = "cupti-python==%d.*" % driver[0] if driver else "cupti-python"
    cuda = " (the driver runs CUDA %d.%d)" % driver if driver else ""
    return ("%s: %s -m pip install '%s'%s, for CUDA kernels of CuPy, JAX, Numba... without PyTorch"
            % (NO_CUPTI, python, spec, cuda))


def exit_reason():
    """Why a program without torch that ends with a request pending has no window."""
    return ENDED if _found("cupti") else no_cupti()


# -- pure: records to the window ------------------------------------------------------------------------
def memcpy_name(copy_kind):
    """"Memcpy HtoD" from CUPTI's ActivityMemcpyKind name ("HTOD"); torch.profiler's spelling."""
    return "Memcpy " + _COPY_NAMES.get(str(copy_kind).upper(), str(copy_kind))


def row(activity, kinds, copy_kinds):
    """``(name, start_ns, end_ns)`` of one CUPTI activity record, or None for another kind. ``kinds`` maps the
    record's ``kind`` to "kernel", "memcpy" or "memset"; ``copy_kinds`` a memcpy's ``copy_kind`` to its name."""
    what = kinds.get(int(activity.kind))
    if what == "kernel":
        name = activity.name
    elif what == "memcpy":
        name = memcpy_name(copy_kinds.get(int(activity.copy_kind), "UNKNOWN"))
    elif what == "memset":
        name = "Memset"
    else:
        return None
    return (name, int(activity.start), int(activity.end))


def union(spans, lo=float("-inf"), hi=float("inf")):
    """The time covered by the intervals ``spans`` [(start, end)], inside [lo, hi] (the GPU's busy time)."""
    busy, end = 0, None
    for a, b in sorted(spans):
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy


def summary(rows, t0_ns, t1_ns):
    """The window from its rows and its host window [t0, t1] (CUPTI's clock, ns).

    The GPU runs behind the host by the depth of its launch queue: what was launched in [t0, t1] runs until the
    last record's end. The GPU side of the window is the host window moved by that lag (starting no later than
    the first record), and ``gpu_busy_s`` is the union of the records' intervals inside it. ``device_us`` of a
    name: its records' summed durations (records without an end, still running at the flush, are left out)."""
    by_name, spans = {}, []
    for name, start, end in rows:
        if not end or end <= start:
            continue
        c = by_name.setdefault(name, [0, 0])
        c[0] += 1
        c[1] += end - start
        spans.append((start, end))
    lag = max(0, max((b for _a, b in spans), default=t1_ns) - t1_ns)
    lo = min([t0_ns + lag] + [a for a, _b in spans])
    hi = t1_ns + lag
    kernels = [{"name": n, "count": c, "device_us": round(ns / 1e3, 3)}
               for n, (c, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1])]
    return {"status": "ok", "profiler": "cupti", "torch": None, "cuda": True,
            "wall_s": round((hi - lo) / 1e9, 6), "gpu_busy_s": round(union(spans, lo, hi) / 1e9, 6),
            "host_wall_s": round((t1_ns - t0_ns) / 1e9, 6), "gpu_lag_s": round(lag / 1e9, 6),
            "steps": 0, "kernels": kernels, "ops": [], "kernel_spans": None, "kernel_spans_why": NO_SPANS}


# -- the live window (needs cupti-python and a GPU) -----------------------------------------------------
def _noop(*_args):
    return None


class Window:
    """One CUPTI window; the loader's exit handler sees ``prof`` (set while recording) and calls ``stop``."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.prof = None
        self.rows = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.done = threading.Event()

    def stop(self):
        """End the window early (the program exits); the recording thread writes it."""
        self.stopped.set()

    def finish(self):
        self.stopped.set()
        self.done.set()


_current = {"win": None, "registered": False, "kinds": {}, "copies": {}}


def _requested():
    return BUFFER_BYTES, 0


def _completed(activities):
    win = _current["win"]
    out = []
    for a in activities:
        try:
            r = row(a, _current["kinds"], _current["copies"])
        except Exception:
            continue
        if r is not None:
            out.append(r)
    if win is not None:
        with win.lock:
            win.rows.extend(out)


def _error(cupti, exc):
    try:
        return cupti.Result(exc.status).name
    except Exception:
        return str(exc) or exc.__class__.__name__


def unavailable(reason):
    return {"status": "unavailable", "reason": reason, "profiler": "cupti"}


def answer(seconds, state=None):
    """A CUPTI window of ``seconds`` (on the loader's waiting thread), or one line saying why not. ``state``:
    the loader's state dict, given the window as ``win`` so that its exit handler can end it."""
    if not _found("cupti"):
        return unavailable(no_cupti())
    injected = [v for v in _INJECTORS if os.environ.get(v)]
    if injected:
        return unavailable("CUPTI is busy: %s is set (Nsight or another tool profiles this program); "
                           "gputop does not subscribe beside it" % injected[0])
    try:
        from cupti import cupti
    except Exception as exc:
        return unavailable("cupti-python did not load: %s: %s" % (exc.__class__.__name__, exc))
    win = Window(seconds)
    if state is not None:
        state["win"] = win
    try:
        return _record(cupti, win)
    except Exception as exc:
        return unavailable("the CUPTI window failed: %s: %s" % (exc.__class__.__name__, _error(cupti, exc)))
    finally:
        win.finish()
        _current["win"] = None


def _drain():
    """Wait, on this thread, for the GPU work launched before now (the window's last kernels) to end, so that
    the flush gets them whole: ``cuCtxSynchronize`` on each device's active primary context (CuPy's, JAX's,
    Numba's), through cuda-bindings (a dependency of cupti-python). The program's threads are not held. A
    context of the program's own (not primary) is not drained: its kernels still running are left out."""
    try:
        from cuda.bindings import driver as drv

        err, count = drv.cuDeviceGetCount()
        for i in range(count if not int(err) else 0):
            err, dev = drv.cuDeviceGet(i)
            if int(err):
                continue
            err, _flags, active = drv.cuDevicePrimaryCtxGetState(dev)
            if int(err) or not active:
                continue
            err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
            if int(err):
                continue
            try:
                if not int(drv.cuCtxPushCurrent(ctx)[0]):
                    drv.cuCtxSynchronize()
                    drv.cuCtxPopCurrent()
            finally:
                drv.cuDevicePrimaryCtxRelease(dev)
    except Exception:
        pass


def _subscribe(cupti):
    """Our CUPTI subscriber, or raise the one line for a CUPTI another profiler holds."""
    params = None
    try:
        params = cupti.SubscriberParams()
        params.struct_size = cupti.SUBSCRIBER_PARAMS_SIZE
        params.subscriber_name = "gputop"
        return cupti.subscribe_v2(_noop, None, params.ptr)
    except cupti.cuptiError as exc:
        name = _error(cupti, exc)
        if "MULTIPLE_SUBSCRIBERS" in name:
            try:
                other = params.old_subscriber_name
            except Exception:
                other = None
            other = other or "another profiler (JAX's, Nsight, ...)"
            raise _Busy("CUPTI is busy: %s holds it (%s)" % (other, name))
        # the named subscriber (CUDA 13.3's cuptiSubscribe_v2) refused otherwise: a CuPy program on driver 580
        # (CUDA 13.0) with CUPTI 13.5 said ERROR_INVALID_PARAMETER there (JAX's did not): the first API then
        try:
            return cupti.subscribe(_noop, None)
        except cupti.cuptiError as exc1:
            raise _Busy("CUPTI refused a subscriber: %s (and %s without a name)" % (name, _error(cupti, exc1)))
    except AttributeError:  # an older cupti-python without subscribe_v2
        try:
            return cupti.subscribe(_noop, None)
        except cupti.cuptiError as exc:
            raise _Busy("CUPTI is busy: another profiler (JAX's, Nsight, ...) holds it (%s)" % _error(cupti, exc))


class _Busy(Exception):
    pass


def _record(cupti, win):
    kinds = {int(cupti.ActivityKind.CONCURRENT_KERNEL): "kernel", int(cupti.ActivityKind.MEMCPY): "memcpy",
             int(cupti.ActivityKind.MEMSET): "memset"}
    _current.update(kinds=kinds, copies={int(k): k.name for k in cupti.ActivityMemcpyKind}, win=win)
    try:
        sub = _subscribe(cupti)
    except _Busy as exc:
        return unavailable(str(exc))
    enabled = []
    try:
        if not _current["registered"]:
            cupti.activity_register_callbacks(_requested, _completed)
            _current["registered"] = True
        for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
            cupti.activity_enable(kind)
            enabled.append(kind)
        t0 = cupti.get_timestamp()
        win.prof = "cupti"
        win.stopped.wait(win.seconds)
        t1 = cupti.get_timestamp()
    except cupti.cuptiError as exc:
        name = _error(cupti, exc)
        why = ("CUPTI is busy: another profiler holds it (%s)" % name if "MULTIPLE_SUBSCRIBERS" in name
               else "CUPTI refused the window: %s" % name)
        return unavailable(why)
    finally:
        for kind in enabled:
            try:
                cupti.activity_disable(kind)
            except Exception:
                pass
        try:
            if enabled:
                _drain()
                cupti.activity_flush_all(1)
        finally:
            try:
                cupti.unsubscribe(sub)
            except Exception:
                pass
    with win.lock:
        rows = list(win.rows)
    return summary(rows, t0, t1)
