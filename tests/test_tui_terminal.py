"""Losing the terminal (gputop/tui/terminal.py), in-process: the loss and the kernel's SIGHUP that comes with
it stop the runs once (a second stop would kill them without their grace period), and a terminal whose writes
fail is reported once and never blocks or raises. The real thing, on a pty whose master is closed:
tests/test_faults_tui.py."""

from __future__ import annotations

import signal

from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, TuiConfig
from gputop.tui.terminal import TerminalLost, GuardedFile
from pilot_util import DEMO, sync, wait_for


def app_counting_stops() -> tuple[GputopApp, list]:
    app = GputopApp(TuiConfig(ReplaySource(str(DEMO), speed=float("inf")), start_sampler=False, fps=0, specs=[],
                              device="cpu"))
    stops = []
    cancel = app.model.controller.cancel

    def counted(*args, **kwargs):
        stops.append(kwargs.get("signum"))
        return cancel(*args, **kwargs)

    app.model.controller.cancel = counted
    return app, stops


@sync
async def test_the_kernels_sighup_after_the_loss_is_the_same_stop():
    app, stops = app_counting_stops()
    async with app.run_test() as pilot:
        app.post_message(TerminalLost("the terminal hung up"))
        await wait_for(pilot, lambda: app.lifecycle.terminal_gone)
        app.lifecycle.signal_arrived(signal.SIGHUP)  # what the kernel sent with the hang-up
        await wait_for(pilot, lambda: app.return_code is not None)
    assert stops == [signal.SIGHUP] and app.return_value == 128 + signal.SIGHUP


@sync
async def test_the_loss_after_the_kernels_sighup_is_the_same_stop():
    app, stops = app_counting_stops()
    async with app.run_test() as pilot:
        app.lifecycle.signal_arrived(signal.SIGHUP)
        app.post_message(TerminalLost("a write to the terminal failed"))
        await wait_for(pilot, lambda: app.return_code is not None)
    assert stops == [signal.SIGHUP] and app.return_value == 128 + signal.SIGHUP


@sync
async def test_a_signal_after_the_loss_still_stops():
    """Only the SIGHUP that comes with the loss is the same event: a SIGTERM sent after it is a stop (the
    second one, which kills the runs at once)."""
    app, stops = app_counting_stops()
    async with app.run_test() as pilot:
        app.post_message(TerminalLost("the terminal hung up"))
        await wait_for(pilot, lambda: app.lifecycle.terminal_gone)
        app.lifecycle.signal_arrived(signal.SIGTERM)
        await wait_for(pilot, lambda: app.return_code is not None)
    assert stops == [signal.SIGHUP, signal.SIGTERM] and app.return_value == 128 + signal.SIGHUP


class DeadTerminal:
    """A file whose every write fails as a hung-up tty's does."""

    def __init__(self):
        self.tries = 0

    def write(self, text):
        self.tries += 1
        raise OSError(5, "Input/output error")

    def flush(self):
        self.tries += 1
        raise OSError(5, "Input/output error")

    def fileno(self):
        return 2


def test_a_failed_write_is_reported_once_and_later_ones_are_dropped():
    dead, lost = DeadTerminal(), []
    f = GuardedFile(dead, lost.append)
    for _ in range(100):  # more than Textual's writer queue holds (30): none blocks, none raises
        f.write("\x1b[?1049h")
        f.flush()
    assert len(lost) == 1 and "Input/output error" in lost[0] and dead.tries == 1
