"""A plain command for ``gputop --run -- CMD`` fault tests (no gputop import, like a user's script).

    python tree_cmd.py PID_FILE hang|stubborn|segv|exit N

It starts a grandchild (``sleep 300``), writes ``{"child": [pid, create_time], "grandchild": [...]}`` to
PID_FILE (atomically; psutil's create_time, so that a test can tell a reused pid), then:

- ``hang``: sleeps until a signal ends it (SIGINT too has its default action: no Python traceback);
- ``stubborn``: ignores SIGINT, SIGTERM and SIGHUP (the grandchild inherits that): only SIGKILL ends it;
- ``segv``: a real segmentation fault (killed by SIGSEGV: a shell says 139);
- ``exit N``: exits with code N.

The grandchild is left running in every case: stopping it is gputop's job.
"""

import json
import os
import signal
import subprocess
import sys
import time


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


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("hang", "stubborn", "segv", "exit"):
        print(__doc__, file=sys.stderr)
        return 2
    path, end = argv[0], argv[1]
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if end == "stubborn":
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
    print("tree_cmd: starting a grandchild", flush=True)
    grandchild = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    write_pids(path, {"child": os.getpid(), "grandchild": grandchild.pid})
    if end == "exit":
        return int(argv[2])
    if end == "segv":
        segfault()
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
