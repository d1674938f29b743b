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
import statistics
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.lessons.batchsize import knee  # the knee as its lesson defines it
from gputop.workload import Param, ParamError, device_param, is_oom, main, require_torch
from gputop.workload.util import noise_check, small_cnn, tf32_flags, torch_device

NAME = "batchsize"
DESCRIPTION = "batch-size sweep until OOM: throughput knee, latency- vs compute-bound, OOM boundary"
NEEDS = ["torch"]
TIMEOUT = 600

PARAMS = [
    device_param("where the model trains"),
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


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
