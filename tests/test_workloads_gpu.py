"""On a real GPU: the four teaching workloads through ``gputop --run NAME --quick --json`` show the orderings
the physics predicts, with verdicts that match. Skipped without NVML, torch with CUDA (and cupy for
cudagraphs). The full-size figures come from bench/gpu/workloads_gpu.sh."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.documents import validate
from gputop.telemetry.nvml import Nvml
from gpu_util import torch_cuda
from verdict_util import check_verdict

ROOT = Path(__file__).resolve().parents[1]


GPU = Nvml().available()
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not GPU, reason="no NVML / GPU here"),
              pytest.mark.skipif(GPU and not torch_cuda(), reason="no torch with CUDA")]


def run(name: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "gputop", "--run", name, "--json", "--quick", *args],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["status"] == "ok" and doc["device"]["kind"] == "cuda" and doc["verdict"]
    return doc


def classes(doc: dict) -> dict:
    """Each phase's (class, subclass); every verdict of the run checked for the one shape on the way."""
    for v in [doc["verdict"]] + [ph["verdict"] for ph in doc["phases"] if ph["verdict"]]:
        check_verdict(v)
    return {ph["name"]: (ph["verdict"]["class"], ph["verdict"]["subclass"]) if ph["verdict"] else None
            for ph in doc["phases"]}


def test_dataloader_more_workers_beat_zero():
    doc = run("dataloader")
    pts = doc["points"]
    assert pts[0]["num_workers"] == 0 and len(pts) == 4
    assert max(p["samples_per_s"] for p in pts[1:]) > 1.5 * pts[0]["samples_per_s"]
    assert classes(doc)[pts[0]["phase"]] == ("input-starved", "no workers")
    assert doc["verdict"]["class"] == "input-starved"
    assert pts[2]["pin_memory"] and pts[2]["h2d_ms"] < pts[1]["h2d_ms"]  # pinned copies are faster


def test_amp_bf16_beats_strict_fp32():
    doc = run("amp")
    by = {p["phase"]: p for p in doc["points"]}
    assert by["bf16"]["speedup_vs_fp32_strict"] > 2.0
    assert all(p["loss_finite"] for p in by.values()) and by["bf16"]["eval_loss_rel_diff"] < 0.1
    assert doc["results"]["tf32_defaults"]["cudnn_allow_tf32"] is True
    assert classes(doc)["bf16"] == ("compute-bound", "tensor")
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == ("compute-bound", "amp speedup")


def test_batchsize_rises_flattens_and_reports_the_oom():
    doc = run("batchsize")  # --quick caps the process at 25% of the GPU's memory
    ok = [p for p in doc["points"] if not p["oom"]]
    best = max(p["samples_per_s"] for p in ok)
    assert ok[0]["samples_per_s"] < 0.5 * best
    assert doc["results"]["end"] == "oom" and doc["points"][-1]["oom"]
    assert doc["results"]["knee"]["knee_batch"] < ok[-1]["batch"]
    c = classes(doc)
    # the smallest batch pays the step's fixed cost: latency-bound, "launch" where throughput still doubles or nearly
    # with the batch there, "transition" where it rises more slowly (a --quick run's few steps a batch: on 2 H100s,
    # 2026-11-26, the first batch's gain fell under LATENCY_GAIN once in three runs)
    from gputop.lessons.batchsize import LATENCY_GAIN, scaling

    gain = scaling(ok)[ok[0]["batch"]]
    assert c[ok[0]["phase"]] == ("latency-bound", "launch" if gain >= LATENCY_GAIN else "transition"), gain
    assert gain > 1.2  # more throughput with the batch, whichever subclass
    assert c[doc["points"][-1]["phase"]] == ("memory-capacity", "oom")


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="no cupy")
def test_cudagraphs_graph_beats_interleaved_beats_naive():
    doc = run("cudagraphs")
    us = doc["results"]["us_per_kernel"]
    assert us["graph"] <= us["interleaved"] <= us["naive"]
    assert doc["results"]["kernel_us"] > 0 and classes(doc)["naive"] == ("latency-bound", "launch overhead")
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == ("latency-bound", "launch overhead")
