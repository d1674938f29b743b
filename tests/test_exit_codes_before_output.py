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

from gputop.cli import GOES_WITH, parse

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


@pytest.mark.parametrize("content", [None, "", "garbage\n", b"\x1f\x8b\x08garbage", b"\x00\xff" * 40,
                                     '{"type": "header", "format": "gputop-trace", "version": 1}\n'],
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


def test_every_option_limited_to_some_modes_is_accepted_in_them():
    """The table cli.GOES_WITH refuses an option outside its modes; in each of them, it parses."""
    example = {"once": ["--once"], "run": ["--run", "roofline"], "run-command": ["--run"], "watch": ["--watch", "1"],
               "list": ["--list"], "record": ["--record", "x.jsonl"], "tui": [], "replay": ["--replay", "t.jsonl"]}
    value = {"json": [], "output": ["x.json"], "seconds": ["3"], "csv": ["x.csv"], "param": ["n=1"], "log": ["x.log"],
             "recorded": [], "quick": [], "timeout": ["3"], "grace": ["1"]}
    for flag, attr, modes, _ in GOES_WITH:
        for mode in modes:
            if attr == "recorded":
                continue  # needs a real recording: tests/test_recorded_runs.py
            argv = example[mode] + [flag, *value[attr]]
            if mode == "replay" and attr != "json":
                continue
            if mode == "replay":
                argv = example[mode] + ["--json"]
            command = ["--", "true"] if mode == "run-command" else []
            parse(argv + command)


def test_a_run_recording_with_replay_and_recorded_flags_is_fine():
    shipped = sorted((ROOT / "gputop" / "data" / "runs").glob("*.jsonl.gz"))
    assert shipped
    args, _ = parse(["--demo", "--recorded", str(shipped[0])])
    assert args.recorded == [str(shipped[0])]
