"""workloads/amp.py: modes end to end on the CPU (strict FP32 and bf16 autocast), the loss check, the verdicts."""

from __future__ import annotations

import math

import pytest

from gputop.lessons import amp as amp_lesson
from gputop.workload import ParamError
from test_workloads_common import check_verdict, cpu_document, gpu_telemetry, load, reanalyzed

amp = load("amp")


@pytest.fixture(scope="module")
def cpu_run():
    """The one CPU run of this module, through gputop: (exit code, run document, stderr)."""
    return cpu_document("amp")


def test_parse_modes_puts_the_baseline_first():
    assert amp.parse_modes("bf16,fp32-strict") == ["fp32-strict", "bf16"]
    assert amp.parse_modes("tf32") == ["tf32"]
    for bad in ("", "fp8", "bf16,int4"):
        with pytest.raises(ParamError, match="modes"):
            amp.parse_modes(bad)


def test_rel_diff():
    assert amp.rel_diff(1.1, 1.0) == pytest.approx(0.1)
    assert amp.rel_diff(float("nan"), 1.0) is None and amp.rel_diff(1.0, None) is None and amp.rel_diff(1, 0) is None


@pytest.mark.slow
def test_cpu_run_fp32_and_bf16(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok"
    assert [ph["name"] for ph in doc["phases"]] == ["fp32-strict", "bf16"]
    assert {w["code"] for w in doc["warnings"]} <= {"skipped", "noisy_timing"}
    params = doc["params"]
    pts = doc["points"]
    fp32, bf16 = pts
    for p in pts:
        assert p["step_ms"] > 0 and p["samples_per_s"] > 0 and p["loss_finite"]
        assert p["peak_mem_gb"] is None  # no CUDA memory on the CPU device
        assert p["steps_trained"] == params["warmup"] + params["steps"]  # every mode the same
        assert p["matmul_allow_tf32"] is False and p["cudnn_allow_tf32"] is False
    assert fp32["amp_dtype"] is None and bf16["amp_dtype"] == "bfloat16" and not bf16["grad_scaler"]
    assert fp32["speedup_vs_fp32_strict"] == 1.0 and bf16["speedup_vs_fp32_strict"] > 0
    # numerics, not timing: the same seed and data give nearly the same loss in bf16, and it learned
    assert bf16["eval_loss_rel_diff"] < 0.1
    assert fp32["train_loss"] < fp32["first_loss"]
    res = doc["results"]
    assert res["tf32_defaults"]["cudnn_allow_tf32"] is True  # PyTorch's default, reported before changing it
    assert res["tf32_defaults"]["matmul_allow_tf32"] is False
    assert res["modes"] == ["fp32-strict", "bf16"] and res["train_flops_per_step"] > 0
    assert set(res["eval_loss"]) == {"fp32-strict", "bf16"}


def subclasses(doc: dict) -> list[tuple[str, str]]:
    return [(ph["verdict"]["class"], ph["verdict"]["subclass"]) for ph in doc["phases"]]


@pytest.mark.slow
def test_cpu_run_analyze(cpu_run):
    doc = reanalyzed(amp_lesson, cpu_run[1])
    # what gputop's runner judged in the run is what the module's analyze says of the same data
    assert [ph["verdict"] for ph in doc["phases"]] == [ph["verdict"] for ph in cpu_run[1]["phases"]]
    assert doc["verdict"] == cpu_run[1]["verdict"]
    assert subclasses(doc)[0] == ("compute-bound", "fp32")
    assert subclasses(doc)[1] in (("compute-bound", "tensor"), ("compute-bound", "no amp speedup"))
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
        assert ph["verdict"]["confidence"] is None  # a measured fact, not a score
    check_verdict(doc["verdict"])


@pytest.mark.slow
def test_gputop_run_json_on_cpu(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok" and [p["name"] for p in doc["phases"]] == ["fp32-strict", "bf16"]
    assert all(p["verdict"] for p in doc["phases"]) and doc["verdict"]


def _pt(mode, step_ms, loss, base_loss=2.0, **kw):
    return {"phase": mode, "step_ms": step_ms, "samples_per_s": 16e3 / step_ms, "eval_loss": loss,
            "train_loss": loss, "loss_finite": math.isfinite(loss), "speedup_vs_fp32_strict": 64.0 / step_ms,
            "eval_loss_rel_diff": abs(loss - base_loss) / base_loss if math.isfinite(loss) else None,
            "peak_mem_gb": 9.5, "amp_dtype": {"bf16": "bfloat16", "fp16": "float16"}.get(mode),
            "matmul_allow_tf32": mode == "tf32", "cudnn_allow_tf32": mode == "tf32", **kw}


def _doc(pts, tel=None, tol=0.1):
    return {"params": {"loss_tol": tol}, "points": pts, "results": {}, "warnings": [],
            "phases": [{"name": p["phase"], "telemetry": (tel or {}).get(p["phase"]), "verdict": None} for p in pts]}


def test_analyze_h100_like_bf16_wins():
    pts = [_pt("fp32-strict", 64.0, 2.0), _pt("tf32", 21.0, 2.01), _pt("bf16", 9.1, 2.02), _pt("fp16", 9.6, 2.03)]
    tel = {"fp32-strict": gpu_telemetry(tensor_pct=0.0, sm_active_pct=95.0),
           "bf16": gpu_telemetry(tensor_pct=46.0, sm_active_pct=90.0)}
    doc = amp_lesson.analyze(_doc(pts, tel))
    assert subclasses(doc) == [("compute-bound", "fp32")] + [("compute-bound", "tensor")] * 3
    fp32 = doc["phases"][0]["verdict"]
    assert "tensor 0%" in fp32["evidence_text"] and fp32["evidence"]["tensor_pct"] == 0.0
    assert fp32["evidence"]["step_ms"] == 64.0 and "64.0 ms/step" in fp32["evidence_text"]
    assert "TF32 matmul on" in doc["phases"][1]["verdict"]["evidence_text"]
    v = doc["verdict"]
    check_verdict(v)
    assert (v["class"], v["subclass"]) == ("compute-bound", "amp speedup")
    assert "bf16 7.03x" in v["evidence_text"] and v["evidence"]["bf16_speedup"] == pytest.approx(7.033, abs=1e-3)
    assert "tensor activity 0% -> 46%" in v["evidence_text"] and v["evidence"]["bf16_tensor_pct"] == 46.0
    assert "bfloat16" in v["advice"] and "no GradScaler" in v["advice"]


def test_analyze_flags_a_diverged_fp16_and_no_gain():
    pts = [_pt("fp32-strict", 10.0, 2.0), _pt("bf16", 9.5, 2.05), _pt("fp16", 9.0, float("nan"))]
    for p in pts:
        p["speedup_vs_fp32_strict"] = 10.0 / p["step_ms"]
    doc = amp_lesson.analyze(_doc(pts))
    assert [sub for _, sub in subclasses(doc)] == ["fp32", "no amp speedup", "loss not finite"]
    assert doc["phases"][2]["verdict"]["evidence"]["eval_loss"] is None  # NaN is n/a, not a number
    assert doc["verdict"]["subclass"] == "no amp gain" and "loss off in fp16" in doc["verdict"]["evidence_text"]
    for v in [ph["verdict"] for ph in doc["phases"]] + [doc["verdict"]]:
        check_verdict(v)


def test_analyze_loss_mismatch_and_missing_baseline():
    pts = [_pt("fp32-strict", 60.0, 2.0), _pt("bf16", 8.0, 2.6)]
    doc = amp_lesson.analyze(_doc(pts))
    assert doc["phases"][1]["verdict"]["subclass"] == "loss off"
    assert doc["phases"][1]["verdict"]["evidence"]["eval_loss_rel_diff"] == pytest.approx(0.3)
    assert "(30.0% from FP32)" in doc["phases"][1]["verdict"]["evidence_text"]
    assert doc["verdict"]["subclass"] == "no amp gain"  # the fast mode's loss is off: no clean win
    assert amp_lesson.analyze(_doc([_pt("bf16", 8.0, 2.0)]))["verdict"] is None
