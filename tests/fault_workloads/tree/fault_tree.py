"""A test workload with a process tree: it emits a few points, starts a grandchild (``sleep 300``), writes
its own pid and the grandchild's to a pid file, then ends as ``end`` says:

- ``hang``: runs until asked to stop (SIGINT/SIGTERM through the workload API), then returns;
- ``exit3``: ``sys.exit(3)`` (the process exits non-zero without finishing);
- ``segv``: a real segmentation fault (the process is killed by SIGSEGV).

``stubborn=true`` ignores SIGINT, SIGTERM and SIGHUP and never stops on its own: only SIGKILL ends it
(the kill after the grace period); its grandchild inherits the ignored signals, so it too dies only by
SIGKILL. The grandchild is left running in every case: stopping it is the supervisor's job. The pid file (``pid_file``, else the GPUTOP_TEST_PIDFILE environment variable) is JSON,
written atomically: ``{"child": [pid, create_time], "grandchild": [pid, create_time]}`` (psutil's
create_time, so that a test can tell a reused pid).

It lives in a folder of its own (GPUTOP_WORKLOADS_PATH names both folders in the fault matrix) so that
the tests that count or list tests/fault_workloads/ see the same five workloads as before.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from gputop.workload import Param, main

NAME = "fault_tree"
DESCRIPTION = "test workload: points, a grandchild, then hang/exit/segv"
PARAMS = [
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs"),
    Param("points", "int", 3, lo=0, hi=100, help="points to emit before the grandchild starts"),
    Param("end", "choice", "hang", choices=["hang", "exit3", "segv"], help="how it ends"),
    Param("stubborn", "bool", False, help="ignore SIGINT/SIGTERM/SIGHUP: only SIGKILL stops it"),
    Param("pid_file", "str", "", help="write the pids here (default: $GPUTOP_TEST_PIDFILE)"),
]
PIDFILE_ENV = "GPUTOP_TEST_PIDFILE"


def write_pids(path: str, pids: dict) -> None:
    import psutil

    data = {role: [pid, psutil.Process(pid).create_time()] for role, pid in pids.items()}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # a reader sees the whole file or none


def segfault() -> None:
    import ctypes
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    ctypes.string_at(0)  # a real invalid read
    os.kill(os.getpid(), signal.SIGSEGV)  # not reached


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"]})
    if p["stubborn"]:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
    emit.phase("measure")
    for k in range(1, p["points"] + 1):
        emit.point({"k": k, "gflops": float(k)})
    grandchild = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    path = p["pid_file"] or os.environ.get(PIDFILE_ENV, "")
    if path:
        write_pids(path, {"child": os.getpid(), "grandchild": grandchild.pid})
    emit.log(f"grandchild {grandchild.pid} started")
    if p["end"] == "exit3":
        sys.exit(3)
    if p["end"] == "segv":
        segfault()
    while p["stubborn"] or not emit.should_stop():
        time.sleep(0.02)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
