"""What reading a rank's stack costs (issue 36): the py-spy call's time, and the pause it causes the program.

A real program (a Python loop that times each of its iterations, ~1 ms of work each, with perf_counter) runs for
``--seconds``; every ``--every`` seconds this script reads its stack the way gputop does (gputop/session/stacks.py's
``read_stack``) in one mode: ``nonblocking`` (py-spy --nonblocking: gputop's default, the program is not paused),
``blocking`` (py-spy pauses the process while it reads) or ``locals`` (blocking and the frames' local variables:
gputop does this only for an mp.spawn child, to read its index). The program's iterations that overlap a read are
compared with those that do not: the extra time a read adds to the iteration it lands in is the pause; the extra
time of all the iterations a read overlaps, over the reads, is its delay to the program (``delay ms/read``; beside
it the same excess per second of the iterations no read touched: the machine's own noise).

    python bench/perf/stack_read_cost.py [--seconds 20] [--every 1] [--json F]     (no GPU; needs py-spy)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gputop.session.stacks import read_stack  # noqa: E402

PROGRAM = r"""
import json, sys, time
out, seconds = sys.argv[1], float(sys.argv[2])

def work():
    x = 0
    for i in range(20000):
        x += i * i
    return x

def step(n):  # a few frames deep, as a training loop is
    return work() + n

marks, end = [], time.monotonic() + seconds
open(out + ".ready", "w").close()
while time.monotonic() < end:
    t0 = time.time()
    step(len(marks))
    marks.append((t0, time.time() - t0))
json.dump(marks, open(out, "w"))
"""


def run_mode(mode: str, seconds: float, every: float, folder: str) -> dict:
    out = os.path.join(folder, f"{mode}.json")
    prog = subprocess.Popen([sys.executable, "-c", PROGRAM, out, str(seconds)])
    while not os.path.exists(out + ".ready"):
        time.sleep(0.01)
    time.sleep(1.0)  # its first second: warm-up, no read
    reads = []
    while prog.poll() is None:
        a = time.time()
        got = read_stack(prog.pid, nonblocking=mode == "nonblocking", with_locals=mode == "locals")
        b = time.time()
        if got.ok:
            reads.append((a, b))
        time.sleep(max(0.0, every - (b - a)))
    prog.wait()
    marks = json.load(open(out))
    hit = [d for t, d in marks if any(t < b and t + d > a for a, b in reads)]
    calm = [d for t, d in marks if not any(t < b + 0.05 and t + d > a - 0.05 for a, b in reads)]
    base = statistics.median(calm)
    call = sorted(b - a for a, b in reads)
    out = {"mode": mode, "reads": len(reads), "read_ms_median": round(1e3 * statistics.median(call), 2),
            "read_ms_max": round(1e3 * call[-1], 2), "iteration_ms_median": round(1e3 * base, 3),
            "iterations_hit": len(hit),
            "pause_ms_median": round(1e3 * max(0.0, statistics.median(hit) - base), 3) if hit else None,
            "pause_ms_max": round(1e3 * max(0.0, max(hit) - base), 3) if hit else None,
            "delay_ms_per_read": round(1e3 * (sum(hit) - len(hit) * base) / max(1, len(reads)), 3),
            "calm_iteration_ms_p99": round(1e3 * sorted(calm)[int(0.99 * (len(calm) - 1))], 3),
            "calm_delay_ms_per_s": round(1e3 * (sum(calm) - len(calm) * base) / max(1e-9, sum(calm)), 3)}
    # the delay beyond the machine's own noise over as long as a read lasts: what the read itself cost the program
    out["excess_ms_per_read"] = round(out["delay_ms_per_read"] - out["calm_delay_ms_per_s"] * statistics.median(call), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = [run_mode(m, args.seconds, args.every, folder) for m in ("nonblocking", "blocking", "locals")]
    doc = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
           "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": args.seconds,
           "every_s": args.every, "modes": rows}
    print(f"{'mode':12s} {'reads':>5s} {'read ms (median/max)':>21s} {'iteration ms':>12s} {'hit':>4s} "
          f"{'pause ms (median/max)':>22s} {'delay ms/read':>13s} {'(calm: ms/s)':>12s} {'excess ms/read':>14s}")
    for r in rows:
        pause = f"{r['pause_ms_median']}/{r['pause_ms_max']}" if r["pause_ms_median"] is not None else "-"
        print(f"{r['mode']:12s} {r['reads']:5d} {r['read_ms_median']:>10.1f}/{r['read_ms_max']:<10.1f} "
              f"{r['iteration_ms_median']:12.3f} {r['iterations_hit']:4d} {pause:>22s} "
              f"{r['delay_ms_per_read']:13.3f} {r['calm_delay_ms_per_s']:12.3f} {r['excess_ms_per_read']:14.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
