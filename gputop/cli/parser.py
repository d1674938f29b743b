"""One argparse parser built from the modes' options, and the steps a command line goes through before its mode
runs: the words after ``--`` set apart, each mode's syntax, the mode picked (the first in the registry the command
line asks for; another mode's flag beside it is refused), every option it does not take refused (in words read off
the modes that take it), its own checks, the source's, each option's value; then ``args.spec``.

Every refusal is one line on stderr and exit 2; with ``--json``, the mode's error document on stdout too.
"""

from __future__ import annotations

import argparse

import gputop
from gputop import exitcodes
from gputop.cli.mode import GROUPS, Mode, Option, UsageError, refusal
from gputop.cli.shared import COMMON, check_source, source_spec

EXIT_CODES = """\
exit codes: 0 ok; 1 failed (partial results written); 2 bad usage or input; 3 no GPU / no NVML;
4 missing dependency; 5 workload crashed; 6 timeout; --doctor: 7 a GPU degraded, 8 a GPU failed;
128+N stopped by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP; a partial document is still written).
--run -- CMD: the command's code.
"""


class _Parser(argparse.ArgumentParser):
    json_document: tuple | None = None  # (mode, workload, command) of a --json command line: its error document

    def error(self, message: str):  # one line, exit 2; with --json, the mode's error document on stdout too
        text = f"{message} (see gputop --help)"
        if self.json_document is not None:
            from gputop.documents import emit, usage_error_document

            mode, workload, command = self.json_document
            doc = usage_error_document(mode, text, workload=workload, command=command)
            if doc is not None:
                emit(doc, json_mode=True)
        self.exit(exitcodes.USAGE, f"gputop: {text}\n")


def json_document_of(argv: list[str], command: list[str]) -> tuple | None:
    """(mode, workload, command) of a command line that asks for ``--json``, read from its words before they are
    parsed (so that a refused one still gets its mode's error document); None without ``--json``."""
    if "--json" not in argv:
        return None
    for i, word in enumerate(argv):
        if word == "--once":
            return "once", None, None
        if word == "--watch":
            return "watch", None, None
        if word == "--doctor":
            return "doctor", None, None
        if word == "--run" or word.startswith("--run="):
            name = word.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-")
                                              else "")
            return ("run", name, None) if name or not command else ("run-command", None, command)
    return None


def all_options(modes: tuple[Mode, ...]) -> list[Option]:
    """Every option once: those every mode takes, then each mode's flags and options, in the registry's order."""
    seen: dict[int, Option] = {}
    for opt in COMMON + tuple(o for m in modes for o in m.flags + m.options):
        seen.setdefault(id(opt), opt)
    return list(seen.values())


def build_parser(modes: tuple[Mode, ...]) -> argparse.ArgumentParser:
    default = [m for m in modes if not m.flags]  # the TUI first: plain gputop
    lines = "".join(m.usage_lines for m in default + [m for m in modes if m.flags])
    ap = _Parser(prog="gputop", description=gputop.__doc__, epilog=f"modes:\n{lines}\n{EXIT_CODES}",
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"gputop {gputop.__version__}")
    options = all_options(modes)
    for title in GROUPS:
        group = ap.add_argument_group(title)
        for opt in options:
            if opt.group == title:
                opt.add_to(group)
    return ap


def pick(args: argparse.Namespace, command: list[str], modes: tuple[Mode, ...]) -> Mode:
    """The mode the command line asks for: the first in ``modes`` (the last asks for nothing: the default)."""
    return next(m for m in modes if m.asked(args, command))


def parse(argv: list[str], modes: tuple[Mode, ...]) -> tuple[argparse.Namespace, list[str]]:
    """gputop's own flags go before ``--``; everything after it is the user's command."""
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = build_parser(modes)
    ap.json_document = json_document_of(argv, command)
    args = ap.parse_args(argv)
    args.command = command
    try:
        url = _check(args, command, modes)
    except UsageError as exc:
        ap.error(str(exc))
    args.spec = source_spec(args, url)
    return args, command


def _check(args: argparse.Namespace, command: list[str], modes: tuple[Mode, ...]) -> str | None:
    """Every check of the command line, in order (raises UsageError); ``--source``'s URL, checked."""
    for m in modes:
        if m.syntax is not None:
            m.syntax(args, command)
    mode = pick(args, command, modes)
    options = all_options(modes)
    flags = {id(m.flags[0]) for m in modes if m.flags}
    for opt in sorted(options, key=lambda o: id(o) not in flags):  # another mode's flag first: "two modes"
        if opt not in COMMON and not mode.takes(opt) and opt.given(args):
            raise UsageError(refusal(opt, mode, modes))
    if mode.check is not None:
        mode.check(args, command)
    url = check_source(args)
    for opt in options:
        if opt.check is not None and opt.given(args):
            why = opt.check(getattr(args, opt.dest))
            if why:
                raise UsageError(why)
    return url
