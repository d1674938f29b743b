"""batchsize: a batch-size sweep from 1 until the GPU runs out of memory (or a cap).

One CNN trains a few steps at each batch size (powers of two, or a given list). A step costs a
fixed amount of host work (launching a few hundred kernels) plus work that grows with the batch:
at small batches the fixed part dominates, so the step time hardly changes and samples/s doubles
with each doubling (latency/launch-bound); at large batches the step time doubles too and samples/s
flattens (compute-bound). The sweep reports the knee, the smallest batch within 95% of the best
throughput (Lightning's batch-size finder returns only the largest batch that fits), and the
out-of-memory boundary: the OOM is caught, the memory is given back, and the sweep ends cleanly.

Per batch size: samples/s and step latency (median of the timed steps, each synchronized), peak memory
(torch.cuda.max_memory_allocated); the SM activity of each batch size's phase comes from gputop's telemetry.

Run it: ``python workloads/batchsize.py`` (or ``--device cpu --quick``), or ``gputop --run batchsize``.
``--param mem_fraction=0.2`` caps the memory this process may use, to reach the OOM sooner.
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.analysis.verdict import Verdict
from gputop.workload_api import Param, ParamError, is_oom, main, require_torch
from gputop.workload_util import (noise_check, phase_points, phase_window, small_cnn, tele, tele_numbers, tele_text,
                                  tf32_flags, throttle_warnings, torch_device)

NAME = "batchsize"
DESCRIPTION = "batch-size sweep until OOM: throughput knee, latency- vs compute-bound, OOM boundary"
NEEDS = ["torch"]
TIMEOUT = 600

PARAMS = [
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where the model trains"),
    Param("batches", "str", "auto", help="comma-separated batch sizes, or auto: powers of two from 1 to max_batch"),
    Param("max_batch", "int", 1 << 16, lo=1, hi=1 << 24, help="the cap of the sweep"),
    Param("width", "int", 64, lo=1, hi=1024, help="channels of the CNN's first stage"),
    Param("blocks", "int", 4, lo=1, hi=64, help="conv blocks per stage (3 stages)"),
    Param("size", "int", 64, lo=8, hi=1024, help="image side"),
    Param("min_seconds", "float", 0.5, lo=0.0, hi=600.0, help="timed steps per batch size last at least this long"),
    Param("min_steps", "int", 3, lo=1, hi=100000, help="and are at least this many"),
    Param("warmup", "int", 2, lo=0, hi=1000, help="untimed steps per batch size"),
    Param("max_step_s", "float", 10.0, lo=0.001, hi=3600.0,
          help="stop the sweep when one step takes longer than this (the time budget)"),
    Param("mem_fraction", "float", 0.0, lo=0.0, hi=1.0,
          help="cap this process's share of GPU memory (0: no cap), to reach the OOM sooner"),
    Param("seed", "int", 0, lo=0, help="seed of the model and the data"),
]
QUICK = {"min_seconds": 0.15, "min_steps": 2, "warmup": 1, "mem_fraction": 0.25}
CPU = {"max_batch": 16, "width": 4, "blocks": 1, "size": 16, "min_seconds": 0.05, "min_steps": 3, "warmup": 2}

CLASSES = 10
KNEE_FRACTION = 0.95


def batch_sizes(p: dict) -> list[int]:
    text = str(p["batches"]).strip()
    if text == "auto":
        out, b = [], 1
        while b <= p["max_batch"]:
            out.append(b)
            b *= 2
        return out
    try:
        sizes = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        raise ParamError(f"bad value for parameter 'batches': {text!r} (allowed: auto, or comma-separated "
                         "integers >= 1)")
    return sizes


def run(p: dict, emit) -> None:
    torch = require_torch()
    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    torch.manual_seed(p["seed"])
    if cuda and p["mem_fraction"] > 0:
        torch.cuda.set_per_process_memory_fraction(p["mem_fraction"], dev)
        info["mem_fraction"] = p["mem_fraction"]
    emit.started(NAME, p, info)
    sizes = batch_sizes(p)
    model = small_cnn(torch, p["width"], CLASSES, p["blocks"]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    params = sum(t.numel() for t in model.parameters())
    emit.result({"tf32_flags": tf32_flags(torch), "model_params": params, "sizes_planned": sizes,
                 "memory_total_gb": info.get("memory_bytes", 0) / 1e9 if cuda else None})
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def measure(b: int) -> dict:
        x = torch.randn(b, 3, p["size"], p["size"], device=dev)
        y = torch.randint(0, CLASSES, (b,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        for _ in range(p["warmup"]):
            step()
        times = []
        sync()
        t_all = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            step()
            sync()  # a step's latency, as a training loop that reads its loss each step would see it
            times.append(time.perf_counter() - t0)
            if times[-1] > p["max_step_s"]:
                break
            if len(times) >= p["min_steps"] and time.perf_counter() - t_all >= p["min_seconds"]:
                break
            if emit.should_stop():
                break
        step_s = statistics.median(times)  # robust to a stray slow step
        noise = noise_check(emit, f"batch {b} step time", times)
        return {"batch": b, "samples_per_s": b / step_s, "step_ms": 1e3 * step_s,
                "step_ms_mean": 1e3 * sum(times) / len(times), "step_ms_min": 1e3 * min(times),
                "peak_mem_gb": torch.cuda.max_memory_allocated(dev) / 1e9 if cuda else None,
                "steps": len(times), "step_ms_rms_pct": noise["rms_pct"], "oom": False}

    def free() -> dict:
        opt.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            return {"mem_allocated_after_free_gb": torch.cuda.memory_allocated(dev) / 1e9,
                    "mem_reserved_after_free_gb": torch.cuda.memory_reserved(dev) / 1e9}
        return {}

    points: list[dict] = []
    try:
        end = sweep(sizes, measure, free, emit, p["max_step_s"], points)
    except Exception:
        emit.result(summarize(points, {"reason": "error"}, max(sizes)))  # what was measured before the error
        raise
    emit.result(summarize(points, end, max(sizes)))


def out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, or a library that failed to allocate its workspace."""
    return is_oom(exc) or "ALLOC_FAILED" in str(exc)


