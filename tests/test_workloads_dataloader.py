"""workloads/dataloader.py: the heavy transform, the four phases end to end on the CPU, and the verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gputop.lessons import dataloader as dataloader_lesson
from test_workloads_common import (check_verdict, cpu_document, gpu_telemetry, interrupt_after_first_point, load,
                                   points, reanalyzed)

dl = load("dataloader")
PHASES = ["workers=0", "workers=2", "+pin_memory", "+persistent"]


@pytest.fixture(scope="module")
def cpu_run():
    """The one CPU run of this module, through gputop: (exit code, run document, stderr)."""
    return cpu_document("dataloader")


def test_transform_is_real_deterministic_array_work():
    ds = dl.SyntheticImages(4, 16, 3, seed=1)
    x, label = ds[2]
    assert x.shape == (3, 16, 16) and x.dtype == np.float32 and np.isfinite(x).all()
    assert abs(float(x.mean())) < 1e-3 and abs(float(x.std()) - 1.0) < 1e-2
    assert label == 2 and np.array_equal(ds[2][0], x)  # the same index gives the same sample
    assert not np.array_equal(ds[3][0], x)
    assert not np.allclose(dl.heavy_transform(x.copy(), 1), dl.heavy_transform(x.copy(), 2))


def test_calibrate_reports_its_cost():
    cal = dl.calibrate(16, 1.0, 0)
    assert cal["passes"] >= 1 and cal["ms_per_sample"] > 0 and cal["ms_per_pass"] > 0
    assert dl.calibrate(16, 0.0, 0)["passes"] == 0


def test_shm_fit_shrinks_workers_and_prefetch_to_dev_shm():
    batch = 64 * 3 * 64 * 64 * 4
    assert dl.shm_fit(8, 4, batch, None) == (8, 4)
    assert dl.shm_fit(8, 4, batch, 10 * 10**9) == (8, 4)
    w, pf = dl.shm_fit(8, 4, batch, 64 * 10**6)
    assert w < 8 and w * 2 * 2 * batch <= 0.8 * 64 * 10**6 + 2 * batch and pf >= 1
    assert dl.shm_fit(8, 4, batch, 1) == (1, 1)


@pytest.mark.slow
def test_cpu_run_plumbing(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["device"]["kind"] == "cpu" and doc["device"]["reported"]["kind"] == "cpu"  # as the script started
    assert doc["status"] == "ok"
    assert [ph["name"] for ph in doc["phases"]] == PHASES
    pts = doc["points"]
    assert [p["phase"] for p in pts] == PHASES
    for p in pts:
        for key in ("samples_per_s", "step_ms", "data_wait_ms", "compute_ms", "data_wait_pct", "compute_pct",
                    "worker_cpu_pct", "main_cpu_pct", "loss"):
            assert isinstance(p[key], float) and math.isfinite(p[key]) and p[key] >= 0, key
        assert p["samples_per_s"] > 0 and p["steps"] >= 1
        assert p["h2d_ms"] == 0 and p["pin_memory"] is False  # no host-to-device copy on the CPU device
    assert [p["num_workers"] for p in pts] == [0, 2, 2, 2]
    assert pts[0]["worker_cpu_pct"] == 0  # no workers: the transform ran in the loop
    assert all(p["worker_cpu_pct"] > 0 for p in pts[1:])  # the workers did the transform
    assert pts[3]["persistent_workers"] and pts[3]["prefetch_factor"] == 4
    res = doc["results"]
    assert res["transform"]["passes"] >= 1 and res["transform"]["ms_per_sample"] > 0
    assert set(res["speedup_vs_workers0"]) == set(PHASES) and res["speedup_vs_workers0"]["workers=0"] == 1.0
    assert "cudnn_allow_tf32" in res["tf32_flags"]


@pytest.mark.slow
def test_cpu_run_analyze_sets_every_verdict(cpu_run):
    doc = reanalyzed(dataloader_lesson, cpu_run[1])
    # what gputop's runner judged in the run is what the module's analyze says of the same data
    assert [ph["verdict"] for ph in doc["phases"]] == [ph["verdict"] for ph in cpu_run[1]["phases"]]
    assert doc["verdict"] == cpu_run[1]["verdict"]
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
        assert ph["verdict"]["class"] in ("input-starved", "pcie-bound", "compute-bound")
    check_verdict(doc["verdict"])


@pytest.mark.slow
def test_gputop_run_json_on_cpu(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok" and [p["name"] for p in doc["phases"]] == PHASES
    assert all(p["verdict"] for p in doc["phases"]) and doc["verdict"]
    assert doc["params"]["workers"] == 2  # the CPU overrides


def _pt(phase, workers, sps, wait, h2d, comp, **kw):
    step = 1e3 * 64 / sps
    return {"phase": phase, "num_workers": workers, "samples_per_s": sps, "step_ms": step,
            "data_wait_ms": wait * step / 100, "h2d_ms": h2d * step / 100, "compute_ms": comp * step / 100,
            "data_wait_pct": wait, "h2d_pct": h2d, "compute_pct": comp, "worker_cpu_pct": 95.0 * workers, **kw}


def _doc(pts, tel=None):
    return {"phases": [{"name": p["phase"], "telemetry": (tel or {}).get(p["phase"]), "verdict": None} for p in pts],
            "points": pts, "results": {"workers_to_keep_up": 9}, "warnings": []}


def test_analyze_starved_then_fixed_h100_like():
    pts = [_pt("workers=0", 0, 980, 91.0, 1.5, 8.0), _pt("workers=8", 8, 6100, 12.0, 9.0, 80.0),
           _pt("+pin_memory", 8, 7300, 6.0, 2.0, 92.0), _pt("+persistent", 8, 7600, 3.0, 2.0, 95.0)]
    tel = {"workers=0": gpu_telemetry(util_gpu_pct=9.0, sm_active_pct=6.0),
           "+persistent": gpu_telemetry(util_gpu_pct=97.0, sm_active_pct=71.0, reasons=["software power cap"])}
    doc = dataloader_lesson.analyze(_doc(pts, tel))
    classes = [(ph["verdict"]["class"], ph["verdict"]["subclass"]) for ph in doc["phases"]]
    assert classes == [("input-starved", "no workers")] + [("compute-bound", None)] * 3
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
    starved = doc["phases"][0]["verdict"]
    assert "raise num_workers" in starved["advice"] and "about 9 workers" in starved["advice"]
    assert "kernel-active 9%" in starved["evidence_text"] and starved["evidence"]["data_wait_pct"] == 91.0
    v = doc["verdict"]
    check_verdict(v)
    assert v["class"] == "input-starved" and "7.8x faster" in v["evidence_text"]
    assert "'+persistent'" in v["evidence_text"] and v["evidence"]["speedup"] == pytest.approx(7600 / 980)
    assert [w["code"] for w in doc["warnings"]] == ["throttling"]


def test_analyze_transfer_bound_and_still_starved():
    pts = [_pt("workers=0", 0, 500, 70.0, 20.0, 10.0), _pt("workers=4", 4, 900, 20.0, 55.0, 25.0),
           _pt("+pin_memory", 4, 1500, 60.0, 5.0, 35.0)]
    doc = dataloader_lesson.analyze(_doc(pts))
    assert [(ph["verdict"]["class"], ph["verdict"]["subclass"]) for ph in doc["phases"]] == \
        [("input-starved", "no workers"), ("pcie-bound", "pageable"), ("input-starved", "too few workers")]
    assert "pin_memory" in doc["phases"][1]["verdict"]["advice"]
    assert "raise num_workers further" in doc["phases"][2]["verdict"]["advice"]
    assert "about 9 workers" in doc["verdict"]["advice"]


def test_analyze_not_starved_and_empty():
    pts = [_pt("workers=0", 0, 5000, 5.0, 1.0, 93.0), _pt("workers=8", 8, 5050, 2.0, 1.0, 96.0)]
    doc = dataloader_lesson.analyze(_doc(pts))
    assert doc["verdict"]["class"] == "compute-bound" and "only 5%" in doc["verdict"]["evidence_text"]
    check_verdict(doc["verdict"])
    assert dataloader_lesson.analyze({"phases": [], "points": [], "results": {}})["verdict"] is None


@pytest.mark.slow
def test_interrupt_keeps_the_phases_done():
    pytest.importorskip("torch")
    rc, events = interrupt_after_first_point("dataloader", "--param", "device=cpu", "--quick",
                                             "--param", "seconds=1")
    assert rc == 130
    assert events[-1]["event"] == "done" and events[-1]["status"] == "interrupted"
    assert 1 <= len(points(events)) < len(PHASES)
