"""Shared by the corpus programs (bench/gpu/corpus_gpu.sh): a timed loop, and the ground truth of a run.

The ground truth is independent of gputop: a torch.profiler pass over a few steps after the timed loop
(the kernel-time breakdown: how long the GPU ran kernels per step, how long the kernels are, what share of
kernel time is GEMM/convolution/attention, how long the step waited for the DataLoader), or, for CuPy and
JAX programs, the construction (what the program was built to stress). It is written as JSON to
``--truth FILE``: {"label", "by", "busy", "gemm_share", "kernels_per_s", "mean_kernel_us", "loop", ...}.

The profiler slows the CPU side of a step (it records every op and launch: GPT-2's training step takes 4x
as long under it, a compiled MLP's 2.2x), so the wall time of the profiled steps is not the program's. The
GPU's busy share is therefore the profiled kernel time per step over the step time of the timed loop
without the profiler (``step_s``: the loop's seconds, its final sync included, over its steps); the kernel
rate likewise. (The first corpus run, 2026-11-23 on an H100, divided by the profiled wall time: a GPT-2
training step and a compiled MLP, both 90%+ busy, came out 22% and 42% "busy" and were labelled
input-starved although their data is a tensor already on the GPU.)

Rules of the profiler label (in order; ``label_from_profile``, gputop/evaluate/corpus_truth.py):
  tiny kernels (mean < 30 us) launched often (> 2000/s),
  with the GPU running kernels under 60% of the step             -> latency-bound (launch overhead)
  kernels run under 10% of the step                              -> host-bound (the CPU is the work)
  kernels run under 60% of the step, and the step waits for a
  host input pipeline (a DataLoader) more than 5% of the step
  (PyTorch profiler's DataLoader rule)                           -> input-starved
  kernels run under 60% of the step otherwise                    -> host-bound (CPU-side overhead)
  GEMM/conv/attention >= 50% of the kernel time                  -> compute-bound
  otherwise (elementwise, normalisation, copies dominate)        -> memory-bound
A program with its data already on the GPU (no input pipeline) cannot be input-starved.

``loop``: [start, end] of the timed loop in seconds since the program's process started (the trace's
"started" mark is its spawn): ``python -m gputop.evaluate.corpus_truth`` marks that stretch ``steady loop
expect=<label>`` in the trace, the labelled window of the calibration and tests/test_classify_traces.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout's gputop (gputop.evaluate is not installed)

from gputop.evaluate.corpus_truth import label_from_profile  # noqa: E402

GEMM = re.compile(r"gemm|xmma|cutlass|wgmma|matmul|cublas|conv|implicit_|dgrad|wgrad|fprop|flash|fmha|sm\d\d_|nvjet",
                  re.I)
DATALOADER = "enumerate(DataLoader)"  # the record_function name DataLoader's __next__ runs under
LOOP: dict = {}  # what the timed loop measured (filled by loop())


def args(description: str, **extra) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the steady loop runs")
    ap.add_argument("--truth", default=None, help="write the ground truth (JSON) here")
    for name, (kind, default, help_) in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=help_)
    return ap.parse_args()


def since_start() -> float | None:
    """Seconds since this process started (None if unknown)."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - psutil missing: the trace gets no loop marks
        return None


def loop(step, seconds: float, sync=None) -> int:
    """Call ``step()`` for ``seconds``, then ``sync()``; returns the number of steps. Fills ``LOOP``."""
    t_start, t0 = since_start(), time.perf_counter()
    n, end = 0, time.monotonic() + seconds
    ends = LOOP["step_ends"] = []  # Unix times: throughput in and out of a profiler window (issue 27)
    while time.monotonic() < end:
        step()
        n += 1
        ends.append(round(time.time(), 4))
    if sync:
        sync()
    wall = time.perf_counter() - t0
    LOOP.update(steps=n, step_s=wall / n if n else None,
                loop=[round(t_start, 3), round(t_start + wall, 3)] if t_start is not None else None)
    return n


