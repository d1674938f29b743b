"""``gputop --tour``: a presenter's walk through the workloads, one key (``n``) per stop.

Each stop names a workload and one sentence on what to look at while it runs (its lesson's ``TOUR``).
With a live GPU the stop runs the workload there (its ``--quick`` version); without one it replays the
recorded GPU run that ships with gputop (gputop/data/runs/, or ``--recorded FILE``), or else runs the CPU
version; a stop with none of these is passed over, said why. ``n`` on a stop whose run still goes stops it first.
"""

from __future__ import annotations

from gputop.lessons import lesson
from gputop.runner.params import resolve
from gputop.tui.follow import go_home
from gputop.tui.runs import RecordingSpec
from gputop.workload_api import ParamError

# The stops in order; what to look at at each is its lesson's TOUR sentence (gputop/lessons/NAME.py).
STOPS = [(name, lesson(name).tour) for name in ("roofline", "batchsize", "amp", "cudagraphs", "dataloader")]


class Tour:
    """Where the tour is (``i``: the stop shown, -1 before the first) and how to go on."""

    def __init__(self, stops: list[tuple[str, str]] | None = None):
        self.stops = list(stops if stops is not None else STOPS)
        self.i = -1
        self.line = ("tour: press n to start (" + ", ".join(n for n, _ in self.stops) + ")")

    def pick(self, app, name: str):
        """(spec, how) for a stop: the live workload on the GPU, its recording, or its CPU version."""
        specs = [s for s in app.specs if getattr(s, "workload", s.name) == name]
        live = next((s for s in specs if not isinstance(s, RecordingSpec)), None)
        recorded = next((s for s in specs if isinstance(s, RecordingSpec)), None)
        if live is not None and not app.no_gpu:
            return live, "live on the GPU"
        if recorded is not None:
            return recorded, "the " + recorded.name.split("(", 1)[1].rstrip(")") + " run"
        if live is not None and live.supports_cpu:
            return live, "on the CPU: no GPU here, no recording of it"
        return None, "needs a GPU and no recording of it ships"

    def next(self, app) -> None:
        """Stop the run that still goes (on a worker thread: a workload gets its grace period), then go to
        the next stop and start it."""
        if not app.controller.active:
            self._go(app)
            return
        app.notify("tour: stopping " + ", ".join(r.name for r in app.controller.active) + "...")

        def stop_then_go() -> None:
            app.controller.stop_all()
            app.call_from_thread(self._go, app)

        app.run_worker(stop_then_go, thread=True, group="tour")

    def _go(self, app) -> None:
        skipped = []
        while True:
            self.i += 1
            if self.i >= len(self.stops):
                self.i = -1
                self.line = "tour over" + (f" ({'; '.join(skipped)})" if skipped else "") + ": n starts again"
                app.redraw()
                return
            name, sentence = self.stops[self.i]
            spec, how = self.pick(app, name)
            if spec is not None:
                break
            skipped.append(f"{name} {how}")
        self.line = f"tour {self.i + 1}/{len(self.stops)} {name}, {how}. {sentence}"
        if skipped:
            self.line += f"  [passed over: {'; '.join(skipped)}]"
        if app.page != "workloads":
            app.action_page("workloads")
        app.query_one("#wl-list").highlighted = app.specs.index(spec)
        if isinstance(spec, RecordingSpec):
            app.workloads.replay(spec)
            return
        if app.refuse_control("run a workload"):
            return
        device = "cpu" if app.no_gpu else "cuda"
        go_home(app)
        try:
            values = resolve(spec, {}, device, quick=True)
            app.controller.start(spec, values, device, app.nvml_index() if device == "cuda" else None,
                                 timeout=app.config.timeout, grace_s=app.config.grace_s)
        except (ParamError, RuntimeError, ValueError, OSError) as exc:
            app.notify(f"tour: {name} did not start: {exc}", severity="error")
            return
        app.notify(f"started {name} on {'the CPU' if device == 'cpu' else 'the GPU'}")
        app.shown_run = None
        app.redraw()
