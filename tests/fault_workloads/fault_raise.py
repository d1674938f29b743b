"""A test workload that raises after one point (the child turns it into an error event, exit 1)."""

import sys
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.workload import Param, main

NAME = "fault_raise"
DESCRIPTION = "test workload that raises RuntimeError after one point"
PARAMS = [Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs")]


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"]})
    emit.point({"k": 1, "gflops": 2.0})
    raise RuntimeError("boom: a test failure")


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
