"""A test workload that dies hard (SIGKILL to itself) after one point, like a CUDA fault or an OOM kill."""

import os
import signal
import sys
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.workload import Param, main

NAME = "fault_crash"
DESCRIPTION = "test workload that kills itself with SIGKILL after one point"
PARAMS = [Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs")]


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"]})
    emit.phase("measure")
    emit.point({"k": 1, "gflops": 2.0})
    print("about to die", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
