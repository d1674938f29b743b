"""gputop's profile loader (gputop/runner/profile_loader): imported by ``site`` at the start of a Python
program that ``gputop --run --profile`` started. Stdlib only; it never imports torch itself.

1. Runs the user's own ``sitecustomize`` (the next one on sys.path), as ``site`` would have.
2. Starts a daemon thread that waits for gputop's requests (files in the folder ``GPUTOP_PROFILE_DIR``
   names); the program's main thread does no work for gputop until one comes.
3. On a request, if the program has imported torch: the PyTorch profiler is thread-local, so it is
   started on the program's own thread, at its next ``nn.Module`` call or optimizer step (global hooks,
   installed only while a window is pending), and stopped at the first such call after N seconds (or at
   exit). The window's summary (torch.profiler's key averages, the GPU's busy time) is written back by the
   waiting thread. Every failure becomes one ``reason`` line; the program goes on, its output unchanged.
"""

import os
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_POLL_S = 0.2
_START_WAIT_S = 30.0  # how long a request waits for a module call or an optimizer step to start on
_EXIT_WAIT_S = 20.0  # at exit, how long the program waits for a recorded window to be written
_answering = threading.Event()  # set while a recorded window is being summarised and written


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


def _write(folder, name, doc):
    import json

    tmp = os.path.join(folder, "." + name + ".tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(folder, name))
    except OSError:
        pass


class _Window:
    """One requested window: started and stopped on the program's thread by the hooks."""

    def __init__(self, torch, seconds):
        self.torch, self.seconds = torch, seconds
        self.prof = None
        self.t0 = self.wall_s = None
        self.steps = 0
        self.error = None
        self.done = threading.Event()
        self.handles = []
        self.lock = threading.RLock()

    def hook(self, *args, **kwargs):
        try:
            self._tick()
        except Exception as exc:  # never the program's problem
            self.error = self.error or "the profiler failed: %s: %s" % (exc.__class__.__name__, exc)
            self._finish()
        return None

    def step_hook(self, *args, **kwargs):
        if self.prof is not None:
            self.steps += 1
        return self.hook()

    def _tick(self):
        if self.done.is_set():
            return
        with self.lock:
            if self.done.is_set():
                return
            if self.prof is None:
                torch = self.torch
                if torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
                    self.error = "the program's own profiler is recording"
                    self._finish()
                    return
                acts = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                prof = torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False)
                prof.start()
                self.prof, self.t0 = prof, time.perf_counter()
                import atexit

                atexit.register(self.stop)
            elif time.perf_counter() - self.t0 >= self.seconds:
                self.stop()

    def stop(self):
        with self.lock:
            if self.done.is_set() or self.prof is None:
                return
            if self.torch.cuda.is_available() and self.torch.cuda.is_initialized():
                self.torch.cuda.synchronize()
            self.wall_s = time.perf_counter() - self.t0  # the window, not the profiler's own stop
            self.prof.stop()
            self._finish()

    def _finish(self):
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.done.set()


def _summary(win):
    """torch.profiler's key averages (microseconds), split into device kernels and host ops."""
    torch = win.torch
    cuda = torch.autograd.DeviceType.CUDA
    kernels, ops = [], []
    for e in win.prof.key_averages():
        dev_total = getattr(e, "device_time_total", None)
        if dev_total is None:
            dev_total = getattr(e, "cuda_time_total", 0.0)
        self_dev = getattr(e, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(e, "self_cuda_time_total", 0.0)
        if getattr(e, "device_type", None) == cuda:
            kernels.append({"name": e.key, "count": e.count, "device_us": float(self_dev)})
        else:
            ops.append({"name": e.key, "count": e.count, "self_cpu_us": float(e.self_cpu_time_total),
                        "cpu_us": float(e.cpu_time_total), "device_us": float(dev_total)})
    spans = []
    for e in win.prof.events():
        if getattr(e, "device_type", None) == cuda and e.time_range.end > e.time_range.start:
            spans.append((e.time_range.start, e.time_range.end))
    busy, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    cuda_on = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    return {"status": "ok", "torch": torch.__version__, "cuda": cuda_on, "wall_s": round(win.wall_s, 6),
            "gpu_busy_s": round(busy / 1e6, 6) if cuda_on else None, "steps": win.steps,
            "kernels": kernels, "ops": ops}


def _answer(seconds):
    torch = sys.modules.get("torch")
    if torch is None:
        return {"status": "unavailable", "reason": "the program has not imported torch (no PyTorch ops to record)"}
    version = getattr(torch, "__version__", "?")
    try:
        import torch.profiler  # noqa: F401
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except Exception:
        return {"status": "unavailable",
                "reason": "torch %s has no torch.profiler or no global module/optimizer hooks (torch 2.0+ needed)"
                          % version}
    win = _Window(torch, seconds)
    win.handles = [register_module_forward_pre_hook(win.hook), register_optimizer_step_post_hook(win.step_hook)]
    win.done.wait(_START_WAIT_S + seconds)
    if win.prof is None and not win.done.is_set():
        win._finish()
        return {"status": "unavailable",
                "reason": "no nn.Module call or optimizer step within %.0f s to start the profiler on"
                          % (_START_WAIT_S + seconds)}
    if win.error:
        return {"status": "unavailable", "reason": win.error}
    win.done.wait(60.0)
    if win.wall_s is None:
        return {"status": "unavailable", "reason": "the window did not end (no module call after it)"}
    _answering.set()
    try:
        return _summary(win)
    except Exception as exc:
        return {"status": "unavailable", "reason": "reading the profile failed: %s: %s" % (exc.__class__.__name__, exc)}


def _serve(folder):
    seq = 1
    while os.path.isdir(folder):
        req = os.path.join(folder, "request-%d" % seq)
        try:
            with open(req) as f:
                seconds = float(f.read().strip() or 3)
        except (OSError, ValueError):
            time.sleep(_POLL_S)
            continue
        t = time.time()
        try:
            doc = _answer(seconds)
        except Exception as exc:
            doc = {"status": "unavailable", "reason": "the loader failed: %s: %s" % (exc.__class__.__name__, exc)}
        doc.update(seq=seq, pid=os.getpid(), asked_at=t)
        _write(folder, "window-%d-%d.json" % (seq, os.getpid()), doc)
        _answering.clear()
        seq += 1


def _wait_at_exit():
    """A window recorded just before the program ends is still written (the daemon thread dies at exit)."""
    if _answering.is_set():
        end = time.monotonic() + _EXIT_WAIT_S
        while _answering.is_set() and time.monotonic() < end:
            time.sleep(0.02)


def _start():
    _run_user_sitecustomize()
    folder = os.environ.get("GPUTOP_PROFILE_DIR")
    if folder and os.path.isdir(folder):
        import atexit

        atexit.register(_wait_at_exit)
        threading.Thread(target=_serve, args=(folder,), name="gputop-profile-loader", daemon=True).start()


_start()
