"""A test workload that hangs after one point: it sleeps in a loop until asked to stop (obey=true),
or forever, ignoring the stop request (obey=false), so that only SIGKILL ends it."""

import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.workload import Param, main

NAME = "fault_hang"
DESCRIPTION = "test workload that hangs after one point"
PARAMS = [
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs"),
    Param("obey", "bool", True, help="stop when asked (SIGINT); false: only SIGKILL stops it"),
    Param("ready_file", "str", "", help="create this file once hanging (tests wait for it)"),
]


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"]})
    emit.phase("hang")
    emit.point({"k": 1, "gflops": 2.0})
    emit.log("hanging now")
    if p["ready_file"]:
        Path(p["ready_file"]).touch()
    while not (p["obey"] and emit.should_stop()):
        time.sleep(0.02)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
