"""Time from launch to gputop's first frame, in a pseudo-terminal, over many launches; several checkouts
launched in turn (interleaved), so that a loaded machine's drift falls on each alike.

    python bench/perf/first_frame.py                                   # this checkout, --demo, 10 launches
    python bench/perf/first_frame.py --root /tmp/before --root . -n 15 # before/after, interleaved
    python bench/perf/first_frame.py --idle --size 160x48             # an idle GPU's replay (no GPU needed)
    python bench/perf/first_frame.py --live --marker quit             # a GPU machine: the early frame and Textual's

The first frame is the moment the terminal's output first holds "SM activity" or "no GPU" (as
bench/perf/tui_vs_nvitop.py, and the lead's GPU runs, count it); ``--marker`` adds another string to time
(e.g. the key bar's "quit", drawn by Textual's own first frame). For each launch, the wall time and the
process's CPU time (user + system) until then are recorded; CPU time moves less than wall time on a shared
machine. Printed per checkout: median, min, max of each. Each checkout's sources are byte-compiled first
(a pip install leaves them compiled). ``--json FILE`` writes every launch.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import psutil

try:
    import pexpect
except ImportError:  # a bench script: one line, not a traceback
    raise SystemExit("first_frame.py drives gputop in a pseudo-terminal through pexpect: pip install pexpect "
                     "(gputop's test extra brings it)") from None

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FRAME = [b"SM activity", b"no GPU"]


def launch(argv: list[str], root: str, cols: int, rows: int, markers: dict[str, list[bytes]],
           timeout: float) -> dict[str, dict[str, float] | None]:
    """Run ``argv`` in a fresh pty; for each marker, the wall and CPU seconds from launch until the output held
    it (None if it never did within ``timeout``). The program is then told to quit (q), or killed."""
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)  # (.whl/use.sh's site stays)
    env = dict(os.environ, PYTHONPATH=path, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    env.pop("NO_COLOR", None)
    t0 = time.monotonic()
    child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=root, dimensions=(rows, cols))  # its own session
    ps = psutil.Process(child.pid)
    out, seen = b"", {}
    try:
        while len(seen) < len(markers) and time.monotonic() - t0 < timeout:
            try:
                out += child.read_nonblocking(1 << 16, timeout=0.002)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                break
            for name, alts in markers.items():
                if name not in seen and any(m in out for m in alts):
                    cpu = ps.cpu_times()
                    seen[name] = {"wall_s": time.monotonic() - t0, "cpu_s": cpu.user + cpu.system}
    finally:
        end = time.monotonic() + 10
        try:
            child.send(b"q")
        except OSError:
            pass
        while child.isalive() and time.monotonic() < end:
            time.sleep(0.02)
        if child.isalive():
            os.killpg(child.pid, signal.SIGKILL)
        child.close(force=True)
    if not seen:
        raise SystemExit(f"{' '.join(argv)} in {root}: no first frame in {timeout:g} s; its output:\n"
                         + out.decode("utf-8", "replace")[-1500:])
    return {name: seen.get(name) for name in markers}


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", action="append", help="a checkout to launch gputop from (repeat; default this one)")
    ap.add_argument("-n", type=int, default=10, help="launches of each checkout (default 10)")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--idle", action="store_true", help="replay an idle GPU (bench/perf/tui_cpu.py --idle) "
                                                        "instead of --demo")
    ap.add_argument("--live", action="store_true", help="the live GPU(s) instead of --demo (a GPU machine)")
    ap.add_argument("--args", default="", help="more gputop arguments")
    ap.add_argument("--marker", action="append", default=[], help="another string to time (repeat)")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    roots = [os.path.abspath(r) for r in (args.root or [ROOT])]
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    if args.idle:
        sys.path[:0] = [HERE, os.path.dirname(HERE)]  # tui_cpu: this folder's sibling (bench/ before the regrouping)
        from tui_cpu import idle_trace

        mode = ["--replay", idle_trace()]
    else:
        mode = [] if args.live else ["--demo"]
    argv = [sys.executable, "-m", "gputop", *mode, *args.args.split()]
    markers = {"first frame": FRAME, **{m: [m.encode()] for m in args.marker}}
    for root in roots:  # as a pip install leaves it
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(root, "gputop")], check=True)
    runs: dict[str, list] = {r: [] for r in roots}
    for _ in range(args.n):
        for root in roots:
            runs[root].append(launch(argv, root, cols, rows, markers, args.timeout))
    print(f"{' '.join(argv[1:])} at {args.size}, {args.n} launches each, interleaved; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for root in roots:
        for name in markers:
            got = [r[name] for r in runs[root] if r[name] is not None]
            if got:
                print(f"{root}  {name}: wall {spread([g['wall_s'] for g in got])}; "
                      f"CPU {spread([g['cpu_s'] for g in got])}" + ("" if len(got) == args.n
                                                                    else f"  ({args.n - len(got)} not seen)"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": argv, "size": args.size, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
