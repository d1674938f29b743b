"""The ``gputop`` command line: one module per mode, each declaring its flags, the options it takes, its checks and
its entry (a :class:`~gputop.cli.mode.Mode`); :data:`MODES` lists them; :mod:`.parser` builds the one argparse
parser from them and checks a command line; :func:`main` runs the mode it asks for.

The modes: :mod:`.once` (``--once``), :mod:`.listing` (``--list``), :mod:`.record` (``--record FILE``),
:mod:`.command` (``--run -- CMD``, ``--watch PID``), :mod:`.workload` (``--run NAME``), :mod:`.export`
(``--export``), :mod:`.serve` (``--serve``), :mod:`.replay` (``--replay FILE --json``) and :mod:`.tui` (the TUI:
no mode flag). The options more than one mode takes (the source's, the output's, ``--run``, ``--record``, the run
limits) are declared once in :mod:`.shared`. Where an option may be given is read off the modes that take it: an
option given to a mode that does not take it is refused in words naming those modes (``--csv goes with --run
NAME``). Exit codes are in :mod:`gputop.exitcodes` (and README.md). Bad input is one line on stderr.

Adding a mode, ``gputop --doctor [--json]`` say, is one module and one line here::

    # gputop/cli/doctor.py
    \"\"\"``gputop --doctor [--json]``: what this machine lacks for gputop, and how to get it.\"\"\"
    from gputop.cli.mode import MODES_GROUP, Mode, option
    from gputop.cli.shared import JSON

    DOCTOR = option("--doctor", group=MODES_GROUP, action="store_true", help="check this machine for gputop")

    def entry(args, command) -> int:
        from gputop.headless.doctor import main_doctor  # the frontend that does the work, typed values down

        return main_doctor(json_mode=args.json)

    MODE = Mode("doctor", family="--doctor", usage="--doctor", flags=(DOCTOR,), options=(JSON,), entry=entry,
                usage_lines="  gputop --doctor [--json]        what this machine lacks for gputop\\n")

and ``doctor.MODE`` in :data:`MODES`, before ``tui.MODE`` (the default, asked for by every command line). Its flag
shows in --help and its line in the help's list of modes; beside another mode's flag it is "two modes"; ``--json``
now goes with it too, and every message that says where ``--json`` goes says so (tests/test_cli_modes.py adds it
this way).
"""

from __future__ import annotations

import argparse
import sys

from gputop import exitcodes
from gputop.cli import command, export, listing, once, record, replay, serve, tui, workload
from gputop.cli import parser as _parser
from gputop.cli.mode import Mode
from gputop.option_values import AddressError, opens_live_monitor, parse_address, parse_duration  # noqa: F401

# The modes, in the order a command line is matched against them (the first it asks for runs; the TUI, last,
# asks for nothing) and in which messages name them.
MODES: tuple[Mode, ...] = (once.MODE, listing.MODE, record.MODE, command.RUN_COMMAND, workload.MODE,
                           command.WATCH_PID, command.PROFILE_ENV_MODE, export.MODE, serve.MODE, replay.MODE, tui.MODE)


def build_parser() -> argparse.ArgumentParser:
    return _parser.build_parser(MODES)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``(args, command)``: the checked flags (``args.spec``: the source) and the words after ``--``; a command
    line that means nothing exits 2 here (SystemExit), with one line on stderr."""
    return _parser.parse(list(argv), MODES)


def mode_for(args: argparse.Namespace, command: list[str]) -> Mode:
    """The mode a parsed command line runs."""
    return _parser.pick(args, command, MODES)


def mode_of(args: argparse.Namespace, command: list[str]) -> str:
    """The name of the mode a parsed command line runs: once, list, record, run-command, run, watch, export, serve,
    replay (``--replay FILE --json``) or tui."""
    return mode_for(args, command).name


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if opens_live_monitor(argv):
        from gputop.telemetry import nvml_early  # NVML's init and the static facts, while the rest starts up

        nvml_early.start()
    args, words = parse(argv)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="gputop: %(message)s")
    try:
        return mode_for(args, words).entry(args, words)
    except KeyboardInterrupt:  # a Ctrl-C outside a run (the runs handle their own signals)
        exitcodes.say("interrupted")
        return exitcodes.INTERRUPTED
    except BrokenPipeError:  # stdout closed under us (gputop --once | head)
        from gputop.documents import silence_stdout

        exitcodes.say("cannot write to stdout (closed); output lost")
        silence_stdout()
        return exitcodes.FAILED
