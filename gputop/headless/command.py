"""``gputop --run -- CMD ARGS...`` and ``gputop --watch PID``, without the TUI: a report when it ends.

gputop samples every GPU (at ``--rate``) while the command runs as its child, finds the GPU(s) the command's
process tree uses, and at the end prints a verdict timeline and a summary per GPU, or one JSON document
(``--json``; an error document too when it cannot start). The command's exit code becomes gputop's.

Before the command runs: exit 3 when NVML is unavailable; 2 when the command cannot be started (not
found, not executable: a shell says 127/126; gputop uses its usage code so that "gputop could not start
it" reads like every other bad input). SIGINT, SIGTERM and SIGHUP to gputop stop the command through the
one supervisor (SIGINT to its group, SIGKILL after the grace period; a second signal kills at once); the
document is still written and gputop exits 128+N.
"""

from __future__ import annotations

import shlex

from gputop import exitcodes
from gputop.documents import emit, monitor_error_document, writable
from gputop.runner.run import drive
from gputop.session.command import Session
from gputop.session.command_options import SessionOptions, open_session, start_failure
from gputop.session.report import write_report


def _refuse(mode: str, exc: exitcodes.Failure, json_mode: bool, output: str | None, command=None, pid=None) -> int:
    exitcodes.say(str(exc))
    if json_mode or output:
        emit(monitor_error_document(mode, exc.kind, str(exc), exc.code, command=command, pid=pid),
             json_mode=json_mode, output=output if writable(output) else None)
    return exc.code


def main_command(opts: SessionOptions, *, json_mode: bool = False, output: str | None = None, serve=None) -> int:
    """``gputop --run -- CMD ARGS...`` (``opts.command``); the report on stdout (``json_mode``: one JSON document),
    and in ``output`` too. ``serve(session)``: serve it while it runs (``--export``, composed by cli), returning the
    function that stops serving (Failure: it cannot)."""
    command = list(opts.command)
    try:
        # NVML first; without a GPU the command still runs (its exit and CPU reported), unless --export serves it
        session = open_session(opts, output=output, json_mode=json_mode, gpu_optional=serve is None)
    except exitcodes.Failure as exc:
        if serve is not None and exc.code == exitcodes.NO_GPU:  # without --export the command would have run
            exc = exitcodes.Failure(exc.code, f"{exc}; --export serves GPUs: without it the command runs and its "
                                              "exit and CPU use are reported", exc.kind)
        return _refuse("run", exc, json_mode, output, command=command)
    if not json_mode:  # said once it runs (a command that cannot start is one line: why)
        session.on_start = lambda: exitcodes.say(
            f"running `{shlex.join(command)}`, sampling {len(session.monitor.static)} GPU(s) at "
            f"{opts.spec.rate_hz:g} Hz" if session.no_gpu is None else
            f"no GPU seen ({session.no_gpu}): running `{shlex.join(command)}` for its exit code and CPU use only")
    try:
        stop_serving = serve(session) if serve is not None else (lambda: None)
    except exitcodes.Failure as exc:
        session.monitor.close()
        if session.profile is not None:
            session.profile.close()
        return _refuse("run", exc, json_mode, output, command=command)
    try:
        return _run_and_report(session, json_mode, output, command=command)
    finally:
        stop_serving()


def main_watch(opts: SessionOptions, *, json_mode: bool = False, output: str | None = None) -> int:
    """``gputop --watch PID [--seconds N]`` (``opts.pid``): until the process exits, N seconds pass, or a signal."""
    try:
        session = open_session(opts, output=output, json_mode=json_mode)
    except exitcodes.Failure as exc:
        return _refuse("watch", exc, json_mode, output, pid=opts.pid)
    if not json_mode:
        until = f" for {opts.seconds:g} s" if opts.seconds else " until it exits or Ctrl-C"
        exitcodes.say(f"watching pid {opts.pid}{until}")
    return _run_and_report(session, json_mode, output, pid=opts.pid)


def _run_and_report(session: Session, json_mode: bool, output: str | None, **who) -> int:
    """Run the session to its end, then its report; an error document when it could not start."""
    try:
        try:
            drive(session, "stopping (again to kill it now)" if session.mode == "run" else "watch ended")
        except Exception as exc:  # OSError: the command cannot start; psutil.Error: the pid is gone or not ours
            session.monitor.stop()
            return _refuse(session.mode, start_failure(exc, session), json_mode, output, **who)
        doc = session.document()
    finally:
        session.monitor.close()
    why = (doc.get("attribution") or {}).get("why_none")
    if why and json_mode:  # the text report says it; --json's stdout is the document
        exitcodes.say(f"--profile: {why}")
    code = write_report(doc, json_mode=json_mode, output=output)
    for lost in session.files_lost():  # --record FILE, --log FILE on a disk that filled
        exitcodes.say(lost)
        code = code or exitcodes.FAILED
    return code
