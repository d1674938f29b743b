"""amp: the same transformer trained in strict FP32, TF32, AMP bf16 and AMP fp16.

Matrix multiplies are where a modern GPU's tensor cores pay off, but only when the math is allowed
to use them. Four modes, each training the same model from the same seed on the same data:

  fp32-strict   TF32 off for matmul and cuDNN: every multiply on the FP32 CUDA cores
  tf32          TF32 on: FP32 tensors, tensor cores with a 10-bit mantissa inside the multiply
  bf16          torch.autocast(bfloat16): matmuls in bf16 on the tensor cores (TF32 off)
  fp16          torch.autocast(float16) with a GradScaler against gradient underflow (TF32 off)

Per mode: step time (CUDA events), samples/s, peak memory, the training loss and an FP32
evaluation loss after the same number of steps (finite, and close to strict FP32's). PyTorch
ships with ``torch.backends.cudnn.allow_tf32 = True``: a "FP32" CNN baseline is really TF32 unless
it is switched off; the flags found at start are in the results.

Run it: ``python workloads/amp.py`` (or ``--device cpu --quick``), or ``gputop --run amp``.
"""

from __future__ import annotations

import gc
import math
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.analysis.verdict import Verdict
from gputop.workload_api import Param, main, require_torch
from gputop.workload_util import (noise_check, phase_points, phase_window, set_tf32, tele, tele_numbers, tele_text,
                                  tf32_flags, throttle_warnings, torch_device)

NAME = "amp"
DESCRIPTION = "AMP vs FP32: strict FP32, TF32, bf16 and fp16 autocast on a transformer"
NEEDS = ["torch"]
TIMEOUT = 600

MODES = ["fp32-strict", "tf32", "bf16", "fp16"]
PARAMS = [
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where the model trains"),
    Param("modes", "str", ",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}"),
    Param("d_model", "int", 1024, lo=8, hi=16384, help="model width"),
    Param("heads", "int", 16, lo=1, hi=256, help="attention heads (d_model must divide by it)"),
    Param("layers", "int", 4, lo=1, hi=128, help="transformer blocks"),
    Param("seq", "int", 512, lo=1, hi=65536, help="sequence length"),
    Param("batch", "int", 16, lo=1, hi=65536, help="sequences per step"),
    Param("steps", "int", 60, lo=1, hi=100000, help="timed training steps per mode"),
    Param("warmup", "int", 5, lo=0, hi=1000, help="untimed steps first (they train too: loss is after warmup+steps)"),
    Param("lr", "float", 3e-4, lo=0.0, hi=1.0, help="AdamW learning rate"),
    Param("loss_tol", "float", 0.10, lo=0.0, hi=10.0,
          help="relative difference from strict FP32's evaluation loss that is flagged"),
    Param("seed", "int", 0, lo=0, help="seed of the model and the data"),
]
QUICK = {"steps": 12, "warmup": 3, "layers": 2}
CPU = {"modes": "fp32-strict,bf16", "d_model": 64, "heads": 4, "layers": 2, "seq": 32, "batch": 4,
       "steps": 8, "warmup": 2}

N_BATCHES = 4  # distinct training batches, cycled


def parse_modes(text: str) -> list[str]:
    from gputop.workload_api import ParamError

    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ParamError(f"bad value for parameter 'modes': {text!r} (allowed: comma-separated {', '.join(MODES)})")
    if "fp32-strict" in modes:  # the baseline runs first
        modes.remove("fp32-strict")
        modes.insert(0, "fp32-strict")
    return modes


def build(torch, p, dev):
    """The model (seeded) and its data: regress a fixed random nonlinear map of the input."""
    nn = torch.nn
    torch.manual_seed(p["seed"])
    d = p["d_model"]
    layer = nn.TransformerEncoderLayer(d, p["heads"], dim_feedforward=4 * d, dropout=0.0, batch_first=True,
                                       norm_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, p["layers"], enable_nested_tensor=False),
                          nn.Linear(d, d)).to(dev)
    g = torch.Generator(device=dev).manual_seed(p["seed"] + 1)
    shape = (p["batch"], p["seq"], d)
    proj = torch.randn(d, d, device=dev, generator=g) / math.sqrt(d)
    xs = [torch.randn(shape, device=dev, generator=g) for _ in range(N_BATCHES + 1)]
    with torch.no_grad():
        ys = [torch.tanh(x @ proj) for x in xs]
    return model, list(zip(xs[:-1], ys[:-1])), (xs[-1], ys[-1])