def sweep(sizes: list[int], measure, free, emit, max_step_s: float, points: list[dict]) -> dict:
    """Measure each batch size in turn until an OOM, the time budget, a stop request, or the end.

    ``measure(b)`` returns a point or raises; an out-of-memory error ends the sweep with an OOM point
    after ``free()`` gave the memory back; any other error propagates. The points are appended to
    ``points``; returns how the sweep ended: {"reason": "oom" | "cap" | "time" | "interrupted", ...}.
    """
    end = {"reason": "cap"}
    for k, b in enumerate(sizes):
        if emit.should_stop():
            end = {"reason": "interrupted"}
            break
        emit.progress(k, len(sizes), f"batch {b}")
        emit.phase(f"batch={b}")
        oom_message = None
        try:
            pt = measure(b)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled here
            if not out_of_memory(exc):
                raise
            oom_message = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        if oom_message is not None:  # outside the except block: the traceback no longer pins the tensors
            pt = {"phase": f"batch={b}", "batch": b, "oom": True, "error": oom_message, **free()}
            points.append(pt)
            emit.point(pt)
            emit.warning(f"out of memory at batch {b}: the sweep ends here (memory freed)", code="oom")
            end = {"reason": "oom", "oom_batch": b}
            break
        pt = {"phase": f"batch={b}", **pt}
        points.append(pt)
        emit.point(pt)
        if pt["step_ms"] / 1e3 > max_step_s:
            end = {"reason": "time", "slow_batch": b}
            emit.warning(f"batch {b}: a step took {pt['step_ms'] / 1e3:.1f} s > max_step_s; the sweep ends here",
                         code="time_cap")
            break
    emit.progress(len(sizes), len(sizes), "done")
    return end


def knee(points: list[dict], fraction: float = KNEE_FRACTION) -> dict | None:
    """The smallest batch whose samples/s is within ``fraction`` of the best."""
    ok = [q for q in points if not q.get("oom") and q.get("samples_per_s")]
    if not ok:
        return None
    best = max(ok, key=lambda q: q["samples_per_s"])
    first = min((q for q in ok if q["samples_per_s"] >= fraction * best["samples_per_s"]), key=lambda q: q["batch"])
    return {"knee_batch": first["batch"], "knee_samples_per_s": first["samples_per_s"],
            "best_batch": best["batch"], "best_samples_per_s": best["samples_per_s"], "fraction": fraction}


