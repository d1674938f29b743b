"""A torch.profiler window of the program gputop started (the loader's, gputop/runner/profile_loader): started at
the program's next ``nn.Module`` call on its own thread (the profiler is thread-local) and stopped there after N
seconds or N steps (optimizer steps, else top-level forward passes). Stdlib only: torch is the program's, passed in.
"""

import os
import sys
import threading
import time
import warnings


_MODULE_PY = os.path.join("nn", "modules", "module.py")
FORWARDS_PER_STEP = 10  # a window that counts forward passes (no optimizer) ends after this many a step
# torch warns once per call site when a torch.compile'd module is called while global module hooks exist ("will
# cause the hooks to fire an extra time for the OptimizedModule"): the hooks are the window's, the warning would be
# a line in the program's output that the program did not write. Ignored while they are registered.
_COMPILE_HOOKS_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"


def _nesting():
    """How many nn.Module calls are under way on this thread (from its stack: torch's ``Module._call_impl`` frames;
    a forward pre-hook runs inside its module's): 1 at a top-level call."""
    n, f = 0, sys._getframe(1)
    while f is not None:
        code = f.f_code
        if code.co_name == "_call_impl" and code.co_filename.endswith(_MODULE_PY):
            n += 1
        f = f.f_back
    return n


class TearingDown:
    """``TEARDOWN_CUPTI=1`` while the window's profiler stops, unless the program set its own: Kineto then
    finalizes CUPTI, which otherwise stays subscribed and slows the program for good (pytorch/pytorch#144455;
    GPT-2 training on an H100: 9% slower after one window without it, 0.5% with it). Only around our stop:
    Kineto reads the variable at each stop, and a program's own profiler that stopped with it just before the
    program ended hung at exit (GPT-2 and the compiled MLP of the corpus, exit 124)."""

    def __init__(self, on):
        self.on = on and "TEARDOWN_CUPTI" not in os.environ

    def __enter__(self):
        if self.on:
            os.environ["TEARDOWN_CUPTI"] = "1"

    def __exit__(self, *exc):
        if self.on:
            os.environ.pop("TEARDOWN_CUPTI", None)
        return False


