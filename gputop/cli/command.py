"""``gputop --run -- CMD ARGS...`` and ``gputop --watch PID``: a command run, or a process watched, and diagnosed;
the report when it ends (``--tui``: live in the TUI). ``--run [--profile] -- CMD`` also takes ``--export``: that
run's GPUs served while it runs. What the session needs of the command line goes down as one
:class:`gputop.session.command_options.SessionOptions` (:func:`session_options`)."""

from __future__ import annotations

from gputop.cli import export
from gputop.cli.mode import MODES_GROUP, OUTPUT_GROUP, WORKLOAD_GROUP, Mode, UsageError, option
from gputop.cli.shared import GRACE, JSON, OUTPUT, RECORD, RUN, SECONDS, TIMEOUT

WATCH = option("--watch", group=MODES_GROUP, type=int, metavar="PID", help="diagnose a running process")
LOG = option("--log", group=WORKLOAD_GROUP, writes=True, metavar="FILE",
             help="with --run -- CMD: send the command's output to FILE")
PROFILE = option("--profile", group=WORKLOAD_GROUP, action="store_true", hint=" (and --tui --run -- CMD)",
                 help="with --run -- CMD or --watch PID (Python): record short torch.profiler windows in the "
                      "processes that hold the GPUs (CUPTI windows through cupti-python without torch) and attribute "
                      "their GPU time to kernels and ops; --watch needs a process started with gputop's loader "
                      "(gputop --profile-env)")
PROFILE_ENV = option("--profile-env", group=MODES_GROUP, action="store_true",
                     help="print the shell line that gives gputop's profile loader to the Python processes a shell or "
                          "job script starts (eval \"$(gputop --profile-env)\"): any gputop of this user can then ask "
                          "them for a profiler window (--watch PID --profile, the TUI, --export's POST /profile)")
PROFILE_SECONDS = option("--profile-seconds", group=WORKLOAD_GROUP, type=float, metavar="S",
                         refused="--profile-seconds goes with --profile and must be > 0",
                         help="with --profile: each window's length (default 3)")
PROFILE_STEPS = option("--profile-steps", group=WORKLOAD_GROUP, type=int, metavar="N",
                       refused="--profile-steps goes with --profile and must be >= 0",
                       help="with --profile: a window also ends after N steps: optimizer steps, or 10 times as many "
                            "of inference's forward passes (default 10; 0: seconds only); a job's ranks: 0.5 s at "
                            "least")
TUI = option("--tui", group=OUTPUT_GROUP, action="store_true", hint=" (plain gputop opens the TUI)",
             help="with --run -- CMD or --watch PID: show it live in the TUI")


def syntax(args, command) -> None:
    """``--run``'s two forms: a workload's NAME, or nothing and the command after ``--``."""
    if command and args.run not in ("",) and args.watch is None:
        raise UsageError("a command after `--` goes with `--run` and no workload name: gputop --run -- CMD ...")
    if args.run == "" and not command:
        raise UsageError("--run needs a workload NAME (see gputop --list) or `-- CMD ...`")


def check_shown(args) -> None:
    if args.tui and (args.json or args.output):
        raise UsageError("--tui shows the run; --json and --output write its document without the TUI")


def check_command(args, command) -> None:
    if args.export is not None and (args.tui or args.record):  # beside a run shown in the TUI, or recorded: not yet
        raise UsageError(export.ALONE)
    if (args.job_map or args.export_cmdline) and args.export is None:
        raise UsageError(export.BESIDE)
    check_profile(args)
    check_shown(args)
    export.check_address(args)


def check_profile(args) -> None:
    for opt, least in ((PROFILE_SECONDS, 1e-9), (PROFILE_STEPS, 0)):
        value = getattr(args, opt.dest)
        if value is not None and not (args.profile and value >= least):
            raise UsageError(opt.refused)


def check_watch(args, command) -> None:
    check_profile(args)
    check_shown(args)


def session_options(args, command: list[str]):
    """The :class:`~gputop.session.command_options.SessionOptions` of a ``--run -- CMD`` (``command``) or ``--watch PID``
    command line."""
    from gputop.session.command_options import SessionOptions

    if command:
        return SessionOptions(spec=args.spec, command=tuple(command), record=args.record, log=args.log,
                              timeout=args.timeout, grace_s=args.grace, profile=args.profile,
                              profile_seconds=args.profile_seconds, profile_steps=args.profile_steps)
    return SessionOptions(spec=args.spec, pid=args.watch, record=args.record, seconds=args.seconds,
                          profile=args.profile, profile_seconds=args.profile_seconds, profile_steps=args.profile_steps)


def run_command(args, command) -> int:
    if args.tui:
        from gputop.tui.command import main_command_tui

        return main_command_tui(args, command)
    from gputop.headless.command import main_command

    serve = None
    if args.export is not None:  # --export beside the run: its series while it runs
        from gputop.export.server import serve_session

        serve = lambda session: serve_session(args, session)  # noqa: E731
    return main_command(session_options(args, command), json_mode=args.json, output=args.output, serve=serve)


def watch(args, command) -> int:
    if args.tui:
        from gputop.tui.command import main_command_tui

        return main_command_tui(args, [])
    from gputop.headless.command import main_watch

    return main_watch(session_options(args, []), json_mode=args.json, output=args.output)


RUN_COMMAND = Mode("run-command", family="--run", usage="--run -- CMD", flags=(RUN,),
                   options=(LOG, PROFILE, PROFILE_SECONDS, PROFILE_STEPS, TIMEOUT, GRACE, RECORD, TUI, export.EXPORT,
                            export.JOB_MAP, export.EXPORT_CMDLINE, JSON, OUTPUT),
                   given=lambda args, command: args.run == "" and bool(command), syntax=syntax, check=check_command,
                   entry=run_command, usage_lines="""\
  gputop --run -- CMD ARGS...     run your own command and diagnose its GPU bottlenecks
  gputop --run --profile -- CMD   the same, and which kernels/ops (torch.profiler windows in a Python command)
  gputop --tui --run -- CMD ...   the same, live in the TUI (also --tui --watch PID)
""")
WATCH_PID = Mode("watch", family="--watch", usage="--watch PID", flags=(WATCH,),
                 options=(PROFILE, PROFILE_SECONDS, PROFILE_STEPS, SECONDS, RECORD, TUI, JSON, OUTPUT),
                 check=check_watch, entry=watch, usage_lines="""\
  gputop --watch PID              diagnose a process that is already running
  gputop --watch PID --profile    the same, and its kernels/ops (a process started with gputop's loader)
""")


def profile_env(args, command) -> int:
    from gputop.session.profiling import profile_env_line

    print(profile_env_line())
    return 0


PROFILE_ENV_MODE = Mode("profile-env", family="--profile-env", usage="--profile-env", flags=(PROFILE_ENV,),
                        entry=profile_env, usage_lines="""\
  gputop --profile-env            the shell line that prepares a job's Python processes for --profile
""")
