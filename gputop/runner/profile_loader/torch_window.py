"""A torch.profiler window of a prepared program (the loader's, gputop/runner/profile_loader): started at the
program's next step (a top-level ``nn.Module`` call or an optimizer step, on whichever thread makes it) after the
request's start time, or, where no step comes within the window's seconds (a plain tensor loop, CUDA graph replays,
a loop of torch.matmul and all_reduce), from the loader's own thread at that time; stopped after N seconds or N steps
(optimizer steps, else top-level forward passes). A window started at a step has a warm-up step first, as
torch.profiler's schedule does: the profiler is prepared at that step (Kineto sets CUPTI up: tens to hundreds of
milliseconds, a first time in a process more) and records from the next, so the set-up is not in the window. Ranks
of a job asked together are prepared at the same step and record from the next, after their collectives have
waited for the slowest set-up: a rank that set up faster does not count its wait for its peer (on 2 H100s, 2026-11-27,
the set-up's wait was the most of a 10-step window's NCCL time: tensor parallel 31% and 94% in two windows against
50% in its steady steps). They still begin ms apart (the first counts it in its next collective), so a job's window
that ends at its steps lasts at least ``min_seconds`` (accelerate on 2 H200s: 11 ms in a 0.05 s window, 15 pt).
A window ends at a mark (``END_MARK``, a host range in the profiler's clock, just before its stop): device work after
it is not the window's (kineto_summary.py). A job's rank marks it without draining its device: the steps its host ran
ahead wait in their collectives for each peer's own stop (Kineto's, ~0.25 s; accelerate on 4 H100s, 2026-11-27: the
rank that drained counted 0.27 s more NCCL time than its peer, 56% of its kernel time against 29%).

Which threads: where torch has ``profile_all_threads`` (its experimental config; torch 2.7+), the window holds the
host ops of every thread of the program and may be started and stopped on any of them (``ops_threads`` "all");
on an older torch, only the ops of the thread it started on ("one"), and it is stopped on that thread. Kernels,
copies and fills come through CUPTI, which is the whole process's either way.

Never inside a CUDA graph capture (a synchronize there would break the program's capture): a step seen while the
program's thread captures is let pass. A window the loader's thread ends does not synchronize the device (another
thread may be capturing): the kernels still queued at its stop are left out. After every window the loader lets
Kineto's CUPTI teardown finish (cupti_teardown.py): one left waiting for a CUDA call hangs the program at its exit.

Stdlib only: torch is the program's, passed in.
"""

import importlib.util
import os
import sys
import threading
import time
import warnings

_spec = importlib.util.spec_from_file_location("_gputop_quiet_stderr",
                                               os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "quiet_stderr.py"))
_quiet_stderr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_quiet_stderr)
_teardown = sys.modules.get("_gputop_cupti_teardown")
if _teardown is None:  # (one per process: it keeps the teardowns still waiting for the exit handler)
    _spec = importlib.util.spec_from_file_location("_gputop_cupti_teardown",
                                                   os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                "cupti_teardown.py"))
    _teardown = importlib.util.module_from_spec(_spec)
    sys.modules["_gputop_cupti_teardown"] = _teardown
    _spec.loader.exec_module(_teardown)


_MODULE_PY = os.path.join("nn", "modules", "module.py")
END_MARK = "gputop::window_end"  # the host range that marks a window's end (module doc)
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


settle_at_exit = _teardown.settle_at_exit  # (the agent's exit handler calls it)
TearingDown = _teardown.TearingDown


class Profile:
    """torch's autograd profiler with Kineto (what torch.profiler.profile wraps), with torch.profiler's names:
    ``start``, ``stop``, ``key_averages``, ``events``, ``export_chrome_trace``, ``profiler`` (its raw results).
    Not torch.profiler.profile itself: its start looks up ``torch._inductor`` (``hasattr(torch, "_inductor")``
    imports it: some 800 modules and seconds, on the starting thread, racing the program's own imports where that is
    the loader's: a CPU program under test died of a circular import). Where torch has ``profile_all_threads`` it
    records every thread's ops (``all_threads``)."""

    def __init__(self, torch, cuda):
        kwargs = dict(use_cpu=True, use_device="cuda" if cuda else None, use_kineto=True, record_shapes=False,
                      with_stack=False)
        self.all_threads = False
        try:
            kwargs["experimental_config"] = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
            self.all_threads = True
        except Exception:  # an older torch: the starting thread's ops only
            pass
        try:
            self.profiler = torch.autograd.profiler.profile(**kwargs)
        except TypeError:
            kwargs.pop("experimental_config", None)
            self.all_threads = False
            self.profiler = torch.autograd.profiler.profile(**kwargs)

    def start(self):
        self.profiler.__enter__()

    def prepare(self):
        """Kineto and CUPTI set up, nothing recorded yet (torch.profiler's warm-up); :meth:`start_prepared` records."""
        self.profiler._prepare_trace()

    def start_prepared(self):
        self.profiler._start_trace()

    def stop(self):
        """Stopped without the device synchronize of the profiler's own exit (on the loader's thread it would be the
        wrong device's, and another thread may be capturing a CUDA graph): the caller synchronizes where it may."""
        saved, self.profiler.use_device = self.profiler.use_device, None
        try:
            self.profiler.__exit__(None, None, None)
        finally:
            self.profiler.use_device = saved

    def key_averages(self):
        return self.profiler.key_averages()

    def events(self):
        return self.profiler.function_events

    def export_chrome_trace(self, path):
        return self.profiler.export_chrome_trace(path)


