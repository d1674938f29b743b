"""The amp lesson (``workloads/amp.py``): its run's verdicts (:func:`analyze`, gputop runs it on the run
document) and its tour sentence.

Every mode trains the same matmul-heavy model, so every verdict is "compute-bound"; the subclass says
what the mode showed: which pipe did the math, or why the mode's speed does not count.
"""

from __future__ import annotations

import math

from gputop.analysis.verdict import Verdict
from gputop.lessons.docs import (
    is_number, phase_points, phase_window, points_with, tele, tele_numbers, tele_text, throttle_warnings)
from gputop.lessons.figures import Bars

# gputop --tour: what to look at while this workload runs
TOUR = "Step time per precision: FP32 leaves the tensor cores idle; TF32/bf16/fp16 use them (1: Tensor active)."

FAST = 1.5  # a mode this much faster than strict FP32 is using the tensor cores


def classify_point(pt: dict, tol: float) -> str:
    """The subclass of one mode's compute-bound verdict."""
    if not pt.get("loss_finite", True):
        return "loss not finite"
    if pt.get("eval_loss_rel_diff") is not None and pt["eval_loss_rel_diff"] > tol:
        return "loss off"
    if pt["phase"] == "fp32-strict":
        return "fp32"
    s = pt.get("speedup_vs_fp32_strict")
    if s is None:
        return "no baseline"
    return "tensor" if s >= FAST else "no amp speedup"


ADVICE = {
    "fp32": "strict FP32 leaves the tensor cores idle: allow TF32 or train with autocast",
    "tensor": "keep it: the matmuls run on the tensor cores",
    "no amp speedup": "little gain: the model is not matmul-bound here, or the device has no fast path for this type",
    "loss off": "the loss drifted from FP32's: check for overflow (fp16 needs GradScaler), keep norms in FP32",
    "loss not finite": "the loss overflowed: use bf16, or fp16 with GradScaler",
    "no baseline": "run fp32-strict too to see the speed-up",
}


def analyze(doc: dict) -> dict:
    tol = (doc.get("params") or {}).get("loss_tol", 0.10)
    by_phase = phase_points(doc)
    for ph in doc.get("phases") or []:
        pts = by_phase.get(ph.get("name"))
        if not pts:
            continue
        pt = pts[-1]
        sub = classify_point(pt, tol)
        ev = {"step_ms": pt["step_ms"], "samples_per_s": pt["samples_per_s"]}
        text = f"{pt['step_ms']:.1f} ms/step, {pt['samples_per_s']:.1f} samples/s"
        if pt.get("speedup_vs_fp32_strict") is not None and pt["phase"] != "fp32-strict":
            ev["speedup_vs_fp32_strict"] = pt["speedup_vs_fp32_strict"]
            text += f", {pt['speedup_vs_fp32_strict']:.2f}x strict FP32"
        if pt.get("peak_mem_gb") is not None:
            ev["peak_mem_gb"] = pt["peak_mem_gb"]
            text += f", peak memory {pt['peak_mem_gb']:.2f} GB"
        ev["eval_loss"] = pt["eval_loss"] if math.isfinite(pt["eval_loss"]) else None
        text += f", eval loss {pt['eval_loss']:.4g}"
        if pt.get("eval_loss_rel_diff") is not None and pt["phase"] != "fp32-strict":
            ev["eval_loss_rel_diff"] = pt["eval_loss_rel_diff"]
            text += f" ({100 * pt['eval_loss_rel_diff']:.1f}% from FP32)"
        text += (f"; TF32 matmul {'on' if pt.get('matmul_allow_tf32') else 'off'}, "
                 f"cuDNN {'on' if pt.get('cudnn_allow_tf32') else 'off'}")
        if tele_text(ph):
            ev.update(tele_numbers(ph))
            text += "; GPU " + tele_text(ph)
        ph["verdict"] = Verdict("compute-bound", sub, None, ev, text, ADVICE[sub], **phase_window(ph)).to_dict()
    throttle_warnings(doc)
    pts = {q["phase"]: q for v in by_phase.values() for q in v}
    base = pts.get("fp32-strict")
    amp = [pts[m] for m in ("bf16", "fp16") if m in pts]
    if not base or not amp:
        doc["verdict"] = None
        return doc
    best = max(amp, key=lambda q: q.get("speedup_vs_fp32_strict") or 0)
    s = best.get("speedup_vs_fp32_strict") or 0
    speedups = {q["phase"]: q["speedup_vs_fp32_strict"] for q in pts.values()
                if q["phase"] != "fp32-strict" and q.get("speedup_vs_fp32_strict")}
    ev = {"fp32_strict_step_ms": base["step_ms"], **{f"{mode}_speedup": x for mode, x in speedups.items()}}
    text = (f"step time vs strict FP32 ({base['step_ms']:.1f} ms): "
            + ", ".join(f"{mode} {x:.2f}x" for mode, x in speedups.items()))
    tensor = [tele(ph, "tensor_pct") for ph in doc.get("phases") or [] if ph.get("name") == best["phase"]]
    base_tensor = [tele(ph, "tensor_pct") for ph in doc.get("phases") or [] if ph.get("name") == "fp32-strict"]
    if tensor and tensor[0] is not None and base_tensor and base_tensor[0] is not None:
        ev["fp32_strict_tensor_pct"], ev[f"{best['phase']}_tensor_pct"] = base_tensor[0], tensor[0]
        text += f"; tensor activity {base_tensor[0]:.0f}% -> {tensor[0]:.0f}%"
    bad = [q["phase"] for q in pts.values() if classify_point(q, tol) in ("loss off", "loss not finite")]
    if bad:
        text += f"; loss off in {', '.join(bad)}"
    if s >= FAST and best["phase"] not in bad:
        advice = (f"train with torch.autocast(dtype=torch.{best['amp_dtype']}) "
                  + ("and a GradScaler" if best["phase"] == "fp16" else "(no GradScaler needed)")
                  + "; at least allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True) for the FP32 parts")
        doc["verdict"] = Verdict("compute-bound", "amp speedup", None, ev, text, advice).to_dict()
    else:
        advice = "AMP did not pay off here: the model is small or not matmul-bound, or the device lacks tensor cores"
        if bad:
            advice += f"; and the loss was off in {', '.join(bad)}"
        doc["verdict"] = Verdict("compute-bound", "no amp gain", None, ev, text, advice).to_dict()
    return doc


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Bars]:
    """Samples/s of each precision, its speed-up over strict FP32 under the bar."""
    pts = points_with(doc, "samples_per_s")
    if not pts:
        return []
    labels = [str(q["phase"]) + (f" x{q['speedup_vs_fp32_strict']:.2f}"
                                 if is_number(q.get("speedup_vs_fp32_strict"), True) else "") for q in pts]
    return [Bars("training samples/s per precision (x speed-up over fp32-strict)", "samples/s", labels,
                 [("samples/s", [q["samples_per_s"] for q in pts])])]
