"""``gputop --run -- CMD ARGS...`` and ``gputop --watch PID``, without the TUI: a report when it ends.

gputop samples every GPU (10 Hz) while the command runs as its child, finds the GPU(s) the command's
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
import shutil
import sys

from gputop import exitcodes
from gputop.documents import check_writable, emit, monitor_error_document, writable
from gputop.runner.child import StopSignals
from gputop.session.command import Session
from gputop.session.monitor import check_live_args, open_monitor
from gputop.session.report import render_text


def prepare_command(args, command: list[str]) -> None:
    """Raise Failure for bad input before anything runs (the TUI's command view checks the same)."""
    check_live_args(args.spec, "--run -- CMD")
    if args.seconds is not None:
        raise exitcodes.Failure(exitcodes.USAGE, "--seconds goes with --record or --watch; to stop a command "
                                                 "use --timeout S")
    if not command:
        raise exitcodes.Failure(exitcodes.USAGE, "no command after `--`")
    check_writable(args.output, "--output")
    check_writable(args.log, "--log")
    check_writable(args.record, "--record")


def command_missing(command: list[str]) -> str | None:
    if "/" not in command[0] and shutil.which(command[0]) is None:
        return f"command not found: {command[0]}"
    return None


def prepare_watch(args) -> None:
    import psutil

    check_live_args(args.spec, "--watch PID")
    check_writable(args.output, "--output")
    check_writable(args.record, "--record")
    if args.watch <= 0 or not psutil.pid_exists(args.watch):
        raise exitcodes.Failure(exitcodes.USAGE, f"--watch {args.watch}: no such process")


def start_failure(exc: BaseException, session: Session) -> exitcodes.Failure:
    """Why a session could not start, as a usage Failure."""
    if session.mode == "watch":
        return exitcodes.Failure(exitcodes.USAGE, f"--watch {session.pid}: {exc}")
    if isinstance(exc, OSError) and session.log and exc.filename == session.log:
        return exitcodes.Failure(exitcodes.USAGE, f"cannot write {session.log}: {exc.strerror or exc}")
    why = "command not found" if isinstance(exc, FileNotFoundError) else "cannot run the command"
    return exitcodes.Failure(exitcodes.USAGE, f"{why}: {session.command[0]} ({getattr(exc, 'strerror', None) or exc})")


def _refuse(args, mode: str, exc: exitcodes.Failure, command=None, pid=None) -> int:
    exitcodes.say(str(exc))
    if args.json or args.output:
        emit(monitor_error_document(mode, exc.kind, str(exc), exc.code, command=command, pid=pid),
             json_mode=args.json, output=args.output if writable(args.output) else None)
    return exc.code


def run_session(session: Session) -> None:
    """Start ``session`` and poll it until it ends; gputop's SIGINT/SIGTERM/SIGHUP stop it (twice: kill)."""
    def on_stop(signum):  # a second one: the supervisor kills the command at once
        if not session.stopping:
            exitcodes.say(f"{exitcodes.signal_name(signum)}: stopping (again to kill it now)"
                          if session.mode == "run" else f"{exitcodes.signal_name(signum)}: watch ended")
        session.stop(signum)

    with StopSignals(on_stop):
        session.start()
        while not session.poll():
            if session.child is not None:
                session.child.wait(0.1)
            else:
                session.wait(0.1)


def main_command(args, command: list[str]) -> int:
    """``gputop --run -- CMD ARGS...``."""
    try:
        prepare_command(args, command)
        mon = open_monitor(args.spec, "gputop --run -- " + shlex.join(command), args.record)  # NVML first: exit 3
    except exitcodes.Failure as exc:
        return _refuse(args, "run", exc, command=command)
    missing = command_missing(command)
    if missing:
        mon.close()
        return _refuse(args, "run", exitcodes.Failure(exitcodes.USAGE, missing), command=command)
    if not args.json:
        exitcodes.say(f"running `{shlex.join(command)}`, sampling {len(mon.static)} GPU(s) at {args.rate:g} Hz")
    session = Session(mon, command, log=args.log, timeout=args.timeout, grace_s=args.grace, json_mode=args.json)
    return _run_and_report(args, session, command=command)


def main_watch(args) -> int:
    """``gputop --watch PID [--seconds N]``: until the process exits, N seconds pass, or a signal."""
    try:
        prepare_watch(args)
        mon = open_monitor(args.spec, f"gputop --watch {args.watch}", args.record, active_ok=True)
    except exitcodes.Failure as exc:
        return _refuse(args, "watch", exc, pid=args.watch)
    if not args.json:
        until = f" for {args.seconds:g} s" if args.seconds else " until it exits or Ctrl-C"
        exitcodes.say(f"watching pid {args.watch}{until}")
    session = Session(mon, pid=args.watch, seconds=args.seconds)
    return _run_and_report(args, session, pid=args.watch)


def _run_and_report(args, session: Session, **who) -> int:
    """Run the session to its end, then its report; an error document when it could not start."""
    try:
        try:
            run_session(session)
        except Exception as exc:  # OSError: the command cannot start; psutil.Error: the pid is gone or not ours
            session.monitor.stop()
            return _refuse(args, session.mode, start_failure(exc, session), **who)
        doc = session.finish()
    finally:
        session.monitor.close()
    return write_report(args, doc)


def write_report(args, doc: dict) -> int:
    """The report out (``-o`` first, then stdout as JSON or text); gputop's exit code."""
    if not emit(doc, json_mode=args.json, output=args.output, render_text=render_text):
        return doc["exit_code"] or exitcodes.FAILED
    return doc["exit_code"]
