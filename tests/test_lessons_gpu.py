"""On a real GPU: the seed lessons (offload, fusion, transfer) show the physics issue 13 asks for.

Each workload runs once, cold and full size, through ``gputop --run NAME --json``; with
``GPUTOP_LESSON_DOCS=DIR`` the documents bench/lessons_gpu.sh just wrote there (DIR/NAME-*.json) are read
instead, so the bench does not run everything twice. Skipped without NVML or torch with CUDA."""

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
from gputop.tui import lesson_views
from verdict_util import check_verdict

ROOT = Path(__file__).resolve().parents[1]


def _torch_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                       capture_output=True, text=True, timeout=120)
    return r.stdout.strip() == "True"


GPU = Nvml().available()
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not GPU, reason="no NVML / GPU here"),
              pytest.mark.skipif(GPU and not _torch_cuda(), reason="no torch with CUDA")]
_DOCS: dict = {}


def doc_of(name: str) -> dict:
    if name not in _DOCS:
        where = os.environ.get("GPUTOP_LESSON_DOCS")
        if where:  # the bench's documents; none there means its run failed (see NAME-*.err beside them)
            given = sorted(Path(where).glob(f"{name}-*.json"))
            if not given:
                pytest.fail(f"no {name}-*.json in {where}")
            doc = json.loads(given[-1].read_text())
        else:
            env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            r = subprocess.run([sys.executable, "-m", "gputop", "--run", name, "--json"], capture_output=True,
                               text=True, cwd=ROOT, env=env, timeout=600)
            assert r.returncode == 0, r.stderr[-3000:]
            doc = json.loads(r.stdout)
        validate(doc)
        assert doc["status"] == "ok" and doc["device"]["kind"] == "cuda", doc.get("errors")
        assert not [w for w in doc["warnings"] if w["code"] in ("analyze_failed", "wrong_result")], doc["warnings"]
        for v in [doc["verdict"]] + [ph["verdict"] for ph in doc["phases"] if ph["verdict"]]:
            check_verdict(v)
        _DOCS[name] = doc
    return _DOCS[name]


def points(doc: dict, **match) -> list[dict]:
    return sorted((q for q in doc["points"] if all(q.get(k) == v for k, v in match.items())),
                  key=lambda q: q.get("n", q.get("bytes", 0)))


# -- offload ---------------------------------------------------------------------------------------------

def test_offload_gpu_loses_small_with_copies_and_wins_large():
    doc = doc_of("offload")
    mat = points(doc, phase="matmul")
    assert mat[0]["gpu_copies_ms"] > mat[0]["cpu_ms"]  # 1 x 1: a launch, a sync and copies against 1 FLOP
    assert mat[-1]["gpu_copies_ms"] < mat[-1]["cpu_ms"]  # 4096 x 4096: the GPU wins, copies included
    assert doc["results"]["crossover_n"]["matmul"]["with_copies"] is not None
    sin = points(doc, phase="sin")
    assert sin[0]["gpu_copies_ms"] > sin[0]["cpu_ms"] and sin[-1]["gpu_ms"] < sin[-1]["cpu_ms"]
    small = next(q for q in doc["points"] if q.get("op") == "matmul" and q["n"] == 1)
    assert small["verdict"]["class"] == "latency-bound"


def test_offload_naive_timing_is_flat_and_said_why():
    doc = doc_of("offload")
    mat = points(doc, phase="matmul")
    naive = [q["gpu_naive_ms"] for q in mat]
    real_growth = mat[-1]["gpu_ms"] / mat[0]["gpu_ms"]  # n = 1 -> 4096 (H100, 2026-11-23: 67x)
    naive_spread = max(naive) / min(naive)  # (same run: 3.8x, launch jitter)
    assert real_growth > 30  # the real GPU time grows by well over an order of magnitude ...
    assert max(naive) < 5 * min(naive)  # ... the unsynchronised one does not: it times the launch
    assert real_growth > 10 * naive_spread
    assert mat[-1]["gpu_naive_ms"] < 0.1 * mat[-1]["gpu_ms"]
    text = "\n".join(t.plain for t in lesson_views.offload_view(doc, 120, 40))
    assert "times the launch only" in text
    assert "times only the launch" in next(p["verdict"] for p in doc["phases"] if p["name"] == "matmul")["evidence_text"]


def test_offload_first_call_is_reported_apart():
    first = doc_of("offload")["results"]["first_call"]
    assert first["context_ms"] > first["matmul"]["warm_ms"] and first["matmul"]["first_ms"] > first["matmul"]["warm_ms"]


# -- transfer --------------------------------------------------------------------------------------------

def test_transfer_pinned_beats_pageable_and_nears_the_link():
    doc = doc_of("transfer")
    link = doc["device"]["peaks"]["pcie_bytes_per_s_per_dir"]
    assert link, "no PCIe peak from NVML"
    for direction in ("h2d", "d2h"):
        pageable, pinned = points(doc, kind=f"{direction} pageable")[-1], points(doc, kind=f"{direction} pinned")[-1]
        assert pinned["bytes"] == pageable["bytes"] >= 1 << 28
        assert pinned["gb_per_s"] >= 2 * pageable["gb_per_s"], (direction, pinned["gb_per_s"], pageable["gb_per_s"])
    h2d = points(doc, kind="h2d pinned")
    assert h2d[-1]["gb_per_s"] * 1e9 >= 0.8 * link, (h2d[-1]["gb_per_s"], link)
    assert h2d[0]["gb_per_s"] < 0.5 * h2d[-1]["gb_per_s"]  # 4 kB copies: latency-bound
    v = next(p["verdict"] for p in doc["phases"] if p["name"] == "h2d pageable")
    assert (v["class"], v["subclass"]) == ("pcie-bound", "pageable") and "pin_memory" in v["advice"]


def test_transfer_three_streams_beat_the_serial_version():
    doc = doc_of("transfer")
    by = {q["mode"]: q for q in doc["points"] if q.get("kind") == "streams"}
    assert by["chunked"]["matches_serial"] and by["seed"]["matches_serial"]
    assert by["chunked"]["speedup_vs_serial"] > 1.2
    assert by["seed"]["speedup_vs_serial"] < 1.1  # the seed's streams sync between stages: no gain
    modes = doc["results"]["streams"]["modes"]

    def overlap(spans, a, b):
        return any(x["start_ms"] < y["end_ms"] and y["start_ms"] < x["end_ms"]
                   for x in spans if x["op"] == a for y in spans if y["op"] == b)

    assert not overlap(modes["seed"]["timeline"], "upload", "download")
    assert not overlap(modes["seed"]["timeline"], "upload", "compute")
    assert overlap(modes["chunked"]["timeline"], "upload", "download")


# -- fusion ----------------------------------------------------------------------------------------------

def test_fusion_nested_sine_fused_beats_eager():
    doc = doc_of("fusion")
    eager = points(doc, phase="nested_sin eager")
    fused = [q for q in doc["points"] if q.get("fn") == "nested_sin" and q.get("kernels_per_call") == 1]
    assert eager[-1]["kernels_per_call"] == 4 and fused, "no variant fused the four sines"
    big = max(q["n"] for q in fused)
    assert big >= 1 << 24
    assert max(q["speedup_vs_eager"] for q in fused if q["n"] == big) >= 1.5
    compiled = points(doc, phase="nested_sin compile")
    assert compiled and compiled[-1]["kernels_per_call"] == 1
    assert doc["verdict"]["subclass"] == "fusion speedup"
