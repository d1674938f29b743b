"""The Textual TUI (``gputop`` with no mode flag). Textual is imported only when the TUI starts."""

from __future__ import annotations


FIRST_FRAME_WAIT_S = 0.5  # how long Textual's import waits for the early frame (a slow source: no longer)


def main_tui(args) -> int:
    """Open the source, build the app, run it; returns the exit code."""
    import gc
    import os
    import sys

    from gputop import exitcodes
    from gputop.exitcodes import fail
    from gputop.telemetry.errors import SourceError

    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    if not getattr(args, "served", False) and not (sys.stdin.isatty() and sys.stdout.isatty()):  # served: a browser
        return fail(exitcodes.USAGE, "the monitor needs a terminal; for text use --once or --run NAME "
                                     "(without a GPU: --demo --once, --run NAME --device cpu)")
    gc.disable()  # start-up allocates ~100k objects that all stay; the collector's passes over them (60-110 ms
    # on the CPU machine) wait for settle_gc, 3 s after start-up, which collects once and turns it back on
    import signal

    from gputop.tui.early_frame import EarlyStart

    # SIGTERM and SIGHUP (the terminal closed) while gputop starts up, before the app watches them (its on_mount):
    # noted here and acted on then, as on any other stop signal (exit 128+N), not the default death
    pending: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: pending.append(signum))

    early = EarlyStart(args, paint=not getattr(args, "served", False))  # the source and its first tick, on a thread
    if early.paint:  # that tick on screen first, then Textual imported (one GIL for both); else side by side
        early.first_painted(FIRST_FRAME_WAIT_S)
    try:
        from gputop.tui.app import make_app  # (Textual: imported meanwhile)

        config = early.config()
        config.settle_gc = True
        app = make_app(config)
    except SourceError as exc:
        return fail(exitcodes.code_for(exc), str(exc))
    except BaseException:
        early.leave()
        raise
    early.hand_over(app)
    app.lifecycle.pending_signals = pending
    app.lifecycle.start_sampling()  # the next ticks are read while Textual starts up
    from gputop.tui import crash

    try:
        code = crash.run(app)
    finally:  # however the app ended (an error, a terminal gone), no run of it outlives gputop
        app.model.controller.stop_all()
    crashed = crash.crash_code(app)  # an exception: logged, one line
    if crashed is not None:
        return crashed
    if app.lifecycle.stop_signal is not None:
        return exitcodes.for_signal(app.lifecycle.stop_signal)
    return code if isinstance(code, int) else exitcodes.OK
