"""Shared by the corpus programs (bench/corpus_gpu.sh): a timed loop, and the ground truth of a run.

The ground truth is independent of gputop: a torch.profiler pass over a few steps at the end of the run
(the kernel-time breakdown: how much of the wall time the GPU ran kernels, how long the kernels are, what
share of kernel time is GEMM/convolution/attention), or, for CuPy and JAX programs, the construction
(what the program was built to stress). It is written as JSON to ``--truth FILE``:
{"label", "by", "busy", "gemm_share", "kernels_per_s", "mean_kernel_us", ...}.

Rules of the profiler label (in order):
  tiny kernels (mean < 30 us) launched often (> 2000/s),
  with the GPU running kernels under 60% of the wall time -> latency-bound
  kernels run under 10% of the wall time                   -> host-bound (the program keeps the CPU busy)
  kernels run under 60% of the wall time                   -> input-starved
  GEMM/conv/attention >= 50% of the kernel time            -> compute-bound
  otherwise (elementwise, normalisation, copies dominate)  -> memory-bound
"""

from __future__ import annotations

import argparse
import json
import re
import time

GEMM = re.compile(r"gemm|xmma|cutlass|wgmma|matmul|cublas|conv|implicit_|dgrad|wgrad|fprop|flash|fmha|sm\d\d_", re.I)


def args(description: str, **extra) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the steady loop runs")
    ap.add_argument("--truth", default=None, help="write the ground truth (JSON) here")
    for name, (kind, default, help_) in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=help_)
    return ap.parse_args()


def loop(step, seconds: float, sync=None) -> int:
    """Call ``step()`` for ``seconds``; returns the number of steps."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        step()
        n += 1
    if sync:
        sync()
    return n


def label_from_profile(busy: float, gemm_share: float, mean_kernel_us: float, kernels_per_s: float) -> str:
    if mean_kernel_us < 30 and kernels_per_s > 2000 and busy < 0.60:
        return "latency-bound"
    if busy < 0.10:
        return "host-bound"
    if busy < 0.60:
        return "input-starved"
    return "compute-bound" if gemm_share >= 0.5 else "memory-bound"


def profile_truth(step, steps: int, path: str | None) -> dict:
    """Run ``steps`` steps under torch.profiler and label the run from its kernel-time breakdown."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    wall_us = (time.perf_counter() - t0) * 1e6
    kernel_us, gemm_us, count, top = 0.0, 0.0, 0, {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False):
            name = e.name
            if name.startswith(("Memcpy", "Memset")) or "cudaMemcpy" in name:
                continue
            us = float(e.time_range.elapsed_us())
            kernel_us += us
            count += 1
            top[name[:60]] = top.get(name[:60], 0.0) + us
            if GEMM.search(name):
                gemm_us += us
    busy = min(1.0, kernel_us / wall_us) if wall_us else 0.0
    truth = {
        "by": "torch.profiler", "steps": steps, "wall_s": round(wall_us / 1e6, 3), "busy": round(busy, 3),
        "gemm_share": round(gemm_us / kernel_us, 3) if kernel_us else 0.0,
        "mean_kernel_us": round(kernel_us / count, 1) if count else 0.0,
        "kernels_per_s": round(count / (wall_us / 1e6), 1) if wall_us else 0.0,
        "top_kernels": sorted(top.items(), key=lambda x: -x[1])[:5],
    }
    truth["label"] = label_from_profile(truth["busy"], truth["gemm_share"], truth["mean_kernel_us"],
                                        truth["kernels_per_s"])
    write(truth, path)
    return truth


def construction_truth(label: str, why: str, path: str | None) -> dict:
    truth = {"by": "construction", "label": label, "why": why}
    write(truth, path)
    return truth


def write(truth: dict, path: str | None) -> None:
    print("truth:", json.dumps(truth), flush=True)
    if path:
        with open(path, "w") as f:
            json.dump(truth, f, indent=1)
