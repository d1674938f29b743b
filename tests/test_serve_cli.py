"""``gputop --serve``'s command line: what it passes on to each browser session's gputop, and bad input
(one line, exit 2). The browser itself: tests/test_serve_browser.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gputop.cli import parse
from gputop.tui.serve import PYTHON_GPUTOP, child_command, public_url

ROOT = Path(__file__).resolve().parents[1]


def gputop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_child_command_passes_the_source_on():
    args, _ = parse(["--serve", "0.0.0.0:9000", "--replay", "t.jsonl.gz", "--speed", "2", "--gpu", "1", "--tour"])
    cmd = child_command(args)
    n = len(PYTHON_GPUTOP) + 1
    assert cmd[:n] == [*PYTHON_GPUTOP, "--served"] and "--serve-control" not in cmd
    assert cmd[0] == sys.executable and ("-P" in cmd or sys.version_info < (3, 11))  # not the working directory's
    assert cmd[n:] == ["--replay", "t.jsonl.gz", "--speed", "2.0", "--tour", "--gpu", "1"]
    args, _ = parse(["--serve", "--demo", "--timeout", "30", "--grace", "20"])  # a browser's runs: stopped alike
    assert child_command(args)[n:] == ["--demo", "--timeout", "30.0", "--grace", "20.0"]
    args, _ = parse(["--serve", "--demo", "--serve-control"])
    assert args.serve == "127.0.0.1:8000" and child_command(args)[n:] == ["--serve-control", "--demo"]
    assert public_url("127.0.0.1", 8000) == "http://127.0.0.1:8000" and public_url("::1", 80) == "http://[::1]:80"


def test_bad_serve_input_is_one_line_and_exit_2():
    for argv, words in ((["--serve", "99999", "--demo"], "--serve 99999: the port must be a number"),
                        (["--serve-control", "--demo"], "--serve-control goes with --serve"),
                        (["--serve", "8000", "--once"], "--serve is a mode of its own")):
        r = gputop(*argv)
        assert r.returncode == 2 and words in r.stderr and r.stderr.count("\n") == 1, (argv, r.stderr)
