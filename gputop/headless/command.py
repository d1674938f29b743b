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

from gputop import exitcodes
from gputop.documents import emit, monitor_error_document, writable
from gputop.runner.run import drive
from gputop.session.command import Session, check_command, check_watch, command_missing, start_failure, write_report
from gputop.session.monitor import open_monitor


def _refuse(args, mode: str, exc: exitcodes.Failure, command=None, pid=None) -> int:
    exitcodes.say(str(exc))
    if args.json or args.output:
        emit(monitor_error_document(mode, exc.kind, str(exc), exc.code, command=command, pid=pid),
             json_mode=args.json, output=args.output if writable(args.output) else None)
    return exc.code


def main_command(args, command: list[str], serve=None) -> int:
    """``gputop --run -- CMD ARGS...``; ``serve(args, session)``: serve it while it runs (``--export``, composed by
    cli), returning the function that stops serving (Failure: it cannot)."""
    try:
        check_command(args, command)
        mon = open_monitor(args.spec, "gputop --run -- " + shlex.join(command), args.record)  # NVML first: exit 3
    except exitcodes.Failure as exc:
        return _refuse(args, "run", exc, command=command)
    missing = command_missing(command)
    if missing:
        mon.close()
        return _refuse(args, "run", exitcodes.Failure(exitcodes.USAGE, missing), command=command)
    if not args.json:
        exitcodes.say(f"running `{shlex.join(command)}`, sampling {len(mon.static)} GPU(s) at {args.rate:g} Hz")
    profile = None
    if args.profile:
        from gputop.session.profiling import ProfileWindows

        profile = ProfileWindows(args.profile_seconds, max_steps=args.profile_steps)
    session = Session(mon, command, log=args.log, timeout=args.timeout, grace_s=args.grace, json_mode=args.json,
                      profile=profile)
    try:
        stop_serving = serve(args, session) if serve is not None else (lambda: None)
    except exitcodes.Failure as exc:
        mon.close()
        if profile is not None:
            profile.close()
        return _refuse(args, "run", exc, command=command)
    try:
        return _run_and_report(args, session, command=command)
    finally:
        stop_serving()


def main_watch(args) -> int:
    """``gputop --watch PID [--seconds N]``: until the process exits, N seconds pass, or a signal."""
    try:
        check_watch(args)
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
            drive(session, "stopping (again to kill it now)" if session.mode == "run" else "watch ended")
        except Exception as exc:  # OSError: the command cannot start; psutil.Error: the pid is gone or not ours
            session.monitor.stop()
            return _refuse(args, session.mode, start_failure(exc, session), **who)
        doc = session.document()
    finally:
        session.monitor.close()
    why = (doc.get("attribution") or {}).get("why_none")
    if why and args.json:  # the text report says it; --json's stdout is the document
        exitcodes.say(f"--profile: {why}")
    return write_report(args, doc)

