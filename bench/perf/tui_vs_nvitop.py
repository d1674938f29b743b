"""gputop's TUI against nvitop's at 0.25 s, each in a pseudo-terminal of the same size, launched together:
CPU over the first ``--first`` seconds from launch, CPU in steady state (the ``--steady`` seconds after
that), and the time to the first frame (launch until the screen shows the GPU's numbers: gputop's
"SM activity" or "no GPU", nvitop's "MiB" or "GiB").

    python bench/perf/tui_vs_nvitop.py                      # 80x24, 120x40, 160x48; 30 s + 15 s each
    python bench/perf/tui_vs_nvitop.py --sizes 160x48 --first 30 --steady 30

CPU is each process tree's user + system time (psutil), as % of one core. Prints one line per size and
program and the ratios gputop / nvitop; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tui_cpu import ROOT, PtyProc  # noqa: E402  (the pty runner the other TUI benches use)

FIRST_FRAME = {"gputop": (b"SM activity", b"no GPU"), "nvitop": (b"MiB", b"GiB")}


def first_frame(p: PtyProc, t_launch: float, seen: dict) -> None:
    """Record when ``p``'s output first held its marker (checked on the output so far)."""
    if p.name in seen:
        return
    if any(m in p.all_out for m in FIRST_FRAME[p.name]):
        seen[p.name] = time.monotonic() - t_launch


def thread_times(p: PtyProc) -> dict[int, tuple[float, float]]:
    """CPU seconds (user, system) of each thread of the program's own process, by thread id."""
    try:
        return {t.id: (t.user_time, t.system_time) for t in psutil.Process(p.pid).threads()}
    except psutil.Error:
        return {}


class Recording(PtyProc):
    """PtyProc that keeps the first 2 MiB of output (to find the first frame)."""

    KEEP = 2 ** 21


def one_size(cols: int, rows: int, cmds: dict, env: dict, first: float, steady: float) -> dict:
    t0 = time.monotonic()
    procs = [Recording(n, argv, cols, rows, env) for n, argv in cmds.items()]
    seen: dict[str, float] = {}
    marks: dict[str, dict[str, float]] = {p.name: {} for p in procs}
    try:
        while time.monotonic() - t0 < first:
            for p in procs:
                first_frame(p, t0, seen)
            time.sleep(0.01 if len(seen) < len(procs) else 0.2)
        threads0 = {p.name: thread_times(p) for p in procs}
        for p in procs:
            marks[p.name]["first"] = p.cpu_s()
        t1 = time.monotonic()
        while time.monotonic() - t1 < steady:
            time.sleep(0.2)
        t2 = time.monotonic()
        split = {}
        for p in procs:
            marks[p.name]["steady"] = p.cpu_s() - marks[p.name]["first"]
            now = thread_times(p)  # the main thread (its id is the pid: drawing) apart from the others (sampling)
            split[p.name] = {}
            for tid, (user, system) in now.items():  # % of a core: [user + system, user, system]
                u0, s0 = threads0[p.name].get(tid, (0.0, 0.0))
                pct = [round(100 * x / (t2 - t1), 2) for x in (user - u0 + system - s0, user - u0, system - s0)]
                if pct[0] > 0:
                    split[p.name]["main" if tid == p.pid else f"thread {tid}"] = pct
            if not p.alive():
                raise SystemExit(f"{p.name} died (code {p.returncode}):\n{p.tail_text()}")
    finally:
        for p in procs:
            p.stop()
    out = {}
    for p in procs:
        m = marks[p.name]
        out[p.name] = {"first_s": first, "cpu_pct_first": 100 * m["first"] / (t1 - t0),
                       "cpu_pct_steady": 100 * m["steady"] / (t2 - t1), "steady_s": t2 - t1,
                       "time_to_first_frame_s": seen.get(p.name),
                       "steady_pct_by_thread": split.get(p.name, {})}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="80x24,120x40,160x48")
    ap.add_argument("--first", type=float, default=30.0, help="seconds from launch (default 30)")
    ap.add_argument("--steady", type=float, default=15.0, help="steady-state seconds after those (default 15)")
    ap.add_argument("--gputop-args", default="--rate 10")
    ap.add_argument("--nvitop-args", default="--interval 0.25")
    ap.add_argument("--only", choices=["gputop", "nvitop"])
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    py = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmds = {"gputop": [py, "-m", "gputop", *shlex.split(args.gputop_args)],
            "nvitop": [py, "-m", "nvitop", *shlex.split(args.nvitop_args)]}
    if args.only:
        cmds = {args.only: cmds[args.only]}
    report = {"commands": {n: " ".join(c) for n, c in cmds.items()}, "sizes": {}}
    for size in args.sizes.split(","):
        cols, rows = (int(x) for x in size.lower().split("x"))
        r = one_size(cols, rows, cmds, env, args.first, args.steady)
        report["sizes"][size] = r
        for n, v in r.items():
            ttf = v["time_to_first_frame_s"]
            print(f"{size:>7} {n:<7} first {args.first:g} s: {v['cpu_pct_first']:5.1f}% of a core   steady "
                  f"{v['steady_s']:.0f} s: {v['cpu_pct_steady']:5.1f}%   first frame "
                  + (f"{ttf:.2f} s" if ttf is not None else "not seen"), flush=True)
            print(f"{'':>7} {n:<7} steady by thread (% of a core: [all, user, system]): {v['steady_pct_by_thread']}",
                  flush=True)
        if len(r) == 2:
            g, n = r["gputop"], r["nvitop"]
            ratios = {k: g[k] / n[k] for k in ("cpu_pct_first", "cpu_pct_steady") if n[k] > 0}
            r["ratios_gputop_over_nvitop"] = ratios
            print(f"{size:>7} ratio gputop/nvitop: first {ratios.get('cpu_pct_first', float('nan')):.2f}  "
                  f"steady {ratios.get('cpu_pct_steady', float('nan')):.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