def summarize(points: list[dict], end: dict, cap: int) -> dict:
    ok = [q for q in points if not q.get("oom")]
    out = {"knee": knee(points), "end": end["reason"], "largest_fit": max((q["batch"] for q in ok), default=None),
           "oom_batch": end.get("oom_batch"), "cap": cap}
    if end["reason"] == "oom":
        out["oom_boundary"] = f"fits at {out['largest_fit']}, out of memory at {end['oom_batch']}"
    elif end["reason"] == "cap":
        out["oom_boundary"] = f"no OOM below the cap ({cap})"
    elif end["reason"] == "error":
        out["oom_boundary"] = "the sweep failed before an OOM"
    elif end["reason"] == "time":
        out["oom_boundary"] = f"no OOM before the time budget stopped the sweep at {end['slow_batch']}"
    else:
        out["oom_boundary"] = "interrupted before an OOM"
    mem = [(q["batch"], q["peak_mem_gb"]) for q in ok if q.get("peak_mem_gb") is not None]
    if len(mem) >= 2 and mem[-1][0] > mem[-2][0]:
        (b1, m1), (b2, m2) = mem[-2], mem[-1]
        out["peak_mem_gb_per_sample"] = (m2 - m1) / (b2 - b1)
    return out


# -- the verdict (in the gputop process, after the run) -------------------------------------------------

# Each batch is judged by what the next larger batch buys (per doubling of the batch):
LATENCY_GAIN = 1.6  # >= 1.6x the samples/s per doubling: the step's fixed cost (launches) dominates here
SATURATED_GAIN = 1.1  # <= 1.1x per doubling: the GPU is full; a larger batch buys latency and memory only


def scaling(ok: list[dict]) -> dict[int, float | None]:
    """batch -> the samples/s gain per doubling from this batch to the next one that fit; the largest
    batch gets the gain that led to it (None when only one batch fit)."""
    gains: dict[int, float | None] = {}
    for a, b in zip(ok, ok[1:]):
        doublings = max(1e-9, math.log2(b["batch"] / a["batch"]))
        gains[a["batch"]] = (b["samples_per_s"] / a["samples_per_s"]) ** (1 / doublings) if a["samples_per_s"] else None
    if ok:
        gains[ok[-1]["batch"]] = gains[ok[-2]["batch"]] if len(ok) > 1 else None
    return gains


def classify_point(pt: dict, best: float, gain: float | None = None) -> tuple[str, str, str]:
    """(class, subclass, advice) of one batch size."""
    if pt.get("oom"):
        return "memory-capacity", "oom", ("this batch does not fit: stay at or below the largest that fits (or use "
                                          "AMP, activation checkpointing, gradient accumulation)")
    eff = pt["samples_per_s"] / best if best else 0.0
    if gain is None:  # a single batch: judge it against the best
        gain = SATURATED_GAIN if eff >= 0.9 else LATENCY_GAIN if eff < 0.5 else (LATENCY_GAIN + SATURATED_GAIN) / 2
    if gain <= SATURATED_GAIN:
        return "compute-bound", "saturated", ("the GPU is saturated: a larger batch buys no throughput, only latency "
                                              "and memory")
    if gain >= LATENCY_GAIN:
        return "latency-bound", "launch", ("the fixed cost of a step (kernel launches, Python) dominates: raise the "
                                           "batch")
    return "latency-bound", "transition", "throughput still rises with the batch, more slowly"


