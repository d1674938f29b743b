"""workloads/batchsize.py: the sweep end to end on the CPU, the OOM path, the knee and the verdicts."""

from __future__ import annotations

import json

import pytest

from gputop.lessons import batchsize as batchsize_lesson
from gputop.workload import Emitter, ParamError
from test_workloads_common import (check_verdict, cpu_document, gpu_telemetry, interrupt_after_first_point, load,
                                   points, reanalyzed, results)

bs = load("batchsize")


@pytest.fixture(scope="module")
def cpu_run():
    """The one CPU run of this module, through gputop: (exit code, run document, stderr)."""
    return cpu_document("batchsize")


def test_batch_sizes():
    assert bs.batch_sizes({"batches": "auto", "max_batch": 20}) == [1, 2, 4, 8, 16]
    assert bs.batch_sizes({"batches": "64, 8,8,1", "max_batch": 2}) == [1, 8, 64]
    for bad in ("", "0,4", "a,b", ","):
        with pytest.raises(ParamError, match="batches"):
            bs.batch_sizes({"batches": bad, "max_batch": 8})


def _fake_measure(oom_at, calls, exc_type):
    def measure(b):
        calls.append(b)
        if b >= oom_at:
            raise exc_type("CUDA out of memory. Tried to allocate 8.00 GiB")
        step = 2.0 + b * 0.01  # a fixed 2 ms plus work that grows with the batch
        return {"batch": b, "samples_per_s": b / step * 1e3, "step_ms": step, "peak_mem_gb": 0.5 + 0.02 * b,
                "oom": False}
    return measure


def test_sweep_ends_cleanly_at_a_real_oom_exception(capsys):
    torch = pytest.importorskip("torch")
    calls, freed, pts = [], [], []
    emit = Emitter(events=True)
    end = bs.sweep([1, 2, 4, 8, 16, 32, 64, 128], _fake_measure(64, calls, torch.cuda.OutOfMemoryError),
                   lambda: freed.append(1) or {"mem_allocated_after_free_gb": 0.1}, emit, 10.0, pts)
    assert end == {"reason": "oom", "oom_batch": 64}
    assert calls == [1, 2, 4, 8, 16, 32, 64] and freed == [1]  # stops at the OOM, frees once
    assert pts[-1]["oom"] and pts[-1]["batch"] == 64 and "OutOfMemoryError" in pts[-1]["error"]
    assert pts[-1]["mem_allocated_after_free_gb"] == 0.1
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["name"] for e in events if e["event"] == "phase"] == [f"batch={b}" for b in calls]
    assert [e["code"] for e in events if e["event"] == "warning"] == ["oom"]
    s = bs.summarize(pts, end, 128)
    assert s["largest_fit"] == 32 and s["oom_batch"] == 64 and s["oom_boundary"] == "fits at 32, out of memory at 64"
    assert s["peak_mem_gb_per_sample"] == pytest.approx(0.02)


