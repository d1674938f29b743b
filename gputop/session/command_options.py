"""What a ``--run -- CMD`` or ``--watch PID`` session is asked for, and the session it opens: both frontends
(headless/command.py, tui/command/) start from here, on typed values (never the command line).

:class:`SessionOptions` holds the options; :func:`open_session` checks them, opens the monitor (NVML first: exit 3
before anything runs), finds the command and readies the profiler windows, and gives the
:class:`~gputop.session.command.Session`, not started. ``check_command``, ``check_watch`` and ``command_missing`` are
its checks for a frontend that opens a session step by step (the TUI), ``start_failure`` the one line when
``Session.start`` fails.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass

from gputop import exitcodes
from gputop.documents import check_writable
from gputop.session.command import Session
from gputop.session.monitor import check_live_args, open_monitor
from gputop.session.without_gpu import run_without_gpu
from gputop.telemetry.source import SourceSpec


@dataclass(frozen=True)
class SessionOptions:
    """What a ``--run -- CMD`` (``command``) or ``--watch PID`` (``pid``) session is asked for, typed: the source (its
    rate included), the trace to record, the command's log, its limits, and its profiler windows."""

    spec: SourceSpec
    command: tuple[str, ...] = ()
    pid: int | None = None
    record: str | None = None  # --record FILE: the trace, with the run's marks
    log: str | None = None  # --log FILE: the command's output
    timeout: float | None = None  # --timeout S: the command is stopped then
    seconds: float | None = None  # --seconds N: a watch ends then
    grace_s: float | None = None  # --grace S (None: the supervisor's default)
    profile: bool = False  # --profile: torch.profiler (or CUPTI) windows in the command
    profile_seconds: float | None = None
    profile_steps: int | None = None

    @property
    def note(self) -> str:
        """What the trace's header says was recorded."""
        return "gputop --run -- " + shlex.join(self.command) if self.command else f"gputop --watch {self.pid}"


def check_command(spec: SourceSpec, command: list[str] | tuple[str, ...], *, output: str | None = None,
                  log: str | None = None, record: str | None = None) -> None:
    """Raise Failure for bad input to ``--run -- CMD`` before anything runs (``output``: the report's file)."""
    check_live_args(spec, "--run -- CMD")
    if not command:
        raise exitcodes.Failure(exitcodes.USAGE, "no command after `--`")
    check_writable(output, "--output")
    check_writable(log, "--log")
    check_writable(record, "--record")


def check_watch(spec: SourceSpec, pid: int, *, output: str | None = None, record: str | None = None) -> None:
    """Raise Failure for bad input to ``--watch PID`` (no such process) before anything runs."""
    import psutil

    check_live_args(spec, "--watch PID")
    check_writable(output, "--output")
    check_writable(record, "--record")
    if pid <= 0 or not psutil.pid_exists(pid):
        raise exitcodes.Failure(exitcodes.USAGE, f"--watch {pid}: no such process")


def open_session(opts: SessionOptions, *, output: str | None = None, json_mode: bool = False, err=None,
                 stdin=None, gpu_optional: bool = False) -> Session:
    """The session ``opts`` ask for, not started: its input checked, its monitor open (NVML first: exit 3 before
    anything runs), its command found, its profiler windows ready. Raises Failure (3 without NVML, 2 for bad input;
    ``output``: the report's file, checked with the rest). ``gpu_optional``: a command runs where no GPU is seen
    (:func:`run_without_gpu`)."""
    if opts.command:
        check_command(opts.spec, opts.command, output=output, log=opts.log, record=opts.record)
    else:
        check_watch(opts.spec, opts.pid, output=output, record=opts.record)
    no_gpu = None
    try:
        mon = open_monitor(opts.spec, opts.note, opts.record, active_ok=not opts.command)
    except exitcodes.Failure as exc:
        if not (gpu_optional and opts.command and exc.code == exitcodes.NO_GPU):
            raise
        mon, no_gpu = run_without_gpu(opts, exc), str(exc)
    missing = command_missing(opts.command) if opts.command else None
    if missing:
        mon.close()
        raise exitcodes.Failure(exitcodes.USAGE, missing)
    profile = None
    if opts.profile:
        from gputop.session.profiling import ProfileWindows, watchable

        why = None if opts.command else watchable(opts.pid)
        if why:
            mon.close()
            raise exitcodes.Failure(exitcodes.USAGE, f"--watch {opts.pid} --profile: {why}")
        profile = ProfileWindows(opts.profile_seconds, max_steps=opts.profile_steps,
                                 watch=None if opts.command else opts.pid)
    session = Session(mon, list(opts.command) or None, pid=None if opts.command else opts.pid, log=opts.log,
                      timeout=opts.timeout, seconds=opts.seconds, grace_s=opts.grace_s, json_mode=json_mode,
                      err=err, stdin=stdin, profile=profile)
    session.no_gpu = no_gpu
    return session


def command_missing(command: list[str] | tuple[str, ...]) -> str | None:
    """Why ``command`` cannot run (not on PATH, a folder, not executable), or None."""
    name = command[0]
    if "/" not in name:
        return f"command not found: {name or repr(name)}" if shutil.which(name) is None else None
    if os.path.isdir(name):
        return f"cannot run the command: {name} (a folder)"
    if os.path.exists(name) and not os.access(name, os.X_OK):
        return f"cannot run the command: {name} (not executable: chmod +x it, or run it with its interpreter)"
    return None


def start_failure(exc: BaseException, session: Session) -> exitcodes.Failure:
    """Why a session could not start, as a usage Failure."""
    if session.mode == "watch":
        return exitcodes.Failure(exitcodes.USAGE, f"--watch {session.pid}: {exc}")
    if isinstance(exc, OSError) and session.log and exc.filename == session.log:
        return exitcodes.Failure(exitcodes.USAGE, f"cannot write {session.log}: {exc.strerror or exc}")
    why = "command not found" if isinstance(exc, FileNotFoundError) else "cannot run the command"
    return exitcodes.Failure(exitcodes.USAGE, f"{why}: {session.command[0]} ({getattr(exc, 'strerror', None) or exc})")
