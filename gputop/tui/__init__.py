"""The Textual TUI (``gputop`` with no mode flag). Textual is imported only when the TUI starts."""

from __future__ import annotations


def main_tui(args) -> int:
    """Open the source, build the app, run it; returns the exit code."""
    import os
    import sys

    from gputop import exitcodes
    from gputop.exitcodes import fail
    from gputop.telemetry.errors import SourceError

    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    if not getattr(args, "served", False) and not (sys.stdin.isatty() and sys.stdout.isatty()):  # served: a browser
        return fail(exitcodes.USAGE, "the monitor needs a terminal; for text use --once, --record or --run NAME")
    from gputop.tui.app import config_from_args, make_app

    try:
        config = config_from_args(args)
        config.settle_gc = True
        app = make_app(config)
    except SourceError as exc:
        return fail(exitcodes.code_for(exc), str(exc))
    app.start_sampling()  # the first ticks are read while Textual starts up
    try:
        code = app.run()
    finally:  # however the app ended (an error, a terminal gone), no run of it outlives gputop
        app.model.controller.stop_all()
    if app.stop_signal is not None:
        return exitcodes.for_signal(app.stop_signal)
    return code if isinstance(code, int) else exitcodes.OK
