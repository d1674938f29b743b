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

from gputop.workload import Param, ParamError, device_param, main, require_torch
from gputop.workload.util import noise_check, set_tf32, tf32_flags, torch_device

NAME = "amp"
DESCRIPTION = "AMP vs FP32: strict FP32, TF32, bf16 and fp16 autocast on a transformer"
NEEDS = ["torch"]
TIMEOUT = 600

MODES = ["fp32-strict", "tf32", "bf16", "fp16"]
PARAMS = [
    device_param("where the model trains"),
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


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
