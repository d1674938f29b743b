"""``gputop --list [--json]``: every workload with its description and its parameters with defaults;
and every workload script runs on its own (``python workloads/NAME.py --help``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.runner.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "fault_workloads"
BUILTIN = sorted(p for p in (ROOT / "workloads").glob("*.py") if not p.name.startswith("_"))


def gputop(*args, path=""):
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUTOP_WORKLOADS_PATH=path)
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=60)


def test_list_text_shows_every_workload_with_params_and_defaults():
    r = gputop("--list", path=str(FAULTS))
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout
    reg = Registry([ROOT / "workloads", FAULTS])
    assert len(reg) >= len(BUILTIN) + 5
    for spec in reg:
        line = next(ln for ln in out.splitlines() if ln.startswith(spec.name + " "))
        assert spec.description in line
        for p in spec.params:
            assert any(ln.split()[:2] == [p.name, "default"] and p.allowed() in ln for ln in out.splitlines()), p.name
    assert "k  " in out and "default 1,2,4" in out and "comma-separated integers in [1, 64]" in out
    assert "--quick: k=1,2" in out and "--device cpu: sleep=0.02" in out
    assert "    needs cupy: pip install 'gputop[cuda12]' or 'gputop[cuda13]'" in out  # what it needs, how to get it


def test_list_json():
    r = gputop("--list", "--json", path=str(FAULTS))
    assert r.returncode == 0
    items = json.loads(r.stdout)
    by_name = {w["name"]: w for w in items}
    assert {p.stem for p in BUILTIN} <= set(by_name)
    ok = by_name["fault_ok"]
    assert ok["description"] == "test workload that finishes normally" and ok["cpu"] is True
    assert ok["quick"] == {"k": [1, 2]} and ok["cpu_overrides"] == {"sleep": 0.02}
    k = next(p for p in ok["params"] if p["name"] == "k")
    assert k["default"] == [1, 2, 4] and k["type"] == "int_list" and "[1, 64]" in k["allowed"]
    for w in items:
        assert w["description"] and all("default" in p and "allowed" in p for p in w["params"])


def test_list_reports_a_broken_workload_and_goes_on(tmp_path):
    (tmp_path / "broken.py").write_text("import this_module_does_not_exist\n")
    r = gputop("--list", path=os.pathsep.join([str(FAULTS), str(tmp_path)]))
    assert r.returncode == 0 and "fault_ok" in r.stdout
    assert "skipped a workload" in r.stderr and "broken.py" in r.stderr and "this_module_does_not_exist" in r.stderr


@pytest.mark.parametrize("script", BUILTIN + sorted(FAULTS.glob("fault_*.py")), ids=lambda p: p.name)
def test_each_workload_script_runs_on_its_own(script):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a plain script from a checkout
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, env=env,
                       cwd=script.parent, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--param" in r.stdout and "--events" in r.stdout
