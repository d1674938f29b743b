"""Where gputop's TUI spends its steady CPU: the real TUI in a pseudo-terminal, once as it is and once with
each part switched off, every variant a fresh process.

    python bench/perf/tui_parts.py                                  # live NVML, 120x40; 30 s to settle, 15 s measured
    python bench/perf/tui_parts.py --size 80x24 --variants all,verdict,frame
    python bench/perf/tui_parts.py --idle                           # no GPU: an idle H200 replayed (tui_cpu.py --idle)

Variants (``--variants``, comma-separated): ``all`` (nothing off), ``verdict`` (the live verdict is not
judged: no change detector, no classify, the panel says nothing; it runs on the sampler's thread), ``charts`` (the charts are not fed),
``panels`` (the header, device, verdict and process panels keep their first frame), ``frame`` (gputop's
whole frame after the first: what is left is Textual at rest plus the sampler). Each prints the main
thread's CPU (drawing; its own clock), the sampler thread's (NVML + GPM + host, the live verdicts), and the
whole process's, as % of one core, over ``--seconds`` after ``--warm`` seconds (the TUI's first 30 s are
its start-up and a young regime judged every second; tui_vs_nvitop.py's steady window starts there too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tui_cpu import ROOT, PtyProc, idle_trace  # noqa: E402  (the pty runner the other TUI benches use)

VARIANTS = ("all", "verdict", "charts", "panels", "frame")


def switch_off(variant: str) -> None:
    """Patch the TUI's classes so that ``variant``'s part does nothing (in the measured child only)."""
    from gputop.tui import app, header
    from gputop.tui.monitor import page as monitor_page, panels

    if variant == "verdict":
        from gputop.analysis import live

        live.LiveNode.feed = lambda self, tick: None  # (judged on the sampler's thread, fed by its ticks)
    elif variant == "charts":
        monitor_page.MonitorPage.feed_charts = lambda self, only=None: None
    elif variant == "panels":
        for cls in (header.InfoBar, panels.DevicePanel, panels.VerdictPanel, panels.ProcessTable):
            first = cls.show

            def once(self, *a, _first=first, **k):
                if not getattr(self, "_shown_once", False):
                    self._shown_once = True
                    _first(self, *a, **k)
            cls.show = once
    elif variant == "frame":
        first = app.GputopApp.frame

        def once(self, force=False, _first=first):
            if not self.frames:
                _first(self, force=True)
        app.GputopApp.frame = once


def child(variant: str, warm: float, seconds: float, out: str, gputop_args: list[str]) -> None:
    """Run the TUI with ``variant`` switched off; after ``warm`` s measure ``seconds`` s, write JSON, quit."""
    import psutil

    from gputop.cli import parse
    from gputop.tui.app import GputopApp, make_app

    switch_off(variant)
    the_app = make_app(parse(gputop_args)[0])
    marks: dict = {}

    def cpu_now() -> dict:
        sampler = the_app.model.sampler
        tid = sampler.thread_id
        threads = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
        return {"wall": time.monotonic(), "main": time.thread_time(), "process": time.process_time(),
                "sampler": threads.get(tid, 0.0), "reads": sampler.cpu_s, "frames": the_app.frames}

    def begin() -> None:
        marks["0"] = cpu_now()
        the_app.set_timer(seconds, end)

    def end() -> None:
        a, b = marks["0"], cpu_now()
        wall = b["wall"] - a["wall"]
        res = {k: round(100 * (b[k] - a[k]) / wall, 3) for k in ("main", "sampler", "reads", "process")}
        res.update(variant=variant, seconds=round(wall, 2), frames_per_s=round((b["frames"] - a["frames"]) / wall, 2))
        with open(out, "w") as f:
            json.dump(res, f)
        the_app.exit()

    mount = GputopApp.on_mount

    def on_mount(self):
        mount(self)
        self.set_timer(warm, begin)

    GputopApp.on_mount = on_mount
    the_app.run()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        variant, warm, seconds, out = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        child(variant, warm, seconds, out, sys.argv[6:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--warm", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--idle", action="store_true", help="replay an idle H200 instead of live NVML")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("gputop_args", nargs="*", help="after --: gputop's arguments (default: --rate 10)")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variants {bad}; known: {', '.join(VARIANTS)}")
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    gputop_args = args.gputop_args or ["--rate", "10"]
    if args.idle:
        gputop_args += ["--replay", idle_trace()]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results = []
    print(f"gputop {' '.join(gputop_args)} at {cols}x{rows}: {args.seconds:g} s measured after {args.warm:g} s")
    print(f"{'switched off':<14} {'main %':>7} {'sampler %':>10} {'(reads)':>8} {'process %':>10} {'frames/s':>9}")
    for v in variants:
        out = os.path.join(tempfile.gettempdir(), f"tui_parts_{os.getpid()}_{v}.json")
        argv = [sys.executable, os.path.abspath(__file__), "--child", v, str(args.warm), str(args.seconds), out]
        p = PtyProc(v, argv + gputop_args, cols, rows, env)
        deadline = time.monotonic() + args.warm + args.seconds + 30
        while p.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        p.stop()
        if not os.path.exists(out):
            print(f"{v}: no result; its last output:\n{p.tail_text()}", file=sys.stderr)
            return 1
        with open(out) as f:
            r = json.load(f)
        os.unlink(out)
        results.append(r)
        print(f"{'nothing' if v == 'all' else v:<14} {r['main']:7.3f} {r['sampler']:10.3f} {r['reads']:8.3f} "
              f"{r['process']:10.3f} {r['frames_per_s']:9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": gputop_args, "size": args.size, "warm_s": args.warm, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
