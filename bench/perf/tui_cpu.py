"""CPU cost of gputop's TUI against nvitop's, side by side, each in a pseudo-terminal of one size.

    python bench/perf/tui_cpu.py                          # 60 s, 120x40, gputop --rate 10 vs nvitop --interval 0.25
    python bench/perf/tui_cpu.py --seconds 30 --size 200x50
    python bench/perf/tui_cpu.py --only gputop --gputop-args="--demo"     # no GPU: gputop on the demo trace
    python bench/perf/tui_cpu.py --rss-minutes 30         # gputop alone: RSS every 10 s for 30 minutes
    python bench/perf/tui_cpu.py --load                   # while bench/perf/pulse_load.py keeps the GPU changing
    python bench/perf/tui_cpu.py --only gputop --idle --sizes 80x24,120x40,160x48 --seconds 20
                                                     # no GPU: an idle H200 (the demo's first 3 s, looped)

``--idle`` replays an idle GPU without one: the demo trace's first seconds (a real H200 at rest) repeated
into a 10-minute trace, so that gputop's screen changes as much as on the idle GPU nvitop is compared on.
gputop draws at 4 frames a second (TuiConfig.fps), nvitop's --interval 0.25 is the same cadence.

Both programs start together (or one after the other with --sequential), get ``--warmup`` seconds
to start up, then their process trees' CPU time (user + system, psutil) is measured over
``--seconds``. Printed: % of one core for each, the ratio gputop / nvitop, and how often each one
wrote to its terminal (screen updates per second, bursts of output more than 20 ms apart).
Exit code 0; 1 if a program died before the end (its output tail is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time

import psutil

try:
    import pexpect
except ImportError:  # a bench script: one line, not a traceback
    raise SystemExit("the TUI benches drive gputop in a pseudo-terminal through pexpect: pip install pexpect "
                     "(gputop's test extra brings it)") from None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PtyProc:
    """A command in its own pseudo-terminal of ``cols`` x ``rows`` and its own session (pexpect); a thread drains its
    output and counts it (the first ``KEEP`` bytes kept in ``all_out``, for a subclass that looks for its first
    frame). ``pid`` is the command's process, the leader of its process group."""

    KEEP = 0

    def __init__(self, name: str, argv: list[str], cols: int, rows: int, env: dict | None = None):
        self.name, self.argv = name, argv
        e = dict(os.environ if env is None else env)
        e.update(TERM=e.get("TERM_BENCH", "xterm-256color"), COLUMNS=str(cols), LINES=str(rows))
        e.pop("NO_COLOR", None)
        self.child = pexpect.spawn(argv[0], argv[1:], env=e, cwd=ROOT, dimensions=(rows, cols))
        self.pid = self.child.pid
        self.bytes = 0
        self.bursts: list[float] = []  # start time of each burst of output
        self._last = 0.0
        self.tail = b""
        self.all_out = b""
        self._stop = False
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        while not self._stop:
            try:
                data = self.child.read_nonblocking(65536, timeout=None)
            except (pexpect.EOF, pexpect.TIMEOUT, OSError, ValueError):  # ended, or closed by stop()
                return
            now = time.monotonic()
            if now - self._last > 0.02:
                self.bursts.append(now)
            self._last = now
            self.bytes += len(data)
            if len(self.all_out) < self.KEEP:
                self.all_out += data
            self.tail = (self.tail + data)[-4000:]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) of the process and its live descendants."""
        try:
            p = psutil.Process(self.pid)
            procs = [p] + p.children(recursive=True)
        except psutil.Error:
            return float("nan")
        total = 0.0
        for q in procs:
            try:
                t = q.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def rss(self) -> int:
        try:
            p = psutil.Process(self.pid)
            return sum(q.memory_info().rss for q in [p] + p.children(recursive=True))
        except psutil.Error:
            return 0

    def alive(self) -> bool:
        return self.child.isalive()

    @property
    def returncode(self) -> int | None:
        """None while it runs; its exit code, or minus the signal that ended it."""
        if self.child.isalive():
            return None
        return self.child.exitstatus if self.child.exitstatus is not None else -(self.child.signalstatus or 0)

    def wait(self, timeout: float) -> bool:
        """True once the command has ended, False if it still runs after ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while self.child.isalive():
            if time.monotonic() > end:
                return False
            time.sleep(0.02)
        return True

    def stop(self, key: bytes = b"q") -> None:
        if self.alive():
            try:
                self.child.send(key)
            except OSError:
                pass
            if not self.wait(5):
                try:
                    os.killpg(self.pid, 9)
                except ProcessLookupError:
                    pass
                self.wait(5)
        self._stop = True
        self.child.close(force=True)

    def tail_text(self) -> str:
        return self.tail.decode("utf-8", "replace")[-1500:]


class Died(RuntimeError):
    pass


