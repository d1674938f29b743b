"""Where gputop's TUI spends its CPU at rest, function by function: the real TUI in a pseudo-terminal,
sampled by py-spy at 1 kHz (every thread, idle time left out), then a summary by thread of the functions that
were on the CPU.

    python bench/perf/tui_pyspy.py                          # live NVML, 80x24; 30 s to settle, 30 s sampled
    python bench/perf/tui_pyspy.py --size 160x48 --native   # with native frames (NVML, the kernel's ioctls)
    python bench/perf/tui_pyspy.py --idle                   # no GPU: an idle H200 replayed (tui_cpu.py --idle)

Needs py-spy (``pip install py-spy``; ptrace allowed, as for root). Prints, for each thread, its share of
the samples and its top functions by self samples and by inclusive samples; ``--raw FILE`` keeps py-spy's
collapsed stacks. A sample is 1/``--rate`` s of CPU, so at 2% of a core 30 s gives ~600 samples at 1 kHz:
read the shares, not the single counts.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tui_cpu import ROOT, PtyProc, idle_trace  # noqa: E402  (the pty runner the other TUI benches use)


def summarize(raw: str, top: int) -> str:
    """py-spy's collapsed stacks (``thread;frame;...;frame count``) as per-thread tables."""
    self_n: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    incl_n: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    per_thread: collections.Counter = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        per_thread[thread] += n
        if frames:
            self_n[thread][frames[-1]] += n
        for f in set(frames):
            incl_n[thread][f] += n
    total = sum(per_thread.values()) or 1
    out = []
    for thread, n in per_thread.most_common():
        out.append(f"== {thread}: {n} samples ({100 * n / total:.0f}% of all)")
        out.append("   self:")
        out += [f"   {c:6d} {100 * c / n:5.1f}%  {f}" for f, c in self_n[thread].most_common(top)]
        out.append("   inclusive:")
        out += [f"   {c:6d} {100 * c / n:5.1f}%  {f}" for f, c in incl_n[thread].most_common(top)]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--warm", type=float, default=30.0, help="seconds before sampling (default 30)")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds sampled (default 30)")
    ap.add_argument("--rate", type=int, default=1000, help="py-spy samples a second (default 1000)")
    ap.add_argument("--native", action="store_true", help="native frames too (py-spy --native)")
    ap.add_argument("--idle", action="store_true", help="replay an idle H200 instead of live NVML")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--raw", metavar="FILE", help="keep py-spy's collapsed stacks here")
    ap.add_argument("gputop_args", nargs="*", help="after --: gputop's arguments (default: --rate 10)")
    args = ap.parse_args()
    spy = shutil.which("py-spy")
    if spy is None:
        print("tui_pyspy: py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    gputop_args = args.gputop_args or ["--rate", "10"]
    if args.idle:
        gputop_args += ["--replay", idle_trace()]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = PtyProc("gputop", [sys.executable, "-m", "gputop", *gputop_args], cols, rows, env)
    raw = args.raw or f"/tmp/tui_pyspy_{os.getpid()}.txt"
    try:
        time.sleep(args.warm)
        if not p.alive():
            print(f"gputop exited during the warm-up; its last output:\n{p.tail_text()}", file=sys.stderr)
            return 1
        c0 = p.cpu_s()
        cmd = [spy, "record", "-p", str(p.pid), "-d", str(int(args.seconds)), "-r", str(args.rate),
               "-f", "raw", "-o", raw, "--threads", "--nonblocking"] + (["--native"] if args.native else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        cpu = p.cpu_s() - c0
        if r.returncode != 0 or not os.path.exists(raw):
            print(f"py-spy failed ({r.returncode}): {r.stderr.strip()[-800:]}", file=sys.stderr)
            return 1
    finally:
        p.stop()
    print(f"gputop {' '.join(gputop_args)} at {cols}x{rows}: {args.seconds:g} s sampled at {args.rate} Hz after "
          f"{args.warm:g} s; the process used {100 * cpu / args.seconds:.2f}% of a core meanwhile (py-spy included)")
    with open(raw) as f:
        print(summarize(f.read(), args.top))
    if not args.raw:
        os.unlink(raw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
