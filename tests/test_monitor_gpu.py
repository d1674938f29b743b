"""On a real GPU: ``gputop --json --run -- python bench/gpu/proof/CASE.py`` names each known bottleneck, finds the
command's GPU, and keeps its exit code. Skipped without NVML or torch (run with ``pytest -m gpu``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.telemetry.nvml import Nvml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text())
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not Nvml().available(), reason="no NVML / GPU here"),
              pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch")]

CASES = [  # (script, expected class, expected subclass or None)
    ("idle", "idle", None),
    ("matmul_bf16", "compute-bound", "tensor"),
    ("elementwise", "memory-bound", None),
    ("tiny_kernels_sync", "latency-bound", "launch"),
    ("pageable_h2d", "pcie-bound", None),
    ("dataloader_starved", "input-starved", None),
]


def gputop(*args, timeout=300):
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


@pytest.mark.parametrize("case,cls,sub", CASES, ids=[c[0] for c in CASES])
def test_known_bottleneck_gets_its_class(case, cls, sub):
    r = gputop("--json", "--run", "--", sys.executable, f"bench/gpu/proof/{case}.py", "--seconds", "8")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    if importlib.util.find_spec("jsonschema"):  # the GPU image may not have it
        import jsonschema

        jsonschema.validate(doc, SCHEMA)
    v = doc["verdict"]
    timeline = [(s["t_start"], s["t_end"], s["class"], s["subclass"]) for g in doc["gpus"] for s in g["timeline"]]
    assert v["class"] == cls, f"{case}: {v['class']} ({v['evidence_text']}); timeline {timeline}"
    if sub:
        assert v["subclass"] == sub, v["evidence_text"]
    if cls != "idle":
        assert doc["gpus_used"], doc["notes"]
    assert v["evidence_text"] and v["advice"]


def test_exit_code_and_oom_of_a_failing_command():
    r = gputop("--json", "--run", "--", sys.executable, "bench/gpu/proof/oom.py", "--seconds", "3")
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 1 and "out of memory" in r.stderr.lower()
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == ("memory-capacity", "oom")
