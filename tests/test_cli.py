"""The command line as a user meets it: real subprocesses, exit codes, one-line errors, schema-valid JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import gputop
from gputop.telemetry.nvml import Nvml

ROOT = Path(__file__).resolve().parents[1]
ONCE_SCHEMA = json.loads((ROOT / "gputop" / "schema" / "once.schema.json").read_text())
NO_GPU = not Nvml().available()


def gputop_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=60)


def test_version_and_help():
    r = gputop_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"gputop {gputop.__version__}"
    r = gputop_cli("--help")
    assert r.returncode == 0 and "--once" in r.stdout and "exit codes" in r.stdout


@pytest.mark.skipif(not NO_GPU, reason="needs a machine without NVML")
def test_once_without_gpu_exits_3_with_one_line_and_one_document():
    r = gputop_cli("--once", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["errors"]  # one document: the error document
    assert r.stderr.count("\n") == 1 and "libnvidia-ml" in r.stderr and "--demo" in r.stderr


@pytest.mark.skipif(not NO_GPU, reason="needs a machine without NVML")
def test_record_without_gpu_exits_3(tmp_path):
    r = gputop_cli("--record", str(tmp_path / "x.jsonl"), "--seconds", "1")
    assert r.returncode == 3 and "libnvidia-ml" in r.stderr


def test_demo_once_json_validates_against_the_schema(tmp_path):
    r = gputop_cli("--demo", "--once", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, ONCE_SCHEMA)
    g = doc["gpus"][0]
    assert g["static"]["name"] == "NVIDIA H200" and doc["source"]["kind"] == "replay"
    assert g["peaks"]["dram_bytes_per_s"] == pytest.approx(4.8e12, rel=0.02)
    assert g["sample"]["sm_active_pct"] is not None  # GPM numbers, not n/a


def test_demo_once_text_names_duty_cycles_and_gpm():
    r = gputop_cli("--demo", "--once")
    assert r.returncode == 0
    assert "NVIDIA H200" in r.stdout and "duty cycles" in r.stdout and "SM activity" in r.stdout


def test_replay_of_a_recorded_trace_with_gpu_choice(tmp_path):
    r = gputop_cli("--replay", str(ROOT / "gputop" / "data" / "demo.jsonl.gz"), "--gpu", "0", "--once", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["gpus"][0]["static"]["index"] == 0


@pytest.mark.parametrize("args, needle", [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--demo", "--once", "--gpu", "7"], "--gpu 7: no such GPU (valid: 0 (NVIDIA H200))"),
    (["--replay", "/no/such/file.jsonl", "--once"], "/no/such/file.jsonl: no such file"),
    (["--replay", __file__, "--once"], "not JSON"),
    (["--demo", "--replay", "x", "--once"], "give one"),
    (["--demo", "--speed", "0", "--once"], "--speed must be > 0"),
    (["--gpu", "-1", "--once"], "--gpu takes an NVML index"),
    (["--run"], "--run needs a workload NAME"),
    (["--rate", "abc"], "invalid float value"),
    (["--rate", "1000", "--demo", "--once"], "--rate must be between 0.5 and 50 Hz"),
    (["--run", "roofline", "--grace", "-1"], "--grace must be >= 0"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = gputop_cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and r.stderr.count("\n") == 1 and r.stdout == ""