def _start_quietly(start):
    """``start()`` (a profiler's preparing or starting); off the thread that imported torch, Kineto's line about it
    is dropped: not the program's output (its start on time is the loader's thread's)."""
    if threading.current_thread() is threading.main_thread():
        start()
    else:
        with _quiet_stderr.DroppingLine():
            start()


def _cuda_on(torch):
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def _capturing(torch):
    """Whether this thread's current stream is capturing a CUDA graph (nothing of the window's may run then)."""
    try:
        return _cuda_on(torch) and torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


class Window:
    """One requested window: started at a step (the hooks) or on time (the loader's thread, :meth:`start_on_time`),
    stopped at a step after its seconds or steps, or on time (:meth:`stop_on_time`)."""

    def __init__(self, torch, seconds, max_steps=0, start_at=0.0, min_seconds=0.0):
        self.torch, self.seconds, self.max_steps = torch, seconds, max_steps
        self.min_seconds = min(min_seconds, seconds)  # a job's window ends at its steps only after this (module doc)
        self.prof = None
        self.t0 = self.wall_s = self.started_at = self.stop_s = None
        self.raw = None
        self.steps = 0  # optimizer steps in the window
        self.forwards = 0  # top-level nn.Module calls in the window (a forward pass: a token when decoding)
        self.depth = {}  # thread -> nn.Module calls under way on it (forward pre-hook in, forward hook out)
        self.thread = None  # the thread the profiler started on
        self.all_threads = False  # it records every thread's ops and may stop on any (profile_all_threads)
        self.started_by = None  # "step" or "time"
        self.error = None
        self.started = threading.Event()
        self.done = threading.Event()
        self.handles = []
        self._quiet = None  # the warnings filter quiet() added (removed by finish())
        self.lock = threading.RLock()
        self.start_at = start_at  # Unix time: the window starts at the first module call or step after it (a job's
        # ranks asked together start at the same step: one rank profiled alone slows its host, and the others then
        # wait for it in their collectives)
        self.ended_by = None  # why the window ended before its seconds or steps (the program's own profiler)
        self.warming = None  # the profiler prepared at a step, recording from the next (the warm-up step: module doc)
        self.warming_thread = None
        self._starting = False  # our own profiler's start is under way (the guard lets it through)
        self._guarded_cls = self._original_prepare = None
        self.teardown_threads = set()  # the threads our stop started (Kineto's teardown): settle() sees them end

    def hook(self, *args, **kwargs):
        """Every nn.Module call (the global forward pre-hook): the window starts (at a top-level call: a forward
        pass's start) or ends here."""
        self._guarded(entry=True)
        if self.prof is not None:
            me = threading.get_ident()
            self.depth[me] = self.depth.get(me, 0) + 1
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
        me = threading.get_ident()
        depth = self.depth.get(me, 0)
        if depth > 0:
            self.depth[me] = depth - 1
            if (depth == 1 and self.prof is not None and not self.done.is_set()
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
            if self.done.is_set() or _capturing(self.torch):
                return
            if self.prof is None:
                if self.warming is not None:  # the step after the warm-up one: it records from here, on the
                    # thread that prepared it (started on another, a threaded server's window lost a pass's ops)
                    if threading.get_ident() == self.warming_thread:
                        self._begin("step")
                elif time.time() >= self.start_at:
                    self._start("step")
            elif (self.all_threads or threading.get_ident() == self.thread) and \
                    (time.perf_counter() - self.t0 >= self.seconds or 0 < self.step_limit() <= self.counted()[0]
                     and time.perf_counter() - self.t0 >= self.min_seconds):
                self.stop(drain=self.min_seconds <= 0)  # a job's rank: not (module doc)

    def _start(self, by):
        """Start the profiler on this thread (under the lock)."""
        torch = self.torch
        if torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled():
            self.error = "the program's own profiler is recording"
            self.finish()
            return
        prof = Profile(torch, _cuda_on(torch))
        self.all_threads = prof.all_threads
        self._starting = True
        try:
            _start_quietly(prof.prepare if by == "step" else prof.start)
        finally:
            self._starting = False
        if by == "step":  # the warm-up step: it records from the next (module doc)
            self.warming, self.warming_thread = prof, threading.get_ident()
            return
        self._started(prof, by)

    def _begin(self, by):
        """The warm-up step is over (the next step, or the loader's thread on time): record (under the lock)."""
        prof, self.warming = self.warming, None
        if by == "step" and _cuda_on(self.torch):  # (a program's thread at a step, not capturing: _tick)
            self.torch.cuda.synchronize()  # the warm-up step's kernels done, a peer's wait for a slower set-up too
        _start_quietly(prof.start_prepared)
        self._started(prof, by)

    def _started(self, prof, by):
        self.prof, self.t0, self.thread = prof, time.perf_counter(), threading.get_ident()
        self.started_at, self.started_by = time.time(), by  # the window in the program's wall clock (throughput
        # outside it), from the step it began at
        self.started.set()

    def start_on_time(self):
        """The loader's thread: no step came within the window's seconds after its start time; it starts now."""
        with self.lock:
            if self.prof is None and not self.done.is_set():
                self._begin("time") if self.warming is not None else self._start("time")

    def stop_on_time(self, why=None):
        """The loader's thread ends a window that can be ended from any thread (``why``: it was due and no step
        came); one started on this thread is ended here too. False where it cannot be (a thread-local profiler)."""
        with self.lock:
            if self.done.is_set() or self.prof is None:
                return True
            if not (self.all_threads or threading.get_ident() == self.thread):
                return False
            self.stop(sync=False)
            if why and self.ended_by is None:
                self.ended_by = why
            return True

    def stop(self, teardown=True, sync=True, drain=True):
        """End the window. ``teardown``: CUPTI is let go of as the profiler stops (:class:`TearingDown`); not at the
        program's exit, where nothing runs after it. ``sync``: the device may be synchronized (a program's thread not
        capturing a graph; not the loader's); ``drain``: before the end mark too (not a job's rank: module doc)."""
        with self.lock:
            if self.done.is_set() or self.prof is None:
                return
            cuda = _cuda_on(self.torch)
            sync = sync and cuda and not _capturing(self.torch)
            if sync and drain:
                self.torch.cuda.synchronize()
            self.wall_s = time.perf_counter() - self.t0  # the window, not the profiler's own stop
            try:  # the end mark (module doc); a torch without it (or torn down at the exit): the window unmarked
                with self.torch.autograd.profiler.record_function(END_MARK):
                    pass
            except Exception:
                pass
            before = _teardown.tasks() if cuda else None  # (a teardown of the program's own TEARDOWN_CUPTI too)
            with TearingDown(teardown and cuda):
                self.prof.stop()
            if before is not None:
                self.teardown_threads = _teardown.tasks() - before
            if teardown and sync:
                self.torch.cuda.synchronize()  # Kineto finalizes CUPTI from the next CUDA runtime call: this one
            self.stop_s = time.perf_counter() - self.t0 - self.wall_s  # the stopping thread, held by the stop
            self.finish()

    def settle(self, seconds=None):
        """After the window (on the loader's thread): Kineto's teardown let finish (cupti_teardown.settle)."""
        if not self.teardown_threads:
            return True
        return _teardown.settle(self.torch, self.teardown_threads, _teardown.SETTLE_S if seconds is None else seconds)

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
                self._let_go_of_warmup()
                self.finish()
            elif self.all_threads or threading.get_ident() == self.thread:
                self.ended_by = "the program started its own profiler"
                self.stop(teardown=False)  # its profiler takes CUPTI over at once

    def quiet(self):
        """Before the global hooks are registered: torch's warning about them ignored until :meth:`finish`."""
        warnings.filterwarnings("ignore", message=_COMPILE_HOOKS_WARNING)
        self._quiet = warnings.filters[0]

    def _let_go_of_warmup(self):
        """A profiler prepared for a warm-up step that will not record (the window ends before it began): started and
        stopped at once, so that Kineto is left as it was found."""
        prof, self.warming = self.warming, None
        if prof is None:
            return
        try:
            _start_quietly(prof.start_prepared)
            with TearingDown(False):
                prof.stop()
        except Exception:
            pass

    def finish(self):
        if self.warming is not None and self.prof is None:
            self._let_go_of_warmup()
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
