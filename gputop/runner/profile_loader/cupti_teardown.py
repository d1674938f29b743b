"""CUPTI let go of after a torch.profiler window (the loader's, gputop/runner/profile_loader): ``TEARDOWN_CUPTI=1``
around the window's own stop (:class:`TearingDown`), then Kineto's teardown let finish (:func:`settle`; again at the
program's exit, :func:`settle_at_exit`). Stdlib only; torch is the program's, passed in.
"""

import os
import time

# How long the loader makes CUDA calls for Kineto's teardown thread to finish (see settle): the thread finalizes at
# the first call after its flush (milliseconds); a thread the stop's span saw start that is not Kineto's (the
# program's own, started meanwhile) does not end, and costs the loader's thread this long, the exit EXIT_SETTLE_S.
SETTLE_S = 1.0
EXIT_SETTLE_S = 0.5
_UNSETTLED = set()  # Kineto teardown threads (ids in /proc/self/task) still waiting: the exit handler tries again


def tasks():
    """The ids of this process's threads now (Linux's /proc/self/task; elsewhere none)."""
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def settle(torch, threads, seconds=SETTLE_S, nudge=None):
    """Let Kineto finish tearing CUPTI down. With ``TEARDOWN_CUPTI=1`` the profiler's stop starts a thread that
    flushes, then waits for the *next* CUDA runtime call to end: cuptiFinalize runs in that call's exit callback
    (pytorch/kineto's CuptiActivityApi::teardownContext). A program that makes no CUDA call after the window (it is
    summing up its own profile, writing files, exiting) leaves that thread waiting, and hangs at its exit: GPT-2
    decoding on an H100 (2026-11-27), whose last window the loader's thread ended on time while the program summed up
    its own profile, sat at 0% CPU after its last line until ``timeout`` killed it at 100 s. A synchronize right after
    the stop comes before the thread is waiting. So the loader makes one cheap call (``cudaGetDevice``: no stream,
    no device work, allowed while another thread captures a CUDA graph) every few milliseconds until the threads the
    stop started (``threads``: ids in /proc/self/task) have ended, at most ``seconds``; whether they did."""
    if nudge is None:
        def nudge():
            torch.cuda.current_device()
    pending = set(threads)
    end = time.monotonic() + seconds
    while True:
        pending = {t for t in pending if os.path.exists(os.path.join("/proc/self/task", t))}
        if not pending:
            _UNSETTLED.difference_update(threads)
            return True
        if time.monotonic() >= end:
            _UNSETTLED.update(pending)
            return False
        try:
            nudge()
        except Exception:
            _UNSETTLED.update(pending)
            return False
        time.sleep(0.005)


def settle_at_exit(torch):
    """At the program's exit (the loader's exit handler, on the main thread): a teardown still waiting is let finish
    now, before the interpreter and CUDA's own teardown wait on it for good."""
    if _UNSETTLED and torch is not None:
        settle(torch, set(_UNSETTLED), EXIT_SETTLE_S)


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