def measure(procs: list[PtyProc], warmup: float, seconds: float) -> dict[str, dict]:
    time.sleep(warmup)
    for p in procs:
        if not p.alive():
            raise Died(f"{p.name} exited during the warm-up (code {p.returncode}); its last output:\n"
                       f"{p.tail_text()}")
    c0 = {p.name: p.cpu_s() for p in procs}
    b0 = {p.name: (p.bytes, len(p.bursts)) for p in procs}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and all(p.alive() for p in procs):
        time.sleep(0.2)
    dt = time.monotonic() - t0
    out = {}
    for p in procs:
        cpu = p.cpu_s() - c0[p.name]
        out[p.name] = {"cpu_pct_of_core": 100.0 * cpu / dt, "seconds": dt, "alive": p.alive(),
                       "bytes_per_s": (p.bytes - b0[p.name][0]) / dt,
                       "updates_per_s": (len(p.bursts) - b0[p.name][1]) / dt, "rss_mib": p.rss() / 2**20}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="measured time (default 60)")
    ap.add_argument("--warmup", type=float, default=5.0, help="start-up time not measured (default 5)")
    ap.add_argument("--size", default="120x40", help="terminal COLSxROWS (default 120x40)")
    ap.add_argument("--sizes", help="several sizes, one after the other (e.g. 80x24,120x40,160x48); with --json "
                    "FILE, one FILE.SIZE.json each")
    ap.add_argument("--idle", action="store_true",
                    help="gputop replays an idle GPU (a trace made from the demo's idle seconds; no GPU needed)")
    ap.add_argument("--gputop-args", default="--rate 10", help="gputop's arguments (default: --rate 10)")
    ap.add_argument("--nvitop-args", default="--interval 0.25", help="nvitop's arguments (default: --interval 0.25)")
    ap.add_argument("--only", choices=["gputop", "nvitop"], help="run one of them")
    ap.add_argument("--sequential", action="store_true", help="one after the other instead of together")
    ap.add_argument("--rss-minutes", type=float, help="gputop alone for this long: RSS every --rss-every s")
    ap.add_argument("--rss-every", type=float, default=10.0)
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--load", action="store_true",
                    help="run bench/perf/pulse_load.py (matmul / copy / idle cycles) on the GPU meanwhile; "
                         "its CPU is not counted")
    args = ap.parse_args()
    if args.sizes:
        code = 0
        for size in args.sizes.split(","):
            argv, skip = [], False
            for a in sys.argv[1:]:  # the same arguments, --sizes (and its value) left out
                if skip or a.startswith("--sizes"):
                    skip = a == "--sizes" and not skip
                    continue
                argv.append(a)
            if args.json:  # one file per size: FILE.80x24.json, ...
                argv += ["--json", f"{os.path.splitext(args.json)[0]}.{size}.json"]
            code |= subprocess.call([sys.executable, os.path.abspath(__file__), *argv, "--size", size])
        return code
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    py = sys.executable
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    gputop_args = shlex.split(args.gputop_args)
    if args.idle:
        gputop_args = [a for a in gputop_args if a != "--demo"] + ["--replay", idle_trace()]
    cmds = {"gputop": [py, "-m", "gputop", *gputop_args],
            "nvitop": [py, "-m", "nvitop", *shlex.split(args.nvitop_args)]}
    report: dict = {"size": f"{cols}x{rows}", "commands": {}}

    if args.rss_minutes:
        return rss_run(cmds["gputop"], cols, rows, env, args, report)

    names = [args.only] if args.only else ["gputop", "nvitop"]
    results: dict[str, dict] = {}
    groups = [[n] for n in names] if args.sequential else [names]
    load = None
    if args.load:
        secs = (args.warmup + args.seconds + 10) * len(groups)
        load = subprocess.Popen([py, os.path.join(ROOT, "bench", "perf", "pulse_load.py"), "--seconds", str(secs)],
                                env=env, start_new_session=True)
        time.sleep(8)  # its start-up (CUDA context, allocations) happens before anything is measured
        if load.poll() is not None:
            print(f"tui_cpu: the load exited at once (code {load.returncode})", file=sys.stderr)
            return 1
        report["load"] = "bench/perf/pulse_load.py: bf16 matmul 1.5 s / copy 1.5 s / idle 1 s, repeated"
    try:
        status = measure_groups(groups, cmds, cols, rows, env, args, results)
    finally:
        if load is not None:
            load.kill()
            load.wait()
    if status == "fatal":
        return 1
    for n in names:
        report["commands"][n] = " ".join(cmds[n])
    report["results"] = results
    print(f"terminal {cols}x{rows}, {args.seconds:g} s measured after {args.warmup:g} s warm-up"
          + (", one after the other" if args.sequential else ", side by side")
          + (", GPU busy (bench/perf/pulse_load.py)" if load is not None else ", GPU idle"))
    for n in names:
        r = results[n]
        print(f"  {n:<7} {r['cpu_pct_of_core']:6.1f}% of a core   {r['updates_per_s']:5.1f} screen updates/s   "
              f"{r['bytes_per_s'] / 1024:7.1f} KiB/s to the terminal   RSS {r['rss_mib']:.0f} MiB   "
              f"({report['commands'][n]})")
    if len(names) == 2 and results["nvitop"]["cpu_pct_of_core"] > 0:
        ratio = results["gputop"]["cpu_pct_of_core"] / results["nvitop"]["cpu_pct_of_core"]
        report["ratio_gputop_over_nvitop"] = ratio
        print(f"  ratio gputop / nvitop: {ratio:.2f}" + ("  (gputop uses less)" if ratio <= 1 else "  (gputop uses more)"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 1 if status else 0


def idle_trace(minutes: float = 10.0) -> str:
    """A trace of an idle GPU for ``minutes``: the demo's ticks before its first phase mark (a real H200 at
    rest), repeated with their times moved on; written once to the temp directory. Returns its path."""
    import tempfile

    sys.path.insert(0, ROOT)
    from gputop.telemetry.trace import demo_trace_path, read_trace, write_trace

    path = os.path.join(tempfile.gettempdir(), f"gputop-idle-{minutes:g}min.jsonl.gz")
    if os.path.exists(path):
        return path
    header, rows = read_trace(demo_trace_path())
    first_mark = next((r["t"] for r in rows if r.get("type") == "mark"), None)
    idle = [r for r in rows if r.get("type") != "mark" and (first_mark is None or r["t"] < first_mark)]
    idle = idle[1:]  # the first tick has no GPM numbers yet (GPM rates need two samples)
    period = idle[-1]["t"] - idle[0]["t"] + (idle[1]["t"] - idle[0]["t"])
    ticks = []
    for k in range(int(minutes * 60 / period) + 1):
        for r in idle:
            t = round(r["t"] + k * period, 4)
            ticks.append({**r, "t": t, "gpus": [{**g, "t": t} for g in r["gpus"]]})
    tmp = path + f".{os.getpid()}.jsonl.gz"
    write_trace(tmp, header["devices"], ticks, [], rate_hz=header.get("rate_hz"),
                note="an idle GPU: the demo trace's first seconds, repeated (bench/perf/tui_cpu.py --idle)")
    os.replace(tmp, path)
    return path


def measure_groups(groups, cmds, cols, rows, env, args, results) -> str:
    """Measure each group of programs side by side: "" if all ran, "early" if one exited while
    measured (its figure covers less time), "fatal" if one died in its warm-up (no figures)."""
    failed = early = False
    for group in groups:
        procs = [PtyProc(n, cmds[n], cols, rows, env) for n in group]
        try:
            results.update(measure(procs, args.warmup, args.seconds))
        except Died as exc:
            print(f"tui_cpu: {exc}", file=sys.stderr)
            failed = True
        dead = [p for p in procs if not p.alive()]
        for p in procs:
            p.stop()
        if failed:
            return "fatal"
        for p in dead:  # died while measured: its figure covers less time
            early = True
            print(f"{p.name} exited early (code {p.returncode}); its last output:\n{p.tail_text()}",
                  file=sys.stderr)
    return "early" if early else ""


def rss_run(cmd: list[str], cols: int, rows: int, env: dict, args, report: dict) -> int:
    p = PtyProc("gputop", cmd, cols, rows, env)
    samples = []
    t0 = time.monotonic()
    c0 = None
    end = t0 + args.rss_minutes * 60
    try:
        while time.monotonic() < end and p.alive():
            time.sleep(min(args.rss_every, max(0.0, end - time.monotonic())))
            if c0 is None:
                c0 = (time.monotonic(), p.cpu_s())
            t = time.monotonic() - t0
            samples.append((round(t, 1), p.rss()))
            print(f"  {t / 60:6.2f} min  RSS {samples[-1][1] / 2**20:7.1f} MiB", flush=True)
        cpu = (p.cpu_s() - c0[1]) / (time.monotonic() - c0[0]) * 100 if c0 else float("nan")
    finally:
        died = not p.alive()
        if died:
            print(f"gputop exited early (code {p.returncode}):\n{p.tail_text()}", file=sys.stderr)
        p.stop()
    rss = [r for _, r in samples]
    if not rss:
        return 1
    first = rss[min(len(rss) - 1, 5)]  # after about a minute (buffers filling up)
    print(f"RSS over {args.rss_minutes:g} min ({' '.join(cmd[2:])}, {cols}x{rows}): start {rss[0] / 2**20:.1f} MiB, "
          f"after 1 min {first / 2**20:.1f} MiB, end {rss[-1] / 2**20:.1f} MiB, max {max(rss) / 2**20:.1f} MiB; "
          f"CPU {cpu:.1f}% of a core")
    report.update(command=" ".join(cmd), rss_samples=samples, cpu_pct_of_core=cpu)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 1 if died else 0


if __name__ == "__main__":
    raise SystemExit(main())
