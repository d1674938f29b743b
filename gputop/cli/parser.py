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
    json_document = None  # a --json command line's error document, made from the one-line message (or None)

    def error(self, message: str):  # one line, exit 2; with --json, the mode's error document on stdout too
        text = f"{message} (see gputop --help)"
        if self.json_document is not None:
            from gputop.documents import emit

            doc = self.json_document(text)
            if doc is not None:
                emit(doc, json_mode=True)
        self.exit(exitcodes.USAGE, f"gputop: {text}\n")


def _value(argv: list[str], flag: str) -> str | None:
    """The value given to ``flag`` in ``argv`` (``--flag V`` or ``--flag=V``; the last one), read before parsing."""
    found = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(flag + "="):
            found = word.partition("=")[2]
    return found


def json_document_of(argv: list[str], command: list[str]):
    """The error document of a command line that asks for ``--json``, as a function of the refusal's line, read
    from its words before they are parsed (so that a command line argparse itself refuses still gets its mode's
    document: stdout holds exactly one in every outcome); None without ``--json``. The mode is the first the
    words ask for, in the registry's order (once, list, --run NAME / -- CMD, watch, replay)."""
    if "--json" not in argv:
        return None
    from gputop import documents

    words = set(argv) | {w.partition("=")[0] for w in argv}
    if "--once" in words:
        source = _value(argv, "--source") or ""
        if source.startswith("prometheus="):
            from gputop.headless.cluster import usage_error_document

            return lambda text: usage_error_document(source.partition("=")[2], text)
        return lambda text: documents.usage_error_document("once", text)
    if "--list" in words:
        return lambda text: documents.usage_error_document("list", text)
    if "--run" in words:
        name = ""
        for i, word in enumerate(argv):
            if word.startswith("--run="):
                name = word.partition("=")[2]
            elif word == "--run" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                name = argv[i + 1]
        if name or not command:
            return lambda text: documents.usage_error_document("run", text, workload=name)
        return lambda text: documents.usage_error_document("run-command", text, command=command)
    if "--watch" in words:
        return lambda text: documents.usage_error_document("watch", text)
    if "--doctor" in words:
        return lambda text: documents.usage_error_document("doctor", text)
    if "--replay" in words:
        return lambda text: documents.usage_error_document("replay", text, path=_value(argv, "--replay"))
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
    for opt in all_options(modes):  # an empty file name ("--replay ''": an unset variable) asks for no mode at all
        if (opt.reads or opt.writes) and getattr(args, opt.dest, None) == "":
            raise UsageError(f"{opt.flags[0]} needs a file name (got an empty one)")
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
    check_files(args, options)
    return url


def check_files(args: argparse.Namespace, options: list[Option]) -> None:
    """The output rule over every file the command line names (the options that write or read one): each output
    writable, no two naming one file, none naming an input or (with --json) stdout; raises UsageError."""
    from gputop.documents import check_outputs
    from gputop.exitcodes import Failure

    def files(which: str) -> list[tuple[str, str]]:
        out = []
        for opt in options:
            value = getattr(args, opt.dest)
            if getattr(opt, which) and opt.given(args) and value is not None:
                out += [(opt.flags[0], v) for v in (value if isinstance(value, list) else [value]) if v != "-"]
        return out

    try:
        check_outputs(files("writes"), files("reads"), json_stdout=bool(getattr(args, "json", False)))
    except Failure as exc:
        raise UsageError(str(exc)) from None