def test_sweep_propagates_other_errors_and_stops_on_time():
    pts = []

    def broken(b):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal"):
        bs.sweep([1, 2], broken, lambda: {}, Emitter(events=True, stream=open("/dev/null", "w")), 10.0, pts)
    assert pts == []
    assert bs.out_of_memory(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    slow = lambda b: {"batch": b, "samples_per_s": b / 3.0, "step_ms": 3000.0, "oom": False}  # noqa: E731
    end = bs.sweep([1, 2, 4], slow, lambda: {}, Emitter(events=True, stream=open("/dev/null", "w")), 2.0, pts)
    assert end == {"reason": "time", "slow_batch": 1} and len(pts) == 1
    assert "time budget" in bs.summarize(pts, end, 4)["oom_boundary"]


def test_knee_is_the_smallest_batch_within_95_percent():
    pts = [{"batch": b, "samples_per_s": s, "oom": False} for b, s in
           [(1, 500), (2, 990), (4, 1900), (8, 3300), (16, 4800), (32, 5000), (64, 5100), (128, 5050)]]
    k = batchsize_lesson.knee(pts + [{"batch": 256, "oom": True}])
    assert k["knee_batch"] == 32 and k["best_batch"] == 64 and k["fraction"] == 0.95
    assert batchsize_lesson.knee([]) is None


@pytest.mark.slow
def test_cpu_run_plumbing(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok"
    sizes = [1, 2, 4, 8, 16]
    assert [ph["name"] for ph in doc["phases"]] == [f"batch={b}" for b in sizes]
    pts = doc["points"]
    assert [p["batch"] for p in pts] == sizes
    for p in pts:
        assert p["samples_per_s"] > 0 and p["step_ms"] > 0 and p["steps"] >= 3 and p["oom"] is False
        assert p["samples_per_s"] == pytest.approx(p["batch"] / p["step_ms"] * 1e3)
    res = doc["results"]
    assert res["end"] == "cap" and res["largest_fit"] == 16 and res["oom_batch"] is None
    assert res["oom_boundary"] == "no OOM below the cap (16)" and res["knee"]["knee_batch"] in sizes
    assert res["sizes_planned"] == sizes and "cudnn_allow_tf32" in res["tf32_flags"]


@pytest.mark.slow
def test_cpu_run_analyze(cpu_run):
    doc = reanalyzed(batchsize_lesson, cpu_run[1])
    # what gputop's runner judged in the run is what the module's analyze says of the same data
    assert [ph["verdict"] for ph in doc["phases"]] == [ph["verdict"] for ph in cpu_run[1]["phases"]]
    assert doc["verdict"] == cpu_run[1]["verdict"]
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
        assert (ph["verdict"]["class"], ph["verdict"]["subclass"]) in \
            (("latency-bound", "launch"), ("latency-bound", "transition"), ("compute-bound", "saturated"))
    check_verdict(doc["verdict"])
    assert any("no OOM below the cap (16)" in n for n in doc["verdict"]["notes"])


@pytest.mark.slow
def test_gputop_run_json_on_cpu(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok" and len(doc["phases"]) == 5 and doc["verdict"]
    assert all(p["verdict"] for p in doc["phases"])


def test_analyze_h100_like_sweep_with_oom():
    sweep = [(1, 2.9), (2, 2.9), (4, 2.95), (8, 3.0), (16, 3.1), (32, 3.6), (64, 5.9), (128, 10.8), (256, 20.9),
             (512, 41.0), (1024, 81.5), (2048, 163.0), (4096, 330.0)]
    pts = [{"phase": f"batch={b}", "batch": b, "samples_per_s": b / ms * 1e3, "step_ms": ms, "oom": False,
            "peak_mem_gb": 0.2 + 0.016 * b} for b, ms in sweep]
    pts.append({"phase": "batch=8192", "batch": 8192, "oom": True, "error": "OutOfMemoryError: CUDA out of memory.",
                "mem_allocated_after_free_gb": 0.21})
    tel = {"batch=1": gpu_telemetry(sm_active_pct=4.0), "batch=256": gpu_telemetry(sm_active_pct=93.0)}
    doc = {"phases": [{"name": p["phase"], "telemetry": tel.get(p["phase"]), "verdict": None} for p in pts],
           "points": pts, "warnings": [],
           "results": bs.summarize(pts, {"reason": "oom", "oom_batch": 8192}, 65536)}
    batchsize_lesson.analyze(doc)
    cls = {ph["name"]: (ph["verdict"]["class"], ph["verdict"]["subclass"]) for ph in doc["phases"]}
    assert cls["batch=1"] == cls["batch=16"] == ("latency-bound", "launch")
    assert cls["batch=32"] == ("latency-bound", "transition")  # doubling to 64 gains 1.22x
    assert cls["batch=64"] == ("compute-bound", "saturated")  # doubling to 128 gains 1.09x: the GPU is full
    assert cls["batch=256"] == cls["batch=4096"] == ("compute-bound", "saturated")
    assert cls["batch=8192"] == ("memory-capacity", "oom")
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
    assert "SM active 4%" in doc["phases"][0]["verdict"]["evidence_text"]
    assert doc["phases"][0]["verdict"]["evidence"]["sm_active_pct"] == 4.0
    oom = doc["phases"][-1]["verdict"]
    assert "0.21 GB still allocated" in oom["evidence_text"]
    assert oom["notes"] == ["OutOfMemoryError: CUDA out of memory."]
    v = doc["verdict"]
    check_verdict(v)
    assert (v["class"], v["subclass"]) == ("latency-bound", "up to batch 16, compute-bound from batch 64")
    assert v["mixed"] == ["compute-bound"]
    assert "knee 256" in v["advice"]  # the smallest batch within 95% of the best
    assert "fits at 4096, out of memory at 8192" in v["evidence_text"] and v["evidence"]["oom_batch"] == 8192
    assert "SM active 4% at batch 1 vs 93% at the knee" in v["evidence_text"]
    assert "8192 does not fit" in v["advice"]


def test_analyze_still_rising_and_flat():
    rising = [{"phase": f"batch={b}", "batch": b, "samples_per_s": 100.0 * b, "step_ms": 10.0, "oom": False}
              for b in (1, 2, 4)]
    doc = {"phases": [{"name": p["phase"], "telemetry": None, "verdict": None} for p in rising], "points": rising,
           "results": {"end": "cap"}, "warnings": []}
    v = batchsize_lesson.analyze(doc)["verdict"]
    assert (v["class"], v["subclass"]) == ("latency-bound", "up to batch 4: throughput still rising")
    flat = [dict(p, samples_per_s=1000.0) for p in rising]
    doc = {"phases": [{"name": p["phase"], "telemetry": None, "verdict": None} for p in flat], "points": flat,
           "results": {"end": "cap"}, "warnings": []}
    v = batchsize_lesson.analyze(doc)["verdict"]
    assert (v["class"], v["subclass"]) == ("compute-bound", "at every batch size")


@pytest.mark.slow
def test_interrupt_keeps_the_sizes_done():
    pytest.importorskip("torch")
    rc, events = interrupt_after_first_point("batchsize", "--param", "device=cpu", "--param", "min_seconds=0.5")
    assert rc == 130 and events[-1]["status"] == "interrupted"
    assert 1 <= len(points(events)) < 5 and results(events)["end"] == "interrupted"
