"""Where gputop's start-up time goes before its first frame (issue 23), step by step in one process, on the machine
it runs on: the imports the early frame needs, opening the source (NVML's init, the device handles, each GPU's
static facts: NVLink's links, GPM's support), the first tick, the early frame's lines; then cProfile's top functions
over the same steps in a fresh process.

    python bench/perf/startup_profile.py            # the table, then the profile's top 30 by own time
    python bench/perf/startup_profile.py --steps    # the table only

Each step's wall and CPU time (process time) are printed; CPU at or near wall means Python (or NVML's ioctls)
working, not waiting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def steps() -> None:
    t0w, t0c = time.perf_counter(), time.process_time()
    last = [t0w, t0c]

    def mark(name: str) -> None:
        w, c = time.perf_counter(), time.process_time()
        print(f"{name:<44} wall {1e3 * (w - last[0]):7.1f} ms  cpu {1e3 * (c - last[1]):7.1f} ms   "
              f"(total {1e3 * (w - t0w):7.1f} ms)", flush=True)
        last[:] = [w, c]

    from gputop import cli
    mark("import gputop.cli")
    args, _ = cli.parse([])
    mark("parse the command line")
    from gputop.tui import early_frame
    mark("import gputop.tui.early_frame")
    from gputop.telemetry.nvml import Nvml
    nvml = Nvml()
    nvml.available()
    mark("NVML: import + init")
    from gputop.telemetry.live import LiveSource
    src = LiveSource(nvml)
    mark(f"LiveSource ({len(src.indices)} GPUs: handles, readers)")
    st = src.static()
    mark("static() of every GPU (NVLink, GPM support)")
    tick = src.read()
    mark("first read() of every GPU")
    tick = src.read()
    mark("second read() (GPM's rates)")
    if args is not None:
        try:
            config = early_frame.config_from_args(args)
            mark("config_from_args (opens the source again)")
            lines = early_frame.frame_lines(config, tick, 10.0, 120, 40)
            mark(f"frame_lines ({len(lines)} lines)")
        except Exception as exc:  # noqa: BLE001 - a bench: say what failed and go on
            print("early frame:", exc.__class__.__name__, exc)
    print(f"GPUs: {[s.get('name') for s in st]}")


def main() -> int:
    if "--inner" in sys.argv:
        steps()
        return 0
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, __file__, "--inner"], env=env, check=False)
    if "--steps" not in sys.argv:
        print("\ncProfile, top 30 by own time (a fresh process):", flush=True)
        code = ("import cProfile, pstats, runpy, sys; sys.argv=[%r, '--inner']; p=cProfile.Profile(); p.enable()"
                "\n"
                "try: runpy.run_path(%r, run_name='__main__')\nexcept SystemExit: pass\np.disable(); "
                "pstats.Stats(p).sort_stats('tottime').print_stats(30)") % (__file__, __file__)
        subprocess.run([sys.executable, "-c", code], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
