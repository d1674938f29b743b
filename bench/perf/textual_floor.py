"""The floor under any Textual monitor: what a minimal Textual app costs to redraw N lines at F fps.

    python bench/perf/textual_floor.py                 # 0, 1, 10, all lines at 4 fps, 120x40, 20 s each
    python bench/perf/textual_floor.py --app 10 4      # (internal) the app itself: 10 lines at 4 fps

The app is one Line-API widget (plus a footer) whose first N rows change every frame; it runs in a
pseudo-terminal like ``bench/perf/tui_cpu.py`` runs gputop. The figures say how much of gputop's CPU is
Textual's own per-frame cost (timer, message pump, compositor, terminal writes) and how much is ours.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def app_main(lines: int, fps: float) -> None:
    from rich.segment import Segment
    from textual.app import App
    from textual.geometry import Region
    from textual.strip import Strip
    from textual.widget import Widget
    from textual.widgets import Footer

    class Rows(Widget):
        DEFAULT_CSS = "Rows { height: 1fr; }"
        n = 0

        def render_line(self, y: int) -> Strip:
            return Strip([Segment(f"row {y} frame {self.n}".ljust(self.size.width))])

    class Floor(App):
        def compose(self):
            yield Rows()
            yield Footer()

        def on_mount(self) -> None:
            self.set_interval(1.0 / fps, self.tick)

        def tick(self) -> None:
            w = self.query_one(Rows)
            w.n += 1
            n = w.size.height if lines < 0 else lines
            if n:
                w.refresh(*(Region(0, y, w.size.width, 1) for y in range(n)))

    Floor().run()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--app", nargs=2, metavar=("LINES", "FPS"), help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--fps", type=float, default=4.0)
    ap.add_argument("--lines", default="0,1,10,-1", help="rows redrawn per frame, -1 = all (default 0,1,10,-1)")
    args = ap.parse_args()
    if args.app:
        app_main(int(args.app[0]), float(args.app[1]))
        return 0
    sys.path.insert(0, HERE)
    from tui_cpu import PtyProc, measure

    cols, rows = (int(x) for x in args.size.lower().split("x"))
    print(f"minimal Textual app, terminal {cols}x{rows}, {args.fps:g} fps, {args.seconds:g} s each")
    for n in [int(x) for x in args.lines.split(",")]:
        p = PtyProc("floor", [sys.executable, os.path.abspath(__file__), "--app", str(n), str(args.fps)], cols, rows)
        try:
            r = measure([p], 3.0, args.seconds)["floor"]
        finally:
            p.stop()
        label = "all rows" if n < 0 else f"{n} rows"
        print(f"  {label:>9} per frame: {r['cpu_pct_of_core']:5.2f}% of a core  ({r['updates_per_s']:.1f} updates/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
