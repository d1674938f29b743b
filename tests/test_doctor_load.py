"""The doctor's loads themselves (gputop.measure.health_load, p2p_load): what they say where they cannot run (here,
on a machine without CuPy or CUDA: a real child, its events, its exit code), and on a GPU (marked gpu) the whole
``gputop --doctor --quick`` against its schema, its figures against the GPU's theoretical peaks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.measure.health_load import cpu_list
from gputop.telemetry.nvml import Nvml

ROOT = Path(__file__).resolve().parents[1]


def child(module: str, *args: str) -> tuple[int, list[dict]]:
    p = subprocess.run([sys.executable, "-m", module, "--events", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, stdin=subprocess.DEVNULL)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def test_cpu_lists_as_nvml_and_taskset_write_them():
    assert cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11] and cpu_list("") == []


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_the_load_without_cupy_says_so_and_exits_4():
    rc, events = child("gputop.measure.health_load", "--quick")
    assert rc == 4
    err = [e for e in events if e["event"] == "error"]
    assert err and err[0]["kind"] == "missing_dependency" and "cupy" in err[0]["message"]
    assert events[-1] == {**events[-1], "event": "done", "status": "error"}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch")
@pytest.mark.skipif(Nvml().available(), reason="a GPU is here")
@pytest.mark.slow
def test_the_pair_copies_without_cuda_are_an_error_event():
    rc, events = child("gputop.measure.p2p_load")
    assert rc == 1 and [e["message"] for e in events if e["event"] == "error"] == ["RuntimeError: torch sees no CUDA "
                                                                                   "device"]


# -- on a GPU ----------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not Nvml().available(), reason="no NVML / GPU here")
@pytest.mark.skipif(importlib.util.find_spec("cupy") is None or importlib.util.find_spec("torch") is None,
                    reason="needs CuPy and torch")
def test_a_quick_doctor_on_this_gpu_measures_every_figure_under_its_peaks(tmp_path):
    from gputop.documents import validate

    env = {**__import__("os").environ, "GPUTOP_DOCTOR_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "gputop", "--doctor", "--quick", "--json", "--gpu", "0"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode in (0, 7, 8), p.stderr
    doc = json.loads(p.stdout)
    validate(doc, "doctor")
    g = doc["gpus"][0]
    if g["active"].get("skipped"):
        pytest.skip(g["active"]["skipped"])
    f, peaks = g["active"]["figures"], g["peaks"]
    assert 0.5 * peaks["dram_bytes_per_s"] < f["dram_bytes_per_s"] <= 1.01 * peaks["dram_bytes_per_s"]
    assert 0.5 * peaks["fp32_flops"] < f["fp32_flops"] <= 1.01 * peaks["fp32_flops"]
    assert f["bf16_flops"] <= 1.01 * peaks["tensor_dense_flops"]["bf16"] and f["h2d_bytes_per_s"] > 1e9
    assert g["active"]["load"]["sustained"]["samples"] >= 10 and g["active"]["load"]["pcie"]["samples"] >= 1
    assert g["active"]["details"]["bf16"]["how"].startswith("best of 6 bursts of 3 torch.mm shapes")  # each twice
