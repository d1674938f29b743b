"""Where there is no live GPU, the monitor follows a replayed recorded run: while a recording plays, the
app's telemetry source is that recording's own trace (its GPU, its charts, its phase marks in the header),
started with the run so the two stay in step; a live run (the CPU versions) brings the session's own
source back. With a live GPU the monitor keeps watching the real GPU."""

from __future__ import annotations

from gputop.telemetry.sampler import Sampler
from gputop.tui import view
from gputop.tui.monitor_page import CHARTS, HOST_CHART


def follow_recording(app, state) -> None:
    """Show the telemetry of the recorded run ``state`` plays (no live GPU only)."""
    path = getattr(state.run, "path", None)
    if not app.no_gpu or not path:
        return
    from gputop.telemetry.trace import ReplaySource

    if app.home_source is None:
        app.home_source = app.source
    use_source(app, ReplaySource(path, speed=app.config.run_speed))
    followed = app.source

    def back_when_over() -> None:  # the replay ended (or was stopped): the session's own source again
        if app.source is not followed:  # a live run or another replay took over already
            timer.stop()
        elif not state.active:
            timer.stop()
            go_home(app)
            app.notify(f"the replay of {state.name} is over: the monitor shows {describe(app)} again")

    timer = app.set_interval(0.5, back_when_over)


def describe(app) -> str:
    """What the monitor shows from the app's source, in words ("the demo", "this machine's host only", ...)."""
    source = app.source
    if source.kind == "replay":
        return "the demo" if source.loop else f"the replay of {source.label or 'a trace'}"
    if source.kind == "live":
        return "this machine's GPUs" if app.statics else "this machine's host only (no GPU)"
    return f"the {source.kind} GPUs"


def go_home(app) -> None:
    """Back to the session's own source (a live run starts)."""
    if app.home_source is None:
        return
    source, app.home_source = app.home_source, None
    use_source(app, source)


def use_source(app, source) -> None:
    """Draw from ``source`` from now on: a new sampler, its GPUs, their peaks, the charts they need."""
    old = app.sampler
    old.stop()
    if old.source is not app.home_source and old.source is not source:
        old.source.close()
    app.source = source
    app.sampler = Sampler(source, rate_hz=old.rate_hz)
    app.controller.sampler = app.sampler
    app.statics = list(source.static())
    app.positions = list(range(len(app.statics)))
    app.peaks = [view.peaks_for(st) for st in app.statics]
    app.na_reasons = source.na_reasons
    app.selected = 0
    app.sticky = view.Sticky()
    app.sampler.listeners.append(app.sticky.observe)
    app.strip.display = len(app.statics) > 1
    app.monitor.set_charts(CHARTS if app.statics else [HOST_CHART])
    app.monitor.verdict = None
    app.monitor.forget_verdict()
    if app.config.start_sampler:
        app.sampler.start()
    app.redraw()
