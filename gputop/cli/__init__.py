"""The ``gputop`` command line: one module per mode, each declaring its flags, the options it takes, its checks and
its entry (a :class:`~gputop.cli.mode.Mode`); :data:`MODES` lists them; :mod:`.parser` builds the one argparse
parser from them and checks a command line; :func:`main` runs the mode it asks for.

The modes: :mod:`.once` (``--once``), :mod:`.listing` (``--list``), :mod:`.record` (``--record FILE``),
:mod:`.command` (``--run -- CMD``, ``--watch PID``), :mod:`.workload` (``--run NAME``), :mod:`.export`
(``--export``), :mod:`.serve` (``--serve``), :mod:`.replay` (``--replay FILE --json``), :mod:`.doctor`
(``--doctor``) and :mod:`.tui` (the TUI: no mode flag). The options more than one mode takes (the source's, the
output's, ``--run``, ``--record``, the run limits) are declared once in :mod:`.shared`. Where an option may be given is read off the modes that take it: an
option given to a mode that does not take it is refused in words naming those modes (``--csv goes with --run
NAME``). Exit codes are in :mod:`gputop.exitcodes` (and README.md). Bad input is one line on stderr.

Adding a mode, ``gputop --check [--json]`` say, is one module and one line here::

    # gputop/cli/check.py
    \"\"\"``gputop --check [--json]``: what this machine lacks for gputop, and how to get it.\"\"\"
    from gputop.cli.mode import MODES_GROUP, Mode, option
    from gputop.cli.shared import JSON

    CHECK = option("--check", group=MODES_GROUP, action="store_true", help="check this machine for gputop")

    def entry(args, command) -> int:
        from gputop.headless.check import main_check  # the frontend that does the work, typed values down

        return main_check(json_mode=args.json)

    MODE = Mode("check", family="--check", usage="--check", flags=(CHECK,), options=(JSON,), entry=entry,
                usage_lines="  gputop --check [--json]         what this machine lacks for gputop\\n")

and ``check.MODE`` in :data:`MODES`, before ``tui.MODE`` (the default, asked for by every command line). Its flag
shows in --help and its line in the help's list of modes; beside another mode's flag it is "two modes"; ``--json``
now goes with it too, and every message that says where ``--json`` goes says so (tests/test_cli_modes.py adds it
this way). :mod:`.doctor` was added so.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from gputop import exitcodes
from gputop.cli import command, doctor, export, listing, once, record, replay, serve, tui, workload
from gputop.cli import parser as _parser
from gputop.cli.mode import Mode
from gputop.option_values import AddressError, opens_live_monitor, parse_address, parse_duration  # noqa: F401

# The modes, in the order a command line is matched against them (the first it asks for runs; the TUI, last,
# asks for nothing) and in which messages name them.
MODES: tuple[Mode, ...] = (once.MODE, listing.MODE, record.MODE, command.RUN_COMMAND, workload.MODE,
                           command.WATCH_PID, command.PROFILE_ENV_MODE, export.MODE, serve.MODE, replay.MODE,
                           doctor.MODE, tui.MODE)


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
    from gputop.documents import standard_streams

    standard_streams()  # a shell's closed stdout (gputop >&-) read as closed, its number held
    argv = sys.argv[1:] if argv is None else list(argv)
    if opens_live_monitor(argv):
        from gputop.telemetry import nvml_early  # NVML's init and the static facts, while the rest starts up

        nvml_early.start()
    args, words = parse(argv)
    try:
        return _run(args, words)
    except Exception:  # a bug in gputop: one line, the traceback in a log file, 70; with --json, the document too
        return internal_error(argv, traceback.format_exc())


def _run(args, words) -> int:
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


def internal_error(argv: list[str], text: str) -> int:
    """A mode that died of an exception gputop did not handle (gputop/crashlog.py): logged, one line, exit 70; a
    ``--json`` command line still gets its mode's one document, saying so."""
    from gputop import crashlog
    from gputop.cli.parser import json_document_of
    from gputop.documents import emit, error

    said = crashlog.line(text, "gputop")
    exitcodes.say(said)
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    make = json_document_of(own, command)
    doc = make(said) if make is not None else None
    if doc is not None:
        doc["exit_code"] = exitcodes.INTERNAL_ERROR
        doc["errors"] = [error("internal_error", said)]
        try:
            emit(doc, json_mode=True)
        except (OSError, ValueError):
            pass
    return exitcodes.INTERNAL_ERROR
