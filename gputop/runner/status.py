"""How a run ended: its final status, and the one place a status becomes gputop's exit code (pure;
README.md has the table).

``final_status`` reads a workload child's return code, its ``done`` event, what the supervisor did (stop
asked, killed after the grace period, timeout) and the child's error events; ``command_status`` the same
for a user's command (``--run -- CMD``), which has no events. Statuses: ok, error, interrupted, timeout,
crashed, missing_dependency. ``exit_code_for`` turns any of them into gputop's exit code.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from gputop import exitcodes

STATUSES = ("ok", "error", "interrupted", "timeout", "crashed", "missing_dependency")
EXIT_CODES = {
    "ok": exitcodes.OK, "error": exitcodes.FAILED, "interrupted": exitcodes.INTERRUPTED,
    "timeout": exitcodes.TIMEOUT, "crashed": exitcodes.CRASHED,
    "missing_dependency": exitcodes.MISSING_DEPENDENCY,
}


@dataclass
class Ending:
    status: str
    message: str | None = None  # an error event the runner adds (crashed, timeout, exited unfinished)
    kind: str | None = None


def final_status(rc: int, done: str | None, *, stop_asked: bool, killed: bool, timed_out: bool,
                 error_kinds: list[str], grace_s: float = 0.0, timeout: float | None = None) -> Ending:
    """The status of a run whose child returned ``rc`` (negative: killed by that signal)."""
    if timed_out:
        return Ending("timeout", f"the workload ran past its {timeout:g} s timeout and was stopped"
                      + (f" (killed after {grace_s:g} s more)" if killed else ""), "timeout")
    if rc < 0 or done is None:
        # asked to stop, and it ended before finishing: interrupted, however it ended (a SIGINT that lands
        # while Python is still starting up ends it with KeyboardInterrupt, exit code 1), unless a signal
        # other than ours killed it
        if stop_asked and (killed or rc >= 0 or rc == -signal.SIGINT):
            return Ending("interrupted")
        if rc < 0:
            name = exitcodes.signal_name(-rc)
            msg = f"the workload process was killed by {name}"
            if -rc == signal.SIGKILL:
                msg += " (out of host memory, or killed from outside?)"
            return Ending("crashed", msg, "crashed")
        if rc == exitcodes.MISSING_DEPENDENCY or "missing_dependency" in error_kinds:
            return Ending("missing_dependency", None if "missing_dependency" in error_kinds else
                          f"the workload process exited with code {rc} (a missing dependency) without finishing",
                          "exited")
        return Ending("error", f"the workload process exited with code {rc} without finishing", "exited")
    if rc == exitcodes.MISSING_DEPENDENCY or "missing_dependency" in error_kinds:
        return Ending("missing_dependency")
    if rc == exitcodes.INTERRUPTED or done == "interrupted":
        return Ending("interrupted")
    if rc == 0 and done == "ok":
        return Ending("ok")
    return Ending("error", None if error_kinds else f"the workload exited with code {rc}", "exception")


def command_status(rc: int, *, stopped: bool, killed: bool, timed_out: bool, grace_s: float = 0.0,
                   timeout: float | None = None) -> Ending:
    """The status of a user's command that returned ``rc`` (negative: killed by that signal); ``stopped``:
    gputop stopped it (a signal to gputop, q in the TUI)."""
    if timed_out:
        return Ending("timeout", f"the command ran past --timeout {timeout:g} s and was stopped"
                      + (f" (killed after {grace_s:g} s more)" if killed else ""), "timeout")
    if stopped:
        return Ending("interrupted")
    if rc < 0:
        return Ending("crashed", f"the command was killed by {exitcodes.signal_name(-rc)}", "crashed")
    if rc:
        return Ending("error", f"the command exited with code {rc}", "exited")
    return Ending("ok")


def exit_code_for(status: str, signum: int | None = None, error_kinds: list[str] | None = None,
                  command_code: int | None = None) -> int:
    """gputop's exit code for a run that ended with ``status``: 6 after its timeout; else 128+N when signal N
    stopped gputop; else, for a user's command (``command_code``: its code as a shell gives it), that code;
    else the status's code in the table."""
    if status == "timeout":
        return exitcodes.TIMEOUT
    if signum:
        return exitcodes.for_signal(signum)
    if command_code is not None:
        return command_code
    if status == "error" and "bad_param" in (error_kinds or []):
        return exitcodes.USAGE
    return EXIT_CODES.get(status, exitcodes.FAILED)