class Window:
    """One requested window: started and stopped on the program's thread by the hooks."""

    def __init__(self, torch, seconds, max_steps=0):
        self.torch, self.seconds, self.max_steps = torch, seconds, max_steps
        self.prof = None
        self.t0 = self.wall_s = self.started_at = self.stop_s = None
        self.raw = None
        self.steps = 0  # optimizer steps in the window
        self.forwards = 0  # top-level nn.Module calls in the window (a forward pass: a token when decoding)
        self.depth = 0  # nn.Module calls under way on the program's thread (forward pre-hook in, forward hook out)
        self.thread = None  # the profiler is thread-local: started and stopped on this thread
        self.error = None
        self.done = threading.Event()
        self.handles = []
        self._quiet = None  # the warnings filter quiet() added (removed by finish())
        self.lock = threading.RLock()
        self.start_at = 0.0  # Unix time: the window starts at the first module call or step after it (a job's ranks
        # asked together start at the same step: one rank profiled alone slows its host, and the others then wait
        # for it in their collectives)
        self.ended_by = None  # why the window ended before its seconds or steps (the program's own profiler)
        self._starting = False  # our own profiler's start is under way (the guard lets it through)
        self._guarded_cls = self._original_prepare = None

    def hook(self, *args, **kwargs):
        """Every nn.Module call (the global forward pre-hook): the window starts (at a top-level call: a forward
        pass's start) or ends here."""
        self._guarded(entry=True)
        if threading.get_ident() == self.thread:
            self.depth += 1
        return None

    def _guarded(self, entry=False):
        try:
            if self.prof is None and entry and _nesting() > 1:
                return  # inside a forward pass: the window starts with the next one
            self._tick()
        except Exception as exc:  # never the program's problem
            self.error = self.error or "the profiler failed: %s: %s" % (exc.__class__.__name__, exc)
            self.finish()

    def out_hook(self, *args, **kwargs):
        """Every nn.Module call's end (the global forward hook): a top-level one ends a forward pass, counted as a
        step where no gradient is recorded (inference, decoding: a training loop's steps are its optimizer's)."""
        if threading.get_ident() == self.thread and self.depth > 0:
            self.depth -= 1
            if (self.depth == 0 and self.prof is not None and not self.done.is_set()
                    and not self.torch.is_grad_enabled()):
                self.forwards += 1
        return None

    def counted(self):
        """(steps, what a step is): optimizer steps where the window saw one, else top-level forward passes without
        gradients (inference); neither: (0, None), and the window ends after its seconds."""
        if self.steps:
            return self.steps, "optimizer step"
        return (self.forwards, "forward pass") if self.forwards else (0, None)

    def step_limit(self):
        """The steps the window ends after: ``max_steps`` optimizer steps, or ``FORWARDS_PER_STEP`` times as many
        forward passes (decoding's tokens are cheap, and a few of them are one prompt's prefill or one generation's
        middle: GPT-2 decoding on an H100, 10 tokens a window read GEMM 49% and 38% of kernel time in two windows,
        100 tokens 42% and 42%, as the program's own torch.profiler over its last steps)."""
        return self.max_steps * (FORWARDS_PER_STEP if self.counted()[1] == "forward pass" else 1)

    def step_hook(self, *args, **kwargs):
        if self.prof is not None:
            self.steps += 1
        self._guarded()
        return None

    def _tick(self):
        if self.done.is_set():
            return
        with self.lock:
            if self.done.is_set():
                return
            if self.prof is None:
                if time.time() < self.start_at:
                    return
                torch = self.torch
                if torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
                    self.error = "the program's own profiler is recording"
                    self.finish()
                    return
                acts = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                prof = torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False)
                started_at = time.time()  # the window in the program's wall clock (throughput outside it), from
                # the step it began at (the profiler's start, tens of ms, is the window's)
                self._starting = True
                try:
                    prof.start()
                finally:
                    self._starting = False
                self.prof, self.t0, self.thread = prof, time.perf_counter(), threading.get_ident()
                self.started_at = started_at
            elif threading.get_ident() == self.thread and (time.perf_counter() - self.t0 >= self.seconds or
                                                           0 < self.step_limit() <= self.counted()[0]):
                self.stop()

    def stop(self, teardown=True):
        """End the window on the program's thread. ``teardown``: CUPTI is let go of as the profiler stops
        (:class:`TearingDown`); not at the program's exit, where nothing runs after it."""
        with self.lock:
            if self.done.is_set() or self.prof is None:
                return
            cuda = self.torch.cuda.is_available() and self.torch.cuda.is_initialized()
            if cuda:
                self.torch.cuda.synchronize()
            self.wall_s = time.perf_counter() - self.t0  # the window, not the profiler's own stop
            with TearingDown(teardown and cuda):
                self.prof.stop()
            if teardown and cuda:
                self.torch.cuda.synchronize()  # Kineto finalizes CUPTI from the next CUDA runtime call: this one
            self.stop_s = time.perf_counter() - self.t0 - self.wall_s  # the program's thread, held by the stop
            self.finish()

    def guard_profilers(self):
        """While the window is pending or recording, a profiler the program starts itself comes first: torch keeps
        one profiling session, and the program's would end ours midway (and ours its: "disableProfiler called but no
        active profiling session found" in the program's output, its profile cut). Every torch.profiler and
        autograd profiler is prepared by ``torch.autograd.profiler.profile._prepare_trace``: wrapped until
        :meth:`finish`, it ends our window first (one not started yet gives way with one line)."""
        cls = getattr(getattr(self.torch, "autograd", None), "profiler", None)
        cls = getattr(cls, "profile", None)
        original = getattr(cls, "_prepare_trace", None)
        if original is None:
            return
        win = self

        def _prepare_trace(prof, *args, **kwargs):
            win.give_way()
            return original(prof, *args, **kwargs)

        self._guarded_cls, self._original_prepare = cls, original
        cls._prepare_trace = _prepare_trace

    def give_way(self):
        """The program starts a profiler of its own (see :meth:`guard_profilers`)."""
        if self._starting or self.done.is_set():
            return
        with self.lock:
            if self.done.is_set():
                return
            if self.prof is None:
                self.error = "the program started its own profiler"
                self.finish()
            elif threading.get_ident() == self.thread:
                self.ended_by = "the program started its own profiler"
                self.stop(teardown=False)  # its profiler takes CUPTI over at once

    def quiet(self):
        """Before the global hooks are registered: torch's warning about them ignored until :meth:`finish`."""
        warnings.filterwarnings("ignore", message=_COMPILE_HOOKS_WARNING)
        self._quiet = warnings.filters[0]

    def finish(self):
        cls, original, self._guarded_cls = self._guarded_cls, self._original_prepare, None
        if cls is not None:
            cls._prepare_trace = original
        quiet, self._quiet = self._quiet, None
        if quiet is not None:
            try:
                warnings.filters.remove(quiet)
                warnings._filters_mutated()  # (what warnings.filterwarnings itself calls after a change)
            except (ValueError, AttributeError):
                pass
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.done.set()
