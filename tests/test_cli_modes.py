"""The command line made of modes (gputop/cli/): a mode added as its package docstring says (one module's worth of
declarations, one line in the registry) is parsed, refused beside another mode, named where its options go and
listed in --help; each mode's entry gets typed values, and the rate has one default."""

from __future__ import annotations

import pytest

from gputop import cli
from gputop.cli import parser
from gputop.cli.mode import MODES_GROUP, Mode, goes_with, option
from gputop.cli.shared import JSON
from gputop.telemetry.sampler import DEFAULT_RATE_HZ

CHECK = option("--check", group=MODES_GROUP, action="store_true", help="check this machine for gputop")
RAN = []
CHECK_MODE = Mode("check", family="--check", usage="--check", flags=(CHECK,), options=(JSON,),
                  entry=lambda args, command: RAN.append(args.json) or 0,
                  usage_lines="  gputop --check [--json]         what this machine lacks for gputop\n")
WITH_CHECK = cli.MODES[:-1] + (CHECK_MODE,) + cli.MODES[-1:]  # the one registry line


def parse(argv: list[str]):
    return parser.parse(argv, WITH_CHECK)


def refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    return err


def test_a_mode_added_as_the_docstring_says_is_parsed_and_run():
    args, command = parse(["--check", "--json"])
    mode = parser.pick(args, command, WITH_CHECK)
    assert mode is CHECK_MODE and mode.entry(args, command) == 0 and RAN[-1] is True
    args, command = parse(["--check", "--demo"])  # the options every mode takes
    assert parser.pick(args, command, WITH_CHECK) is CHECK_MODE and args.spec.kind == "demo"
    args, command = parse(["--once", "--json"])  # the others as they were
    assert parser.pick(args, command, WITH_CHECK).name == "once"


def test_an_added_mode_is_refused_beside_another_and_its_options_elsewhere(capsys):
    assert "--once and --check are two modes; give one" in refused(["--once", "--check"], capsys)
    assert "--run and --check are two modes" in refused(["--check", "--run", "roofline"], capsys)
    assert "--csv goes with --run NAME" in refused(["--check", "--csv", "x.csv"], capsys)
    assert "--json goes with --once, --list, --run, --watch, --replay, --doctor or --check" in refused(["--demo", "--json"], capsys)
    assert goes_with(JSON, cli.MODES) == "--once, --list, --run, --watch, --replay or --doctor"  # the registry untouched


def test_an_added_mode_is_in_the_help():
    text = parser.build_parser(WITH_CHECK).format_help()
    assert "--check" in text.split("modes:")[1] and "gputop --check [--json]         what this machine" in text


def test_every_mode_has_its_help_line_and_the_default_comes_first():
    text = cli.build_parser().format_help()
    listed = text.split("\nmodes:\n")[-1]
    assert listed.startswith("  gputop                          the live monitor")
    for mode in cli.MODES:
        assert mode.usage_lines and mode.usage_lines in listed, mode.name


def test_the_rate_has_one_default_and_reaches_every_mode_that_samples():
    assert cli.parse([])[0].rate is None  # the command line keeps none of its own: SourceSpec's is the one
    for argv in ([], ["--once"], ["--run", "roofline"], ["--watch", "1"], ["--record", "x.jsonl"], ["--export"],
                 ["--serve"], ["--run", "--", "true"]):
        assert cli.parse(argv)[0].spec.rate_hz == DEFAULT_RATE_HZ, argv
        assert cli.parse(["--rate", "4"] + argv)[0].spec.rate_hz == 4.0, argv


def test_the_modes_hand_typed_values_down():
    from gputop.cli.command import session_options
    from gputop.session.command_options import SessionOptions

    args, command = cli.parse(["--rate", "4", "--record", "t.jsonl", "--timeout", "3", "--grace", "1", "--log", "x.log",
                               "--run", "--profile", "--profile-steps", "0", "--", "python", "t.py"])
    opts = session_options(args, command)
    assert opts == SessionOptions(spec=args.spec, command=("python", "t.py"), record="t.jsonl", log="x.log",
                                  timeout=3.0, grace_s=1.0, profile=True, profile_steps=0)
    assert opts.spec.rate_hz == 4.0 and opts.note == "gputop --run -- python t.py"
    args, command = cli.parse(["--watch", "123", "--seconds", "2"])
    opts = session_options(args, command)
    assert (opts.pid, opts.seconds, opts.command, opts.note) == (123, 2.0, (), "gputop --watch 123")