def run(p: dict, emit) -> None:
    torch = require_torch()
    from gputop.workload_api import ParamError

    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    if p["d_model"] % p["heads"]:
        raise ParamError(f"d_model ({p['d_model']}) must be a multiple of heads ({p['heads']})")
    modes = parse_modes(p["modes"])
    if not cuda:
        skipped = [m for m in modes if m in ("tf32", "fp16")]
        modes = [m for m in modes if m not in skipped]
        for m in skipped:
            emit.warning(f"mode {m} skipped on the CPU device (TF32 and fp16 autocast are GPU features)",
                         code="skipped")
    defaults = tf32_flags(torch)
    emit.started(NAME, p, info)
    tokens = p["batch"] * p["seq"]
    flops = 6 * tokens * p["layers"] * (12 * p["d_model"] ** 2 + 2 * p["seq"] * p["d_model"])
    emit.result({"tf32_defaults": defaults, "modes": modes, "train_flops_per_step": flops,
                 "note": "tf32_defaults: the flags as PyTorch had them before this workload changed them "
                         "(cuDNN's TF32 is on by default: a naive FP32 CNN baseline runs TF32 convolutions)"})

    base = None
    points = []
    for k, mode in enumerate(modes):
        if emit.should_stop():
            break
        emit.progress(k, len(modes), mode)
        emit.phase(mode)
        pt = run_mode(torch, dev, p, mode, emit)
        pt["tflops"] = flops / (pt["step_ms"] / 1e3) / 1e12 if pt["step_ms"] else None
        if base is None and mode == "fp32-strict":
            base = pt
        if base is not None:
            pt["speedup_vs_fp32_strict"] = base["step_ms"] / pt["step_ms"] if pt["step_ms"] else None
            pt["eval_loss_rel_diff"] = rel_diff(pt["eval_loss"], base["eval_loss"])
        if not pt["loss_finite"]:
            emit.warning(f"{mode}: the loss is not finite ({pt['train_loss']})", code="loss_not_finite")
        elif pt.get("eval_loss_rel_diff") is not None and pt["eval_loss_rel_diff"] > p["loss_tol"]:
            emit.warning(f"{mode}: evaluation loss {pt['eval_loss']:.4g} is {100 * pt['eval_loss_rel_diff']:.0f}% "
                         f"away from strict FP32's {base['eval_loss']:.4g}", code="loss_mismatch")
        points.append(pt)
        emit.point(pt)
    emit.progress(len(modes), len(modes), "done")
    if points:
        emit.result({"speedup_vs_fp32_strict": {q["phase"]: q.get("speedup_vs_fp32_strict") for q in points},
                     "eval_loss": {q["phase"]: q["eval_loss"] for q in points},
                     "tf32_flags_after": tf32_flags(torch)})


def rel_diff(a, b):
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b == 0:
        return None
    return abs(a - b) / abs(b)


def run_mode(torch, dev, p, mode, emit) -> dict:
    cuda = dev.type == "cuda"
    set_tf32(torch, False)  # the same targets for every mode: computed in strict FP32
    model, batches, (x_eval, y_eval) = build(torch, p, dev)
    set_tf32(torch, mode == "tf32")
    flags = tf32_flags(torch)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"])
    scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None
    loss_fn = torch.nn.MSELoss()
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        base_mem = torch.cuda.memory_allocated(dev)

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_fn(model(x).float(), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss.detach()

    import time

    for i in range(p["warmup"]):
        step(i)
    times, losses = [], []
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for i in range(p["warmup"], p["warmup"] + p["steps"]):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            losses.append(step(i))
            b.record()
            times.append((a, b))
        else:
            s0 = time.perf_counter()
            losses.append(step(i))
            times.append(time.perf_counter() - s0)
        if emit.should_stop():
            break
    sync()
    wall = time.perf_counter() - t0
    step_s = [a.elapsed_time(b) / 1e3 for a, b in times] if cuda else times
    noise = noise_check(emit, f"{mode} step time", step_s)
    set_tf32(torch, False)  # evaluate every mode the same way: strict FP32
    with torch.no_grad():
        eval_loss = float(loss_fn(model(x_eval).float(), y_eval))
    train_loss = float(losses[-1]) if losses else None
    peak = torch.cuda.max_memory_allocated(dev) if cuda else None
    n = len(step_s)
    out = {
        "phase": mode,
        "step_ms": 1e3 * wall / n if n else None,
        "samples_per_s": n * p["batch"] / wall if wall > 0 else None,
        "peak_mem_gb": peak / 1e9 if peak is not None else None,
        "train_loss": train_loss, "eval_loss": eval_loss,
        "loss_finite": all(math.isfinite(v) for v in (train_loss, eval_loss) if v is not None),
        "first_loss": float(losses[0]) if losses else None,
        "steps_trained": p["warmup"] + n,
        "step_ms_rms_pct": noise["rms_pct"],
        "amp_dtype": str(amp_dtype).replace("torch.", "") if amp_dtype else None,
        "grad_scaler": scaler is not None,
        "matmul_allow_tf32": flags["matmul_allow_tf32"], "cudnn_allow_tf32": flags["cudnn_allow_tf32"],
    }
    if cuda:
        out["model_mem_gb"] = base_mem / 1e9
    if scaler is not None:
        out["grad_scale"] = float(scaler.get_scale())
    return out  # the model and its optimizer go with this frame; the next mode empties the cache first


# -- the verdict (in the gputop process, after the run) -------------------------------------------------
# Every mode trains the same matmul-heavy model, so every verdict is "compute-bound"; the subclass says
# what the mode showed: which pipe did the math, or why the mode's speed does not count.

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


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
