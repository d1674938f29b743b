"""The one shape of a run, whatever runs: a workload (:class:`~gputop.runner.workload_run.WorkloadRun`), a
recorded workload run played back (:class:`~gputop.runner.recording.RecordedRun`), a user's command or a
watched process (:class:`~gputop.session.command.Session`); and :func:`drive`, the one headless loop.

A run is started once, asked to stop (a second stop kills it at once), polled without blocking or waited
for, and gives its document and gputop's exit code (:func:`gputop.runner.status.exit_code_for`, the one
place a status becomes an exit code). The frontends hold any of them the same way: the headless modes
through :func:`drive`, the TUI from its frame timer.
"""

from __future__ import annotations

from typing import Protocol

from gputop import exitcodes
from gputop.runner.stop_signals import StopSignals

POLL_S = 0.1  # how often drive() looks at a run (a watch's --seconds, a command's GPU marks)


class Run(Protocol):
    stopping: bool  # stop() was asked (q, a signal, a cancel): the run is ending or ended early

    def start(self) -> "Run":
        """Launch it, once. A workload that cannot start ends at once (status "error", with its document);
        a command or watch that cannot start raises (OSError, psutil.Error)."""

    def stop(self, signum: int | None = None) -> None:
        """Ask it to end (SIGINT to the child, SIGKILL after the grace period); asked again, at once.
        ``signum``: the signal that stopped gputop, for the document and the exit code (128+N)."""

    def poll(self) -> bool:
        """Look at it without blocking; True once it is over."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until it is over (``timeout``: at most that long); True once it is over."""

    def document(self) -> dict:
        """Its document: the final one once it is over (a command's is built then, and waits for it)."""

    @property
    def exit_code(self) -> int | None:
        """gputop's exit code once it is over (README's table); None before."""


def drive(run: Run, on_signal: str) -> Run:
    """Start ``run`` and wait until it is over, headless. While it runs, gputop's SIGINT, SIGTERM and SIGHUP
    stop it (the first says ``on_signal`` on stderr after the signal's name; a second kills it now)."""
    def on_stop(signum: int) -> None:
        if not run.stopping:
            exitcodes.say(f"{exitcodes.signal_name(signum)}: {on_signal}")
        run.stop(signum)

    with StopSignals(on_stop):
        run.start()
        while not run.wait(POLL_S):
            pass
    return run
