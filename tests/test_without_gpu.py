"""A machine without a GPU, as a newcomer meets gputop there (issue 24 item 4): every hint names only what works in
the mode it is given for, and ``--json`` writes exactly one document in every outcome. Real ``python -m gputop``
processes with the pynvml of a machine without a driver (tests/no_pynvml) first on the path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop import documents
from quick_util import only

ROOT = Path(__file__).resolve().parents[1]
NO_PYNVML = Path(__file__).resolve().parent / "no_pynvml"
PY = sys.executable
DEMO_TRACE = str(ROOT / "gputop" / "data" / "demo.jsonl.gz")


def gputop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(NO_PYNVML), str(ROOT)]),
               GPUTOP_WORKLOADS_PATH=str(ROOT / "tests" / "fault_workloads"))
    env.pop("NO_COLOR", None)
    return subprocess.run([PY, "-m", "gputop", *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env,
                          timeout=60, stdin=subprocess.DEVNULL)


def suggested(stderr: str) -> list[list[str]]:
    """The gputop command lines a message suggests: ``gputop --once --demo (or --replay FILE)`` ->
    [--once --demo], [--once --replay DEMO_TRACE]."""
    out = []
    for m in re.finditer(r"gputop ([^;()\n]+)(\(or (--replay FILE)\))?", stderr):
        args = m.group(1).split()
        out.append(args)
        if m.group(3):
            out.append([a for a in args if a != "--demo"] + ["--replay", DEMO_TRACE])
    return out


@pytest.mark.parametrize("argv", only([
    ["--once"], ["--once", "--json"], ["--record", "{tmp}/x.jsonl", "--seconds", "1"],
    ["--record", "{tmp}/x.jsonl", "--run", "--", PY, "-c", "0"],  # (without --record the command runs: test_run_without_gpu)
    ["--watch", str(os.getpid()), "--seconds", "1"], ["--export", "127.0.0.1:1"], ["--run", "fault_ok"],
], lambda a: a[:2] in (["--once", "--json"], ["--watch", str(os.getpid())]) or "-c" in a,  # the quick loop's three
    ids=lambda a: " ".join("PID" if w == str(os.getpid()) else w for w in a[:2])))  # one id in every process
def test_no_gpu_is_exit_3_and_every_hint_works_in_that_mode(argv, tmp_path):
    """Each gputop command line the message suggests, run here, does not fail as a usage error (exit 2), and the
    mode that failed suggests nothing that its own mode refuses ("try --demo" for --record, then refused)."""
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    r = gputop(*argv)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and "libnvidia-ml" in r.stderr
    if argv[0] in ("--once", "--export") or argv == ["--run", "fault_ok"]:  # modes that work without a GPU somehow
        assert suggested(r.stderr), r.stderr
    for args in suggested(r.stderr):
        if "--export" in args:  # a server: bad usage would be at once; checked by parse alone
            from gputop.cli import parse

            parse(args)
            continue
        follow = gputop(*args)
        assert follow.returncode not in (2, 3), f"suggested `gputop {' '.join(args)}`: {follow.stderr}"
    if argv[0] in ("--record", "--watch") or argv[:2] == ["--run", "--"]:  # modes that refuse a recorded source
        assert "--demo" not in r.stderr and "--replay" not in r.stderr, r.stderr


def test_once_json_without_a_gpu_is_one_error_document():
    r = gputop("--once", "--json")
    assert r.returncode == 3
    doc = json.loads(r.stdout)  # exactly one document: json.loads refuses trailing text
    documents.validate(doc, "once")
    assert doc["exit_code"] == 3 and doc["gpus"] == [] and doc["errors"][0]["kind"] == "no_gpu"
    assert "libnvidia-ml" in doc["errors"][0]["message"]


def test_once_output_file_gets_the_error_document_too(tmp_path):
    out = tmp_path / "once.json"
    r = gputop("--once", "-o", str(out))
    assert r.returncode == 3 and r.stdout == ""
    documents.validate(json.loads(out.read_text()), "once")


@pytest.mark.parametrize("argv, kind, code", [
    (["--once", "--json", "--gpu", "-1"], "once", 2),
    (["--once", "--json", "--list"], "once", 2),
    (["--once", "--json", "--bogus"], "once", 2),
    (["--once", "--json", "--replay", "/no/such/trace.jsonl"], "once", 2),
    (["--once", "--json", "--demo", "--gpu", "7"], "once", 2),
    (["--run", "fault_ok", "--json", "--log", "x"], "run", 2),
    (["--run", "no_such_workload", "--json"], "run", 2),
    (["--json", "--watch", "1", "--csv", "x"], "monitor", 2),
    (["--json", "--record", "x.jsonl", "--run", "--", "true", "--also-the-command's"], "monitor", 3),
], ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_json_is_one_document_in_every_outcome(argv, kind, code):
    r = gputop(*argv)
    assert r.returncode == code, r.stderr
    assert r.stderr.count("\n") == 1
    doc = json.loads(r.stdout)
    documents.validate(doc, kind)
    assert doc["exit_code"] == code and doc["errors"]
