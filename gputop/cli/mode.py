"""What the command line is made of: an :class:`Option` (one flag, as argparse takes it, and what is said where it
is refused) and a :class:`Mode` (what a command line asks gputop to do: the flags that ask for it, the options it
takes, its own checks and its entry). Where an option may be given is read off the modes that take it
(:func:`goes_with`); no table says it apart from them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable

# the help's groups, in the order --help shows them
SOURCE_GROUP, MODES_GROUP, WORKLOAD_GROUP, OUTPUT_GROUP = "data source", "modes", "workload options", "output"
GROUPS = (SOURCE_GROUP, MODES_GROUP, WORKLOAD_GROUP, OUTPUT_GROUP)


class UsageError(Exception):
    """A command line that means nothing: its one line (the parser adds "see gputop --help" and exits 2)."""


@dataclass(frozen=True, eq=False)
class Option:
    """One flag: its names, argparse's arguments, the help group it shows in, and what is said where it is given to
    a mode that does not take it (``goes with <the modes that take it><hint>``, or ``refused`` said whole).
    ``check(value)``: why a given value is bad, or None. ``writes``: its value is a file gputop writes (``-o``,
    ``--csv``, ``--record``, ...); ``reads``: a file it reads (``--replay``, ``--recorded``): the output rule
    (:func:`gputop.documents.check_outputs`) is checked over them all before anything runs."""

    flags: tuple[str, ...]
    kwargs: dict = field(default_factory=dict)
    group: str = OUTPUT_GROUP
    hint: str = ""
    refused: str | None = None
    check: Callable[[Any], str | None] | None = None
    writes: bool = False
    reads: bool = False

    @property
    def dest(self) -> str:
        return self.kwargs.get("dest") or self.flags[0].lstrip("-").replace("-", "_")

    @property
    def default(self):
        return self.kwargs.get("default", False if self.kwargs.get("action") == "store_true" else None)

    def given(self, args: argparse.Namespace) -> bool:
        """The command line gave it (its value is not argparse's default)."""
        return getattr(args, self.dest) != self.default

    def add_to(self, group) -> None:
        group.add_argument(*self.flags, **self.kwargs)


def option(*flags: str, group: str, hint: str = "", refused: str | None = None,
           check: Callable[[Any], str | None] | None = None, writes: bool = False, reads: bool = False,
           **kwargs) -> Option:
    """An :class:`Option`: ``option("--seconds", group=..., type=float, metavar="N", help=...)``."""
    return Option(flags, kwargs, group, hint, refused, check, writes, reads)


def always(args: argparse.Namespace, command: list[str]) -> bool:
    return True


@dataclass(frozen=True, eq=False)
class Mode:
    """What a command line asks for. ``flags``: the options that ask for it (the first is its own flag; none: the
    mode a command line without one gets); ``options``: what else it takes, beside the options every mode takes.
    ``family``: how a message names it among other modes (its flag: ``--run``, for ``--run NAME`` and
    ``--run -- CMD`` alike); ``usage``: how a message names it alone (``--run NAME``). ``given(args, command)``: this
    command line asks for it (default: its own flag was given); ``syntax(args, command)``: checks of its flags' form
    made before any mode is picked; ``check(args, command)``: its own checks once it is picked; both raise
    :class:`UsageError`. ``alone``: what is said when another mode's flag comes with its own (default: "A and B are
    two modes"); ``refuses``: {option's dest: what it says of that option instead of where the option goes}.
    ``entry(args, command)``: runs it, returns gputop's exit code (it imports what it runs: start-up stays light).
    ``usage_lines``: its lines in the help's list of modes."""

    name: str
    family: str
    usage: str
    entry: Callable[[argparse.Namespace, list[str]], int]
    flags: tuple[Option, ...] = ()
    options: tuple[Option, ...] = ()
    given: Callable[[argparse.Namespace, list[str]], bool] | None = None
    syntax: Callable[[argparse.Namespace, list[str]], None] | None = None
    check: Callable[[argparse.Namespace, list[str]], None] | None = None
    alone: str | None = None
    refuses: dict[str, str] = field(default_factory=dict)
    usage_lines: str = ""

    def asked(self, args: argparse.Namespace, command: list[str]) -> bool:
        if self.given is not None:
            return self.given(args, command)
        return bool(self.flags) and self.flags[0].given(args)

    def takes(self, opt: Option) -> bool:
        return opt in self.flags or opt in self.options


def goes_with(opt: Option, modes: tuple[Mode, ...]) -> str:
    """Where ``opt`` may be given, in words, read off the modes that take it (not those it asks for): grouped by
    family; a family with one such mode says its usage when there are at most two families (``--record FILE or
    --watch PID``), its name otherwise (``--once, --run or --watch``; ``--run or the TUI``)."""
    families: dict[str, list[Mode]] = {}
    for m in modes:
        if opt in m.options or opt in m.flags[1:]:  # (--json is one of --replay FILE --json's flags)
            families.setdefault(m.family, []).append(m)
    if len(families) <= 2:
        words = [ms[0].usage if len(ms) == 1 else name for name, ms in families.items()]
    else:
        words = list(families)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def refusal(opt: Option, mode: Mode, modes: tuple[Mode, ...]) -> str:
    """What is said when ``opt`` is given to ``mode``, which does not take it."""
    if opt.dest in mode.refuses:
        return mode.refuses[opt.dest]
    other = next((m for m in modes if m.flags and m.flags[0] is opt), None)
    if other is not None:  # another mode's own flag
        return other.alone or f"{mode.flags[0].flags[0]} and {opt.flags[0]} are two modes; give one"
    if opt.refused is not None:
        return opt.refused
    return f"{opt.flags[0]} goes with {goes_with(opt, modes)}{opt.hint}"
