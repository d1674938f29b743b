"""A window's CUPTI teardown is let finish (gputop/runner/profile_loader/torch_window.py ``settle``), on the CPU.

With ``TEARDOWN_CUPTI=1`` Kineto's profiler stop starts a thread that flushes CUPTI's buffers, then waits for the next
CUDA runtime call to end and finalizes CUPTI in its exit callback (pytorch/kineto CuptiActivityApi::teardownContext).
A program that makes no CUDA call after a window hung at its exit on an H100 (GPT-2 decoding, 2026-11-27: its last
window ended on time by the loader's thread while the program summed up its own profile; 0% CPU until killed at
100 s). Here Kineto's side is a stand-in with the same protocol (a real thread that waits for a call after its
flush), the window and the settling are the loader's own (torch_window.py, cupti_teardown.py), on real threads of
this process (/proc/self/task)."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

from gputop.runner.profile_loader import torch_window as TW

TD = TW._teardown  # (the one the window uses: loaded by path, as in the loader)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are read from /proc/self/task")


class Kineto:
    """Kineto's teardown: the profiler's stop (with TEARDOWN_CUPTI=1) starts a thread; once its flush is over
    (``flushed``, set by the test) it waits for the exit of the next CUDA runtime call (``call``), then finalizes."""

    def __init__(self):
        self.flushed, self.waiting, self.finalized = threading.Event(), threading.Event(), threading.Event()
        self.calls = 0
        self.thread_id = None
        self.env_at_stop = None

    def call(self):  # any CUDA runtime call: its exit callback
        self.calls += 1
        if self.waiting.is_set():
            self.finalized.set()

    def stop(self):
        self.env_at_stop = os.environ.get("TEARDOWN_CUPTI")
        started = threading.Event()

        def teardown():
            self.thread_id = str(threading.get_native_id())
            started.set()
            self.flushed.wait(60)
            self.waiting.set()
            self.finalized.wait(60)
        threading.Thread(target=teardown, daemon=True).start()
        started.wait(60)  # (std::thread: running when the stop returns)


def stand_in_torch(kineto: Kineto):
    cuda = SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                           is_current_stream_capturing=lambda: False, synchronize=kineto.call,
                           current_device=lambda: kineto.call() or 0)
    return SimpleNamespace(cuda=cuda)


def recorded_window(kineto: Kineto) -> TW.Window:
    win = TW.Window(stand_in_torch(kineto), seconds=1.0)
    win.prof = SimpleNamespace(stop=kineto.stop)
    win.t0 = time.perf_counter()
    return win


def alive(thread_id: str) -> bool:
    return os.path.exists(f"/proc/self/task/{thread_id}")


@pytest.mark.parametrize("sync", [True, False], ids=["stopped at a step", "stopped on time by the loader"])
def test_a_teardown_left_waiting_by_the_stop_is_finished_by_the_loader(sync, monkeypatch):
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    kineto = Kineto()
    win = recorded_window(kineto)
    win.stop(sync=sync)
    assert kineto.env_at_stop == "1" and "TEARDOWN_CUPTI" not in os.environ  # set around our stop only
    assert win.done.is_set() and win.teardown_threads == {kineto.thread_id}
    # the stop's own synchronize (at a step) came while the flush ran: the thread still waits for a call
    assert not kineto.finalized.is_set() and alive(kineto.thread_id)
    kineto.flushed.set()
    assert win.settle() is True  # the loader's thread, after the window
    assert kineto.finalized.is_set() and not alive(kineto.thread_id) and kineto.calls >= 1
    assert not TD._UNSETTLED


def test_a_teardown_still_waiting_after_the_loader_gave_up_is_finished_at_the_exit(monkeypatch):
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    kineto = Kineto()
    win = recorded_window(kineto)
    win.stop(sync=False)
    kineto.flushed.set()
    kineto.waiting.wait(60)
    # the loader's calls do not reach it (a stand-in for a call that fails): bounded, and kept for the exit
    assert TD.settle(win.torch, win.teardown_threads, seconds=0.2, nudge=lambda: None) is False
    assert TD._UNSETTLED == {kineto.thread_id} and alive(kineto.thread_id)
    TD.settle_at_exit(win.torch)  # the loader's exit handler, on the program's main thread
    assert kineto.finalized.is_set() and not alive(kineto.thread_id) and not TD._UNSETTLED


def test_a_window_without_cuda_or_without_a_teardown_thread_has_nothing_to_settle(monkeypatch):
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    calls = []
    torch = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False,
                                                 current_device=lambda: calls.append(1)))
    win = TW.Window(torch, seconds=1.0)
    win.prof = SimpleNamespace(stop=lambda: None)
    win.t0 = time.perf_counter()
    win.stop()
    assert win.teardown_threads == set() and win.settle() is True and calls == []


def test_a_window_started_at_a_step_has_a_warm_up_step_and_records_from_the_next():
    """As torch.profiler's schedule: prepared at the step the request found (Kineto's set-up), recording from the
    next one, so the set-up (and, on a job's ranks, a peer's wait for a slower set-up) is not in the window. Real
    torch profiler on the CPU: steps marked with record_function, the optimizer's step hook called after each."""
    torch = pytest.importorskip("torch")
    win = TW.Window(torch, seconds=60, max_steps=3, start_at=0.0)
    for i in range(8):
        with torch.profiler.record_function(f"gputop_test_step_{i}"):
            torch.ones(64).sum()
        win.step_hook()
        if i == 0:
            assert win.warming is not None and win.prof is None and not win.started.is_set()
        if win.done.is_set():
            break
    assert i == 4 and win.started_by == "step" and win.steps == 3
    steps = sorted(e.name for e in win.prof.events() if e.name.startswith("gputop_test_step_"))
    assert steps == ["gputop_test_step_2", "gputop_test_step_3", "gputop_test_step_4"]


def test_a_warm_up_that_never_records_lets_go_of_the_prepared_profiler():
    """The program starts its own profiler during the warm-up step: ours, prepared, is let go of, and the
    program's records as if ours had never been there."""
    torch = pytest.importorskip("torch")
    win = TW.Window(torch, seconds=60, max_steps=3, start_at=0.0)
    win.guard_profilers()
    win.step_hook()
    assert win.warming is not None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as own:
        with torch.profiler.record_function("the_programs_own"):
            torch.ones(8).sum()
    assert win.error == "the program started its own profiler" and win.done.is_set() and win.warming is None
    assert any(e.name == "the_programs_own" for e in own.events())