def analyze(doc: dict) -> dict:
    by_phase = phase_points(doc)
    pts = sorted((q for v in by_phase.values() for q in v), key=lambda q: q.get("batch") or 0)
    ok = [q for q in pts if not q.get("oom")]
    best = max((q["samples_per_s"] for q in ok), default=0.0)
    gains = scaling(ok)
    prev = None
    for ph in doc.get("phases") or []:
        got = by_phase.get(ph.get("name"))
        if not got:
            continue
        pt = got[-1]
        cls, sub, advice = classify_point(pt, best, gains.get(pt.get("batch")))
        ev = {"batch": pt["batch"]}
        notes = []
        if pt.get("oom"):
            text = f"batch {pt['batch']} does not fit in the GPU's memory"
            notes.append(pt["error"])
            if pt.get("mem_allocated_after_free_gb") is not None:
                ev["mem_allocated_after_free_gb"] = pt["mem_allocated_after_free_gb"]
                text += f"; after freeing, {pt['mem_allocated_after_free_gb']:.2f} GB still allocated (the model)"
        else:
            ev.update(samples_per_s=pt["samples_per_s"], best_pct=100 * pt["samples_per_s"] / best,
                      step_ms=pt["step_ms"])
            text = (f"batch {pt['batch']}: {pt['samples_per_s']:.0f} samples/s = {ev['best_pct']:.0f}% of the best, "
                    f"step {pt['step_ms']:.2f} ms")
            if prev is not None and not prev.get("oom") and prev["batch"] < pt["batch"]:
                ev.update(step_ratio=pt["step_ms"] / prev["step_ms"], prev_batch=prev["batch"],
                          batch_ratio=pt["batch"] / prev["batch"])
                text += (f" ({ev['step_ratio']:.2f}x the step of batch {prev['batch']}, "
                         f"for {ev['batch_ratio']:.0f}x the samples)")
            if pt.get("peak_mem_gb") is not None:
                ev["peak_mem_gb"] = pt["peak_mem_gb"]
                text += f", peak memory {pt['peak_mem_gb']:.2f} GB"
            if tele_text(ph):
                ev.update(tele_numbers(ph))
                text += "; GPU " + tele_text(ph)
        ph["verdict"] = Verdict(cls, sub, None, ev, text, advice, notes=notes, **phase_window(ph)).to_dict()
        prev = pt
    throttle_warnings(doc)
    res = doc.get("results") or {}
    k = res.get("knee") or knee(pts)
    if not k:
        doc["verdict"] = None
        return doc
    small = ok[0]
    kb = k["knee_batch"]
    ev = {"knee_batch": kb, "knee_samples_per_s": k["knee_samples_per_s"], "knee_fraction": k["fraction"],
          "best_samples_per_s": k["best_samples_per_s"], "best_batch": k["best_batch"],
          "smallest_batch": small["batch"], "smallest_samples_per_s": small["samples_per_s"],
          "smallest_step_ms": small["step_ms"], "smallest_best_pct": 100 * small["samples_per_s"] / best}
    text = (f"knee at batch {kb}: {k['knee_samples_per_s']:.0f} samples/s, within {100 * k['fraction']:.0f}% of the "
            f"best {k['best_samples_per_s']:.0f} (batch {k['best_batch']}); batch {small['batch']}: "
            f"{small['samples_per_s']:.0f} samples/s, step {small['step_ms']:.2f} ms "
            f"({ev['smallest_best_pct']:.1f}% of the best)")
    sm = {ph["name"]: tele(ph, "sm_active_pct") for ph in doc.get("phases") or []}
    s_small, s_knee = sm.get(small["phase"]), sm.get(f"batch={kb}")
    if s_small is not None and s_knee is not None:
        ev["smallest_sm_active_pct"], ev["knee_sm_active_pct"] = s_small, s_knee
        text += f"; SM active {s_small:.0f}% at batch {small['batch']} vs {s_knee:.0f}% at the knee"
    subclasses = {q["batch"]: classify_point(q, best, gains.get(q["batch"]))[1] for q in ok}
    last_latency = max((b for b, c in subclasses.items() if c == "launch"), default=None)
    first_full = min((b for b, c in subclasses.items() if c == "saturated"), default=None)
    if first_full is not None:
        ev["first_compute_batch"], ev["saturated_gain"] = first_full, SATURATED_GAIN
        text += f"; throughput gains under {SATURATED_GAIN:.1f}x per doubling from batch {first_full}"
    if res.get("end") == "oom":
        ev["largest_fit_batch"], ev["oom_batch"] = res["largest_fit"], res["oom_batch"]
        text += f"; memory: fits at {res['largest_fit']}, out of memory at {res['oom_batch']}"
    notes = [f"memory: {res['oom_boundary']}"] if res.get("oom_boundary") and res.get("end") != "oom" else []
    mixed = []
    if last_latency is None and first_full == small["batch"]:
        cls, sub = "compute-bound", "at every batch size"
        advice = "even the smallest batch fills the GPU: pick the batch for convergence, not speed"
    elif first_full is None:
        ev["last_latency_batch"] = last_latency or ok[-1]["batch"]
        cls, sub = "latency-bound", f"up to batch {ev['last_latency_batch']}: throughput still rising"
        advice = f"no plateau below batch {ok[-1]['batch']}: raise max_batch to find where it saturates"
    else:
        cls, sub = "compute-bound", f"from batch {first_full}"
        if last_latency:
            ev["last_latency_batch"] = last_latency
            cls, sub = "latency-bound", f"up to batch {last_latency}, compute-bound from batch {first_full}"
            mixed = ["compute-bound"]
        advice = (f"a batch of {first_full} to {kb} fills the GPU (knee {kb}: the smallest within "
                  f"{100 * KNEE_FRACTION:.0f}% of the best); larger batches add latency and memory, not throughput")
    if res.get("end") == "oom":
        advice += f"; batch {res.get('oom_batch')} does not fit: gradient accumulation reaches larger effective batches"
    doc["verdict"] = Verdict(cls, sub, None, ev, text, advice, mixed, notes=notes).to_dict()
    return doc


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
