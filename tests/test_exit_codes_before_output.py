"""Every refused command line gets the README's exit code before gputop prints anything (issue 24 item 5): a
port in use for --serve, a --recorded file that is not a recorded run, mode combinations that mean nothing.
Real ``python -m gputop`` processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.cli import MODES, mode_of, parse
from gputop.cli.mode import goes_with
from gputop.cli.shared import COMMON

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def gputop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([PY, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def assert_usage_error(r: subprocess.CompletedProcess, needle: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_serve_on_a_port_in_use_is_exit_2_before_its_banner():
    pytest.importorskip("textual_serve")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = gputop("--serve", f"127.0.0.1:{port}", "--demo")
    assert_usage_error(r, f"cannot listen on 127.0.0.1:{port}")
    assert "serving" not in r.stderr


# the quick loop: a missing file and a trace that is not a run, in every mode; the full suite: every content
@pytest.mark.parametrize("content", [None] + [pytest.param(c, marks=pytest.mark.slow) for c in (
                             "", "garbage\n", b"\x1f\x8b\x08garbage", b"\x00\xff" * 40)]
                         + ['{"type": "header", "format": "gputop-trace", "version": 1}\n'],
                         ids=["missing", "empty", "text", "bad-gzip", "binary", "a-trace-not-a-run"])
@pytest.mark.parametrize("mode", [["--demo"], ["--demo", "--tour"], ["--serve", "127.0.0.1:1", "--demo"]],
                         ids=["demo", "tour", "serve"])
def test_a_recorded_file_that_is_not_a_recorded_run_is_exit_2(tmp_path, content, mode):
    path = tmp_path / "x.jsonl.gz"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    r = gputop(*mode, "--recorded", str(path))
    assert_usage_error(r, f"--recorded {path}")


def test_a_recorded_folder_is_exit_2(tmp_path):
    assert_usage_error(gputop("--demo", "--recorded", str(tmp_path)), "not a file")


@pytest.mark.parametrize("argv, needle", [
    (["--once", "--list"], "two modes"),
    (["--list", "--run", "roofline"], "two modes"),
    (["--once", "--record", "x.jsonl"], "two modes"),
    (["--once", "--run", "roofline"], "two modes"),
    (["--once", "--watch", "1"], "two modes"),
    (["--run", "roofline", "--watch", "1"], "two modes"),
    (["--record", "x.jsonl", "--demo"], "does not take --replay or --demo"),
    (["--json"], "--json goes with"),
    (["--demo", "--json"], "--json goes with"),
    (["--export", "--json"], "--json goes with"),
    (["--record", "x.jsonl", "--json"], "--json goes with"),
    (["--once", "-o", "x.json", "--list"], "two modes"),
    (["--list", "-o", "x.json"], "--output goes with"),
    (["--once", "--seconds", "3"], "--seconds goes with"),
    (["--once", "--csv", "x.csv"], "--csv goes with"),
    (["--demo", "--param", "n=1"], "--param goes with"),
    (["--run", "--", "true", "--also"], None),  # after --: the command's own words (not refused)
    (["--watch", "1", "--log", "x.log"], "--log goes with"),
    (["--once", "--recorded", "x.jsonl.gz"], "--recorded goes with"),
    (["--once", "--quick"], "--quick goes with"),
    (["--list", "--timeout", "3"], "--timeout goes with"),
    (["--tui", "--run", "--json", "--", "true"], "--tui shows the run"),
])
def test_mode_combinations_that_mean_nothing_are_usage_errors(argv, needle, capsys):
    if needle is None:
        parse(argv)
        return
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


EXAMPLE = {"once": ["--once"], "list": ["--list"], "record": ["--record", "x.jsonl"], "run-command": ["--run"],
           "run": ["--run", "roofline"], "watch": ["--watch", "1"], "export": ["--export"], "serve": ["--serve"],
           "replay": ["--replay", "t.jsonl", "--json"], "doctor": ["--doctor"], "tui": [],
           "profile-env": ["--profile-env"]}  # a command line of each mode
SHIPPED = sorted((ROOT / "gputop" / "data" / "runs").glob("*.jsonl.gz"))
VALUE = {"json": [], "output": ["x.json"], "seconds": ["3"], "csv": ["x.csv"], "param": ["n=1"], "log": ["x.log"],
         "recorded": [str(SHIPPED[0])], "quick": [], "timeout": ["3"], "grace": ["1"], "record": ["x.jsonl"],
         "record_run": ["r.jsonl"], "profile": [], "profile_seconds": ["2", "--profile"],
         "profile_steps": ["3", "--profile"], "tui": [], "export": [], "job_map": [str(ROOT), "--export"],
         "export_cmdline": ["--export"], "tour": [], "serve_control": [], "served": [], "passive": [],
         "source": ["dcgm-exporter=http://127.0.0.1:9400/metrics"]}  # each option's words after its flag


def argv_of(mode, opt, alone: bool = False) -> list[str]:
    """``mode``'s example with ``opt`` (and the options it needs beside it, unless ``alone``)."""
    words = VALUE[opt.dest][:1] if opt.kwargs.get("action") != "store_true" else []
    argv = EXAMPLE[mode.name] + [opt.flags[0], *(words if alone else VALUE[opt.dest])]
    if opt.dest == "serve_control" and mode.name == "tui":
        argv.append("--served")  # the TUI a browser session runs under --serve
    if opt.dest == "source" and mode.name == "doctor":
        argv[-1] = "prometheus=http://127.0.0.1:9090"  # the fleet's medians: the one source --doctor takes
    return argv + (["--", "true"] if mode.name == "run-command" else [])


