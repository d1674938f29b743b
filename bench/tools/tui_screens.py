"""Screenshots of the TUI from a real run: the monitor, the roofline while it runs, each workload's results.

    python bench/tools/tui_screens.py --out DIR                 # live GPU 0, every workload (--quick params)
    python bench/tools/tui_screens.py --out DIR --workloads roofline,amp --size 160x48
    python bench/tools/tui_screens.py --out DIR --replay gputop/data/demo.jsonl.gz --workloads ''   # no GPU

Drives the app headlessly (Textual's run_test) with real sampling, runs each workload from the
workloads page as a user would (select, quick parameters, r), and saves SVG screenshots
(app.save_screenshot), a plain-text copy of each screen, and each run's JSON document. Everything
is packed into DIR/tui_screens.tar.gz (one file: the GPU machine returns few files) and listed in
DIR/tui_screens.log. PNGs are made afterwards with bench/tools/svg_png.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.cli import parse  # noqa: E402
from gputop.runner.params import format_value  # noqa: E402
from gputop.tui.app import make_app  # noqa: E402

ORDER = ["roofline", "amp", "batchsize", "dataloader", "cudagraphs"]


def log(msg: str, logf) -> None:
    line = f"[{time.strftime('%H:%M:%S')}] {msg}"
    print(line, flush=True)
    logf.write(line + "\n")
    logf.flush()


async def drive(app, work: Path, args, logf) -> None:
    w, h = (int(x) for x in args.size.lower().split("x"))
    async with app.run_test(size=(w, h)) as pilot:
        async def pause(s: float) -> None:
            end = time.monotonic() + s
            while time.monotonic() < end:
                await pilot.pause(0.1)

        def shot(name: str) -> None:
            app.frame(force=True)
            app.save_screenshot(str(work / f"{name}.svg"))
            (work / f"{name}.txt").write_text(app.screen_text())
            log(f"saved {name}.svg", logf)

        await pause(args.settle)
        shot("monitor")
        await pilot.resize_terminal(80, 24)
        await pause(1.0)
        shot("monitor_80x24")
        await pilot.resize_terminal(w, h)
        await pause(1.0)
        names = [s.name for s in app.model.specs]
        for name in [n for n in args.workloads.split(",") if n]:
            if name not in names:
                log(f"{name}: not in the registry ({', '.join(names)})", logf)
                continue
            spec = app.model.specs[names.index(name)]
            await pilot.press("2")
            await pause(0.3)
            app.query_one("#wl-list").highlighted = names.index(name)
            await pause(0.5)
            if args.quick:
                for k, v in spec.quick.items():
                    inputs = app.query(f"#param-{k}")
                    if inputs:
                        inputs.first().value = format_value(v)
            for item in args.param:
                k, v = item.split("=", 1)
                wl, _, key = k.rpartition(".")
                inputs = app.query(f"#param-{key}")
                if (not wl or wl == name) and inputs:
                    inputs.first().value = v
            await pause(0.2)
            n_runs = len(app.model.controller.runs)
            await pilot.press("r")
            await pause(0.5)
            if len(app.model.controller.runs) == n_runs:
                log(f"{name}: did not start; the screen (its note why at the bottom):\n{app.screen_text()}", logf)
                continue
            state = app.model.controller.runs[-1]
            run = state.run
            t0 = time.monotonic()
            shot_at = None
            while not run.finished and time.monotonic() - t0 < args.timeout:
                await pause(0.5)
                if name == "roofline" and shot_at is None and len(run.points) >= args.roofline_points:
                    shot("roofline_running")
                    await pilot.press("1")
                    await pause(1.0)
                    shot("monitor_roofline_running")
                    await pilot.press("2")
                    shot_at = time.monotonic()
            if not run.finished:
                log(f"{name}: still running after {args.timeout:g} s: cancelling", logf)
                await pilot.press("c")
                while not run.finished and time.monotonic() - t0 < args.timeout + 15:
                    await pause(0.5)
            await pause(1.0)
            doc = run.document()
            (work / f"{name}.json").write_text(json.dumps(doc, indent=1))
            log(f"{name}: {doc['status']} in {doc.get('wall_time_s', 0):.1f} s, {len(doc.get('points', []))} points, "
                f"errors {[e.get('message') for e in doc.get('errors', [])]}", logf)
            shot(f"{name}_results")
            if name == "roofline":
                await pilot.press("1")
                await pause(1.0)
                shot("monitor_after_roofline")
        await pilot.press("1")
        await pause(1.0)
        shot("monitor_end")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output folder (default $OUT)")
    ap.add_argument("--size", default="160x48", help="terminal COLSxROWS (default 160x48)")
    ap.add_argument("--workloads", default=",".join(ORDER), help="comma-separated (default all, roofline first)")
    ap.add_argument("--param", action="append", default=[], metavar="[WORKLOAD.]K=V", help="override a parameter")
    ap.add_argument("--full", dest="quick", action="store_false", help="default parameters instead of --quick ones")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per workload before cancelling")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds of sampling before the first screenshot")
    ap.add_argument("--roofline-points", type=int, default=6, help="roofline points before the 'running' shot")
    ap.add_argument("--replay", help="a trace instead of the live GPU")
    ap.add_argument("--gpu", type=int, action="append")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="where workloads run")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ns, _ = parse((["--replay", args.replay] if args.replay else []) + [f"--gpu={g}" for g in args.gpu or []])
    app = make_app(ns)
    app.model.config.save_dir = str(out)
    app.model.set_device(args.device)
    with tempfile.TemporaryDirectory() as tmp, open(out / "tui_screens.log", "w") as logf:
        work = Path(tmp) / "tui_screens"
        work.mkdir()
        log(f"gputop TUI screenshots, {args.size}, workloads {args.workloads or '(none)'}", logf)
        try:
            asyncio.run(drive(app, work, args, logf))
        except Exception as exc:  # keep whatever was saved
            log(f"stopped early: {type(exc).__name__}: {exc}", logf)
            import traceback

            logf.write(traceback.format_exc())
        with tarfile.open(out / "tui_screens.tar.gz", "w:gz") as tar:
            tar.add(work, arcname="tui_screens")
        log(f"packed {len(list(work.iterdir()))} files into {out / 'tui_screens.tar.gz'}", logf)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
