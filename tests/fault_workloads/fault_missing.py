"""A test workload whose GPU library is missing (MissingDependency, exit 4)."""

import sys
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.workload import MissingDependency, Param, main

NAME = "fault_missing"
DESCRIPTION = "test workload that needs a library that is not installed"
PARAMS = [Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs")]
NEEDS = ["cupy"]


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"]})
    raise MissingDependency("cupy", "cuda12")


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