def profile_truth(step, steps: int, path: str | None, input_pipeline: str | None = None, warmup: int = 0,
                  sync=None) -> dict:
    """Run ``steps`` steps under torch.profiler and label the run from its kernel-time breakdown, with the
    step time of the timed loop (``loop()`` ran first). ``input_pipeline``: what feeds the steps from the
    host ("DataLoader(workers=8)"), None when the data is already on the GPU. ``warmup``: steps first under
    torch.profiler's schedule (the profiler set up, nothing kept), ``sync()`` (a job's ranks: a barrier) at the
    last of them, so that the ranks record the same steps from the same moment: without it, a rank whose profiler
    set up faster counted its wait in the collective for its peer's (2 H100s, 2026-11-27: tensor parallel's rank 1
    read 100% NCCL over 20 steps that took it 5 s, against 50% for rank 0)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.cuda.synchronize()
    kw = {"schedule": schedule(wait=0, warmup=warmup, active=steps, repeat=1)} if warmup else {}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kw) as prof:
        for i in range(warmup):
            step()
            if i == warmup - 1:
                torch.cuda.synchronize()
                if sync is not None:
                    sync()
            prof.step()
        t0 = time.perf_counter()
        for i in range(steps):
            step()
            if i == steps - 1:
                torch.cuda.synchronize()
            if warmup:
                prof.step()
    wall_us = (time.perf_counter() - t0) * 1e6
    kernel_us, gemm_us, count, top, data_us, every = 0.0, 0.0, 0, {}, 0.0, {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False):
            name = e.name
            if name.startswith(("Memcpy", "Memset")) or "cudaMemcpy" in name:
                continue
            us = float(e.time_range.elapsed_us())
            kernel_us += us
            count += 1
            every.setdefault(name, [0, 0.0])
            every[name][0] += 1
            every[name][1] += us
            top[name[:60]] = top.get(name[:60], 0.0) + us
            if GEMM.search(name):
                gemm_us += us
        elif e.name.startswith(DATALOADER):
            data_us += float(e.time_range.elapsed_us())
    step_s = LOOP.get("step_s") or wall_us / 1e6 / steps  # no timed loop: the profiled steps' own wall time
    kernel_s = kernel_us / 1e6 / steps
    truth = {
        "by": "torch.profiler", "pid": os.getpid(), "steps": steps, "profiled_wall_s": round(wall_us / 1e6, 3),
        "kernel_s_per_step": round(kernel_s, 6), "step_s": round(step_s, 6), "loop_steps": LOOP.get("steps"),
        "busy": round(min(1.0, kernel_s / step_s), 3) if step_s else 0.0,
        "gemm_share": round(gemm_us / kernel_us, 3) if kernel_us else 0.0,
        "mean_kernel_us": round(kernel_us / count, 1) if count else 0.0,
        "kernels_per_s": round(count / steps / step_s, 1) if step_s else 0.0,
        "input_pipeline": input_pipeline,
        "data_wait_share": round(data_us / wall_us, 3) if input_pipeline and wall_us else None,
        "loop": LOOP.get("loop"),
        "top_kernels": sorted(top.items(), key=lambda x: -x[1])[:5],
        "kernels": [{"name": k, "count": c, "device_us": round(us, 3)} for k, (c, us) in every.items()],
        "step_ends": LOOP.get("step_ends"),
    }
    truth["label"] = label_from_profile(truth["busy"], truth["gemm_share"], truth["mean_kernel_us"],
                                        truth["kernels_per_s"], truth["data_wait_share"])
    write(truth, path)
    return truth


def construction_truth(label: str, why: str, path: str | None) -> dict:
    truth = {"by": "construction", "label": label, "why": why, "loop": LOOP.get("loop"),
             "loop_steps": LOOP.get("steps"), "step_ends": LOOP.get("step_ends")}
    write(truth, path)
    return truth


def write(truth: dict, path: str | None) -> None:
    print("truth:", json.dumps({k: v for k, v in truth.items() if k not in ("kernels", "step_ends")}), flush=True)
    if path:
        with open(path, "w") as f:
            json.dump(truth, f, indent=1)
