"""Every exit code gputop returns, and its one-line failure (README.md, "Exit codes", is the same table).

``fail`` and ``say`` write one line on stderr and never raise: after SIGHUP the terminal may be gone.
"""

from __future__ import annotations

import signal
import sys

OK = 0
FAILED = 1  # the workload failed (raised, or exited non-zero unfinished), or an output could not be written whole
USAGE = 2  # bad flags, bad parameter, unknown workload, unreadable input, unwritable output path, two outputs
# naming one file (documents.check_outputs)
NO_GPU = 3  # no NVML library, no driver, or no GPU, for a mode that needs live GPU data; or no dcgm-exporter
# answering at --source dcgm-exporter=URL (unreachable, no whole answer within its deadline, or an HTTP error). A
# misspelt URL, or an answer that is not HTTP or not dcgm-exporter's text, is USAGE.
MISSING_DEPENDENCY = 4  # cupy or torch (or numpy) is needed but not installed; the message names the extra
CRASHED = 5  # the workload's process died of a signal (segfault, SIGKILL, OOM kill) without finishing
TIMEOUT = 6  # the run went past --timeout and was stopped
DEGRADED = 7  # gputop --doctor: a GPU works but is slower or less safe than it should be (a finding "degraded")
UNHEALTHY = 8  # gputop --doctor: a GPU failed a check (a finding "failed": lost, memory errors, a link down, a hang)
INTERNAL_ERROR = 70  # gputop's TUI died of an exception (a bug): one line names the log that holds the traceback
# (sysexits.h's EX_SOFTWARE)
SIGNAL_BASE = 128  # gputop stopped by signal N exits 128+N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP
INTERRUPTED = SIGNAL_BASE + signal.SIGINT

TABLE = {
    OK: "ok",
    FAILED: "the workload (or your command) failed, or an output could not be written whole; partial results kept",
    USAGE: "bad usage or input (unknown flag or workload, bad parameter, unreadable trace, unwritable output, two "
           "outputs naming one file)",
    NO_GPU: "no NVML library, no driver or no GPU, for a mode that needs live GPU data (or no dcgm-exporter at --source)",
    MISSING_DEPENDENCY: "a missing dependency; the message names the extra to install",
    CRASHED: "the workload's process crashed (signal, CUDA fault, OOM kill)",
    TIMEOUT: "the run went past --timeout and was stopped",
    DEGRADED: "gputop --doctor: every GPU works, at least one is degraded (slower than it should be, or a warning)",
    UNHEALTHY: "gputop --doctor: at least one GPU failed a check (drain the node)",
    INTERNAL_ERROR: "the TUI stopped on an internal error (a bug in gputop); the traceback is in the log file it names",
}


def for_signal(signum: int) -> int:
    """gputop's exit code after it was stopped by signal ``signum`` (130 SIGINT, 143 SIGTERM, 129 SIGHUP)."""
    return SIGNAL_BASE + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def shell_code(returncode: int) -> int:
    """A child's return code as a shell reports it: 128+N for a child killed by signal N."""
    return SIGNAL_BASE - returncode if returncode < 0 else returncode


def say(message: str) -> None:
    """One line on stderr, prefixed ``gputop:``; silent when stderr is gone (closed terminal, full disk)."""
    try:
        sys.stderr.write(f"gputop: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def fail(code: int, message: str) -> int:
    """Say ``message`` on one line and return ``code``."""
    say(message)
    return code


class Failure(Exception):
    """A run that cannot start or go on: its exit code, a kind for the error document, one line of text."""

    def __init__(self, code: int, message: str, kind: str = "bad_usage"):
        super().__init__(message)
        self.code, self.kind = code, kind


def code_for(exc: Exception) -> int:
    """The exit code of a telemetry source that cannot be opened (:mod:`gputop.telemetry.errors`): NO_GPU where
    there is no GPU or nothing answers at the URL, USAGE for any other bad source (this table is the one
    place the source errors meet exit codes)."""
    from gputop.telemetry.errors import NoGpu, SourceUnreachable

    return NO_GPU if isinstance(exc, (NoGpu, SourceUnreachable)) else USAGE


def failure_for(exc: Exception) -> Failure:
    """A source error as a :class:`Failure`: its exit code (:func:`code_for`), its error document's kind."""
    code = code_for(exc)
    return Failure(code, str(exc), "no_gpu" if code == NO_GPU else "bad_usage")