def test_every_option_a_mode_takes_is_accepted_in_it():
    """Where an option goes is read off the modes that take it (cli.MODES): in each of them, it parses."""
    for mode in MODES:
        for opt in mode.options:
            if mode.name == "replay" and opt.dest == "source":
                continue  # taken to say that --replay and --source are two sources
            args, _ = parse(argv_of(mode, opt))
            assert mode_of(args, args.command) == mode.name, (mode.name, opt.flags)


def test_every_option_a_mode_does_not_take_is_refused_there(capsys):
    """... and in every other mode it is one line naming where it goes, exit 2."""
    others = [o for m in MODES for o in m.options if o not in COMMON and o.dest != "served"]
    for mode in MODES:
        for opt in others:
            if mode.takes(opt) or opt.dest in ("record", "export"):  # beside --run/--watch: those modes' own flags
                continue
            with pytest.raises(SystemExit) as exc:
                parse(argv_of(mode, opt, alone=True))
            err = capsys.readouterr().err
            assert exc.value.code == 2 and err.count("\n") == 1, (mode.name, opt.flags, err)
            assert opt.flags[0] in err or "two modes" in err or "mode of its own" in err, (mode.name, err)


def test_where_an_option_goes_is_said_in_the_words_it_always_had():
    words = {o.dest: goes_with(o, MODES) for m in MODES for o in m.options}
    assert words["json"] == "--once, --list, --run, --watch, --replay or --doctor"
    assert words["output"] == "--once, --run, --watch or --doctor" and words["passive"] == "--doctor"
    assert words["seconds"] == "--record FILE or --watch PID" and words["csv"] == words["param"] == "--run NAME"
    assert words["log"] == "--run -- CMD" and words["recorded"] == "the TUI" and words["quick"] == "--run, the TUI or --doctor"
    assert words["timeout"] == words["grace"] == "--run or the TUI" and words["tui"] == "--run -- CMD or --watch PID"


def test_a_run_recording_with_replay_and_recorded_flags_is_fine():
    assert SHIPPED
    args, _ = parse(["--demo", "--recorded", str(SHIPPED[0])])
    assert args.recorded == [str(SHIPPED[0])]
