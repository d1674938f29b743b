"""``gputop --tui --run -- CMD ARGS...`` and ``gputop --tui --watch PID``: the headless diagnosis, live.

The command runs in a :class:`gputop.session.command.Session` (the same supervisor, GPU finding, OOM
spotting and timeout as ``gputop --run -- CMD``), polled from the TUI's frame timer. The TUI shows the Monitor's sampler, diagnoses with the command as the feeding
process, tags the command's processes in the process table, and adds a panel on top: one status line
(command, pid, running or exited with its code, elapsed) and the verdict timeline so far
(:meth:`Monitor.analyze`, recomputed on a thread every couple of seconds). The command's stdout and
stderr go to ``--log FILE``, else to ``gputop-cmd-<gputop's pid>.log`` in the current folder.

When the command exits, sampling stops and the TUI stays open on the final timeline; q quits (while
the command runs, q sends it SIGINT and the supervisor kills it after its grace period). SIGINT, SIGTERM
and SIGHUP to gputop do the same as q, and gputop then exits 128+N. After the TUI closes, the report
prints as headless does (text, or ``--json``), and gputop's exit code is the command's. ``--watch PID``
does the same for a running process, which q leaves running.

The parts: the model follows the command (``TuiConfig.command``: its Monitor's sampler is the one drawn, its
processes are the ones diagnosed and tagged); ``lifecycle.CommandLifecycle``, the one object the app holds for it,
polls it, stops it and gives the exit code; ``panel`` draws its status and timeline, ``attribution`` its profiler
windows (``--profile``).
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys

from gputop import exitcodes
from gputop.session.command import Session
from gputop.tui.app import GputopApp
from gputop.tui.command.lifecycle import CommandLifecycle
from gputop.tui.config import TuiConfig
from gputop.tui import crash


def make_command_app(config: TuiConfig, session: Session) -> GputopApp:
    """The TUI on ``session`` (started): the model follows the command, the lifecycle runs it."""
    config.command = session
    return GputopApp(config, CommandLifecycle(session))


def main_command_tui(args, command: list[str]) -> int:
    """``gputop --tui --run -- CMD ARGS...`` / ``gputop --tui --watch PID``; the exit code as headless."""
    import platform

    from gputop.session.command_options import check_command, check_watch, command_missing, start_failure
    from gputop.session.report import write_report
    from gputop.session.monitor import open_monitor

    watch = not command
    try:
        if watch:
            check_watch(args.spec, args.watch, output=args.output, record=args.record)
        else:
            check_command(args.spec, command, output=args.output, log=args.log, record=args.record)
        note = f"gputop --watch {args.watch}" if watch else "gputop --run -- " + shlex.join(command)
        mon = open_monitor(args.spec, note, args.record, active_ok=watch)  # NVML first: exit 3 before anything runs
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            mon.close()
            raise exitcodes.Failure(exitcodes.USAGE, "--tui needs a terminal; without --tui the diagnosis prints as text")
    except exitcodes.Failure as exc:
        return exitcodes.fail(exc.code, str(exc))
    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    missing = None if watch else command_missing(command)
    if missing:
        mon.close()
        return exitcodes.fail(exitcodes.USAGE, missing)
    log = args.log or (None if watch else os.path.abspath(f"gputop-cmd-{os.getpid()}.log"))
    profile = None
    if getattr(args, "profile", False):
        from gputop.session.profiling import ProfileWindows, watchable

        why = watchable(args.watch) if watch else None
        if why:
            mon.close()
            return exitcodes.fail(exitcodes.USAGE, f"--watch {args.watch} --profile: {why}")
        profile = ProfileWindows(args.profile_seconds, max_steps=args.profile_steps, watch=args.watch if watch else None)
    session = Session(mon, command or None, pid=args.watch if watch else None, log=log,
                      timeout=args.timeout, seconds=args.seconds, grace_s=args.grace, stdin=subprocess.DEVNULL,
                      err=io.StringIO(), profile=profile)
    try:
        try:
            session.start()
        except Exception as exc:  # OSError: cannot start or no log; psutil: the pid ended or is not ours
            mon.stop()
            if profile is not None:
                profile.close()
            failure = start_failure(exc, session)
            return exitcodes.fail(failure.code, str(failure))
        config = TuiConfig(source=mon.source, rate_hz=args.spec.rate_hz, hostname=platform.node(),
                           timeout=getattr(args, "timeout", None))
        app = make_command_app(config, session)
        try:
            crash.run(app)
        finally:  # however the app ended (an error, a terminal gone), the command does not outlive it
            if not session.stopping:  # one already stopping keeps its grace period
                session.stop()
            session.wait()
        doc = session.document()
    finally:
        mon.close()
    code = write_report(doc)
    for lost in session.files_lost():  # --record FILE, --log FILE on a disk that filled: said after the screen
        exitcodes.say(lost)
        code = code or exitcodes.FAILED
    return crash.crash_code(app) or code  # the TUI's own exception (logged, one line) outranks the command's code
