"""What Python's garbage collector costs the TUI: the app run headless (Textual's test driver, the real
sampler and source), every collection timed through ``gc.callbacks``, with and without ``settle_gc`` (the
collect-then-freeze the ``gputop`` command does 3 s after start-up).

    python bench/perf/tui_gc.py                     # live NVML; 120 s each way, 160x48
    python bench/perf/tui_gc.py --idle --seconds 60 # no GPU: an idle H200 replayed (tui_cpu.py --idle)

Prints, for each way, the collections of each generation, their time, the longest one, and the objects
the collector tracks at the end. A full (generation 2) collection scans every tracked object; without the
freeze those are start-up's ~90k (modules, widgets, styles) plus the sampler's history.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tui_cpu import idle_trace  # noqa: E402  (the idle trace the other TUI benches replay)


def one_way(gputop_args: list[str], size: tuple[int, int], seconds: float, settle: bool) -> dict:
    from gputop.cli import parse
    from gputop.tui.app import make_app
    from gputop.tui.config import config_from_args
    from gputop.tui.lifecycle import SETTLE_GC_S

    config = config_from_args(parse(gputop_args)[0])
    config.settle_gc = settle
    app = make_app(config)
    stats = collections.defaultdict(lambda: [0, 0.0, 0.0])  # generation -> [collections, seconds, longest]
    started = {}

    def timed(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
            return
        s = stats[info["generation"]]
        dt = time.perf_counter() - started[0]
        s[0] += 1
        s[1] += dt
        s[2] = max(s[2], dt)

    async def run():
        async with app.run_test(size=size) as pilot:
            await pilot.pause(SETTLE_GC_S + 1.0)  # start-up, and the settling where asked
            gc.callbacks.append(timed)
            c0, w0 = time.process_time(), time.monotonic()
            await pilot.pause(seconds)
            wall = time.monotonic() - w0
            cpu = time.process_time() - c0
            gc.callbacks.remove(timed)
            return wall, cpu, len(gc.get_objects()), gc.get_freeze_count()

    wall, cpu, tracked, frozen = asyncio.run(run())
    gc.unfreeze()
    gc.collect()
    return {"settle_gc": settle, "seconds": round(wall, 1), "process_cpu_pct": round(100 * cpu / wall, 3),
            "tracked": tracked, "frozen": frozen,
            "generations": {g: {"collections": n, "ms": round(1e3 * s, 1), "longest_ms": round(1e3 * m, 1),
                                "pct_of_core": round(100 * s / wall, 3)} for g, (n, s, m) in sorted(stats.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--idle", action="store_true", help="replay an idle H200 instead of live NVML")
    ap.add_argument("gputop_args", nargs="*", help="after --: gputop's arguments (default: --rate 10)")
    args = ap.parse_args()
    gputop_args = args.gputop_args or ["--rate", "10"]
    if args.idle:
        gputop_args += ["--replay", idle_trace()]
    size = tuple(int(x) for x in args.size.lower().split("x"))
    print(f"gputop {' '.join(gputop_args)}, headless at {args.size}, {args.seconds:g} s each way")
    for settle in (False, True):
        r = one_way(gputop_args, size, args.seconds, settle)
        print(f"settle_gc {'on ' if settle else 'off'}: process {r['process_cpu_pct']:.2f}% of a core, "
              f"{r['tracked']} objects tracked at the end, {r['frozen']} frozen")
        for g, v in r["generations"].items():
            print(f"  generation {g}: {v['collections']:4d} collections, {v['ms']:7.1f} ms "
                  f"({v['pct_of_core']:.3f}% of a core), longest {v['longest_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
