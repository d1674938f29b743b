"""The one child supervisor (gputop/runner/child.py) with real processes: its stop policy, the group
kill when the child exits, a stop asked before the launch, and the watchdog when its parent dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from gputop.runner.child import Child

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
# a child that starts a grandchild (sleep), writes both pids, then sleeps; IGNORE makes it ignore SIGINT
TREE = ("import os, signal, subprocess, sys, time\n"
        "if sys.argv[2] == 'ignore':\n    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "g = subprocess.Popen(['sleep', '300'])\n"
        "open(sys.argv[1] + '.tmp', 'w').write(f'{os.getpid()} {g.pid}')\n"
        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "time.sleep(300)\n")


def wait_file(path: Path, timeout: float = 30.0) -> list[int]:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never written"
        time.sleep(0.02)
    return [int(x) for x in path.read_text().split()]


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``timeout``: a SIGKILLed process ends when the kernel has torn it
    down, not at the kill's return (on a loaded machine a grandchild read still "sleeping" just after its group's
    kill: test_a_child_that_exits_takes_its_group_with_it failed beside two test suites)."""
    end = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def test_stop_is_sigint_then_sigkill_to_the_group_after_the_grace_period(tmp_path):
    pids = tmp_path / "pids"
    c = Child([PY, "-c", TREE, str(pids), "ignore"], grace_s=0.5).start()
    child, grandchild = wait_file(pids)
    t = time.monotonic()
    c.stop()
    assert c.wait(30) == -signal.SIGKILL and c.killed and not c.kill_asked
    assert time.monotonic() - t >= 0.5  # the grace period was given
    assert gone(child) and gone(grandchild)


def test_a_child_that_exits_takes_its_group_with_it(tmp_path):
    pids = tmp_path / "pids"
    code = TREE.replace("time.sleep(300)\n", "raise SystemExit(3)\n")
    c = Child([PY, "-c", code, str(pids), "obey"]).start()
    assert c.wait(30) == 3
    child, grandchild = wait_file(pids)
    assert gone(child) and gone(grandchild)  # the grandchild's sleep 300 was killed with the group


def test_a_second_stop_kills_at_once(tmp_path):
    pids = tmp_path / "pids"
    c = Child([PY, "-c", TREE, str(pids), "ignore"], grace_s=60).start()
    wait_file(pids)
    c.stop()
    c.stop()
    assert c.wait(10) == -signal.SIGKILL and c.kill_asked


def test_a_stop_asked_before_the_launch_is_kept():
    c = Child([PY, "-c", "import time; time.sleep(300)"], grace_s=0.2)
    c.stop()
    c.start()
    assert c.wait(30) is not None and c.stop_asked


def test_the_watchdog_kills_the_group_when_gputop_dies(tmp_path):
    """A parent that starts a Child and then dies without cleaning up (os._exit, as a kill -9 would)."""
    pids = tmp_path / "pids"
    parent = (f"import sys, os, time; sys.path.insert(0, {str(ROOT)!r})\n"
              "from gputop.runner.child import Child\n"
              f"Child([sys.executable, '-c', {TREE!r}, {str(pids)!r}, 'ignore']).start()\n"
              f"while not os.path.exists({str(pids)!r}): time.sleep(0.02)\n"
              "os._exit(0)\n")
    subprocess.run([PY, "-c", parent], timeout=60, check=True)
    child, grandchild = wait_file(pids)
    try:
        assert gone(child) and gone(grandchild)
    finally:
        for pid in (child, grandchild):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_descendant_in_a_session_of_its_own_dies_with_a_child_that_exits_by_itself(tmp_path):
    """As torchrun under SIGINT: the child leaves at once, its worker (started with a session of its own, so
    outside the child's group) would live on as an orphan; the supervisor had seen it and kills it."""
    pids = tmp_path / "pids"
    code = (TREE.replace("subprocess.Popen(['sleep', '300'])", "subprocess.Popen(['sleep', '300'], start_new_session=True)")
            .replace("time.sleep(300)\n", "signal.signal(signal.SIGINT, lambda *a: os._exit(1))\ntime.sleep(300)\n"))
    c = Child([PY, "-c", code, str(pids), "obey"], grace_s=30).start()
    child, worker = wait_file(pids)
    end = time.monotonic() + 30
    while worker not in c._escaped:  # the supervisor reads the tree every TREE_EVERY_S: until it has seen the worker
        assert time.monotonic() < end, "the supervisor never saw the worker"
        time.sleep(0.05)
    assert os.getpgid(worker) == worker != child  # the worker left the child's group
    c.stop()
    assert c.wait(30) == 1 and not c.killed  # the child obeyed SIGINT, within the grace period
    assert gone(child) and gone(worker)
