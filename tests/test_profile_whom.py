"""Whom a window is asked of, and when (gputop/session/profile_whom.py, profiling.ProfileWindows.ask), on real process
trees of this machine with stand-in loaders' folders (tests/loader_util.py): what each process says it imported is
what its loader would write; NVML's holders are given.

The shapes are those of the 2-H100 run of 2026-11-27 (docs/diagnosis.md "Every launcher and loop shape"): accelerate's
launcher, which imports torch, asked while its ranks were still importing (a window of no kernel); GPT-2 decoding
asked before it made its CUDA context (the same); torchrun's two ranks asked when one of them held its GPU and the
other, 1.0 s later, did not (a window of one rank, profiled alone: NCCL 43% of its kernel time against 90%)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import loader_util
from export_util import wait_for
from fault_util import cmdline, sigkill
from gputop.runner.profile_loader import protocol as P
from gputop.session import profile_whom as W
from gputop.session import profiling

PY = sys.executable
SLEEP = "import time; time.sleep(120)"
TRACKER = "from multiprocessing.resource_tracker import main\nimport time; time.sleep(120)"


@pytest.fixture
def tree():
    """A launcher (a Python process) and its children, started for real; each killed at the end."""
    started = []

    def make(*children: str) -> tuple[int, list[int]]:
        code = ("import subprocess, sys, time\n"
                f"ps = [subprocess.Popen([sys.executable, '-c', c]) for c in {list(children)!r}]\n"
                "print(' '.join(str(p.pid) for p in ps), flush=True)\n" + SLEEP)
        launcher = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
        kids = [int(x) for x in launcher.stdout.readline().split()]
        started.append((launcher, kids))
        for pid, c in zip(kids, children):  # each child exec'd (between fork and exec it reads as its parent)
            wait_for(lambda: c.encode() in cmdline(pid), 60, f"child {pid} to start its program", step=0.01)
        return launcher.pid, kids
    yield make
    for launcher, kids in started:
        sigkill(kids)
        launcher.kill()
        launcher.wait(timeout=30)


def loaders(monkeypatch, tmp_path, token, frameworks: dict[int, tuple], cuda=()):
    for pid, fw in frameworks.items():
        folder = loader_util.stand_in(monkeypatch, tmp_path, run=token, frameworks=fw, pid=pid)
        if pid in cuda:
            loaded = P.read_json(os.path.join(folder, P.LOADED))
            P.write_loaded(folder, {**loaded, "cuda": True})


def asked_pids(pw) -> set[int]:
    return set(pw.asked[-1]["asked"].seqs)


def test_a_launcher_whose_ranks_are_still_importing_is_not_asked(monkeypatch, tmp_path, tree):
    """accelerate's launcher has imported torch, its ranks (carrying the loader) not yet: nobody is asked until the
    ranks have; then the ranks, never the launcher."""
    launcher, (r0, r1) = tree(SLEEP, SLEEP)
    pw = profiling.ProfileWindows(first_at=0.0)
    loaders(monkeypatch, tmp_path, pw.token, {launcher: ("torch",), r0: (), r1: ()})
    assert profiling.choose(pw.targets(), set()) == []
    loaders(monkeypatch, tmp_path, pw.token, {r0: ("torch",), r1: ("torch",)})
    assert {t.pid for t in profiling.choose(pw.targets(), set())} == {r0, r1}


def test_multiprocessings_resource_tracker_does_not_make_its_parent_a_launcher(monkeypatch, tmp_path, tree):
    """A one-process program whose multiprocessing started its resource tracker (which carries the loader too) is
    still the process asked where NVML lists none (a CPU machine)."""
    main, (tracker,) = tree(TRACKER)
    pw = profiling.ProfileWindows(first_at=0.0)
    loaders(monkeypatch, tmp_path, pw.token, {main: ("torch",), tracker: ()})
    assert [t.pid for t in profiling.choose(pw.targets(), set())] == [main]


def test_a_program_with_torch_and_no_gpu_yet_is_waited_for_where_the_node_has_gpus(monkeypatch, tmp_path, tree):
    """GPT-2 decoding builds its model for 17 s before its CUDA context: on a node with GPUs a window is asked once it
    holds one (or torch has initialised CUDA in it), or after CUDA_WAIT_S; on a node without GPUs after HOLD_S; a
    CUDA program without torch (CuPy: no signal of its start-up) after HOLD_S too."""
    prog, _ = tree()
    for node_gpus, fw, wait_s in ((1, ("torch",), profiling.CUDA_WAIT_S), (0, ("torch",), profiling.HOLD_S),
                                  (1, ("cupy",), profiling.HOLD_S)):
        pw = profiling.ProfileWindows(first_at=0.0)
        pw.node_gpus = node_gpus
        loaders(monkeypatch, tmp_path, pw.token, {prog: fw})
        want = profiling.NO_CUDA_YET if fw == ("torch",) and node_gpus else profiling.NO_TARGET
        assert pw.ask("the test", 0.0, wait=True) == want and pw.ask("the test", wait_s - 0.5, wait=True) == want
        assert pw.ask("the test", wait_s, wait=True) is None and asked_pids(pw) == {prog}
    pw = profiling.ProfileWindows(first_at=0.0)
    pw.node_gpus = 1
    loaders(monkeypatch, tmp_path, pw.token, {prog: ("torch",)}, cuda={prog})
    assert pw.ask("the test", 0.0, wait=True) is None and asked_pids(pw) == {prog}  # CUDA initialised: at once
    pw = profiling.ProfileWindows(first_at=0.0)
    pw.node_gpus, pw.holders = 1, {prog}
    loaders(monkeypatch, tmp_path, pw.token, {prog: ("torch",)})
    assert pw.ask("the test", 0.0, wait=True) is None and asked_pids(pw) == {prog}  # on its GPU: at once


def test_a_jobs_ranks_are_asked_together_once_all_hold_their_gpus(monkeypatch, tmp_path, tree):
    """torchrun's first rank on its GPU, the second (torch imported) not yet: the window waits for it (HOLD_S at
    most), then asks both with one start time; the launcher and multiprocessing's tracker are never waited for."""
    launcher, (r0, r1, tracker) = tree(SLEEP, SLEEP, TRACKER)
    pw = profiling.ProfileWindows(first_at=0.0)
    loaders(monkeypatch, tmp_path, pw.token, {launcher: ("torch",), r0: ("torch",), r1: ("torch",), tracker: ()})
    pw.holders = {r0}
    assert W.late_mates([t for t in pw.targets() if t.pid == r0], pw.targets()) == [r1]
    assert pw.ask("the test", 10.0, wait=True) == profiling.MATES_LATE % r1 and not pw.asked
    pw.holders = {r0, r1}
    assert pw.ask("the test", 11.0, wait=True) is None and asked_pids(pw) == {r0, r1}
    req = [P.read_request(t.folder, 1) for t in pw.targets() if t.pid in (r0, r1)]
    assert req[0].start_at == req[1].start_at

    pw = profiling.ProfileWindows(first_at=0.0)  # the other rank never comes: the first is asked after HOLD_S
    loaders(monkeypatch, tmp_path, pw.token, {r0: ("torch",), r1: ("torch",)})
    pw.holders = {r0}
    assert pw.ask("the test", 10.0, wait=True) == profiling.MATES_LATE % r1
    assert pw.ask("the test", 10.0 + profiling.HOLD_S, wait=True) is None and asked_pids(pw) == {r0}

    pw = profiling.ProfileWindows(first_at=None)  # the user's key (the TUI's w, a POST): asked at once, no wait
    loaders(monkeypatch, tmp_path, pw.token, {r0: ("torch",), r1: ("torch",)})
    pw.holders = {r0}
    assert pw.ask_now(3.0).startswith(f"asked for window 1 (3 s) of pid {r0}") and asked_pids(pw) == {r0}
