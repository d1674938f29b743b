"""``gputop --tour``: a presenter's walk through the workloads, one key (``n``) per stop.

Each stop names a workload and one sentence on what to look at while it runs (its lesson's ``TOUR``).
With a live GPU the stop runs the workload there (its ``--quick`` version); without one it replays the
recorded GPU run that ships with gputop (gputop/data/runs/, or ``--recorded FILE``), or else runs the CPU
version; a stop with none of these is passed over, said why. ``n`` on a stop whose run still goes stops it first.
Where the tour is lives here (no Textual); the workloads page goes from stop to stop (``WorkloadsPage.tour_next``).
"""

from __future__ import annotations

from gputop.lessons import lesson
from gputop.tui.model.runs import RecordingSpec

# The stops in order; what to look at at each is its lesson's TOUR sentence (gputop/lessons/NAME.py).
STOPS = [(name, lesson(name).tour) for name in ("roofline", "batchsize", "amp", "cudagraphs", "dataloader")]


class Tour:
    """Where the tour is (``i``: the stop shown, -1 before the first) and how to go on."""

    def __init__(self, stops: list[tuple[str, str]] | None = None):
        self.stops = list(stops if stops is not None else STOPS)
        self.i = -1
        self.line = ("tour: press n to start (" + ", ".join(n for n, _ in self.stops) + ")")

    def pick(self, model, name: str):
        """(spec, how) for a stop: the live workload on the GPU, its recording, or its CPU version."""
        specs = [s for s in model.specs if getattr(s, "workload", s.name) == name]
        live = next((s for s in specs if not isinstance(s, RecordingSpec)), None)
        recorded = next((s for s in specs if isinstance(s, RecordingSpec)), None)
        if live is not None and not model.no_gpu:
            return live, "live on the GPU"
        if recorded is not None:
            return recorded, "the " + recorded.name.split("(", 1)[1].rstrip(")") + " run"
        if live is not None and live.supports_cpu:
            return live, "on the CPU: no GPU here, no recording of it"
        return None, "needs a GPU and no recording of it ships"

    def advance(self, model) -> tuple[str, object] | None:
        """Go on to the next stop that has something to show (those that have not are passed over, said why
        in ``line``): (its name, the spec to run or replay); None when the tour is over."""
        skipped = []
        while True:
            self.i += 1
            if self.i >= len(self.stops):
                self.i = -1
                self.line = "tour over" + (f" ({'; '.join(skipped)})" if skipped else "") + ": n starts again"
                return None
            name, sentence = self.stops[self.i]
            spec, how = self.pick(model, name)
            if spec is not None:
                break
            skipped.append(f"{name} {how}")
        self.line = f"tour {self.i + 1}/{len(self.stops)} {name}, {how}. {sentence}"
        if skipped:
            self.line += f"  [passed over: {'; '.join(skipped)}]"
        return name, spec
