"""Shared by the multi-GPU corpus programs (bench/gpu/corpus_multi_gpu.sh): one process a GPU under torchrun, and the
ground truth of a run, written by rank 0 (or by every rank, ``--truth DIR/rank{r}.json``) as JSON.

The ground truth does not come from gputop: torch.profiler's kernel-time breakdown over a few steps after the timed
loop (the NCCL share of kernel time, the GEMM/conv share), or the construction (a rank that leaves, a rank given
twice the work), with the times (seconds since the process started) at which the program did what it was built to do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

for var, val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    if os.environ.get(var) != val:
        raise SystemExit(f"{var} must be {val} (NVLink multicast stays off)")

GEMM = re.compile(r"gemm|xmma|cutlass|wgmma|matmul|cublas|conv|implicit_|dgrad|wgrad|fprop|flash|fmha|sm\d\d_|nvjet", re.I)
NCCL = re.compile(r"nccl", re.I)


def args(description: str, **extra) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seconds", type=float, default=20.0, help="how long the steady loop runs")
    ap.add_argument("--truth", default=None, help="write the ground truth (JSON) here; {rank} is replaced")
    for name, (kind, default, help_) in extra.items():
        ap.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=help_)
    return ap.parse_args()


def since_start() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


def init():
    """(torch, dist, rank, world) with this rank's GPU set."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    return torch, dist, rank, dist.get_world_size()


def timed_loop(step, seconds: float, dist, sync) -> dict:
    """Steps for ``seconds`` (the ranks agree when to stop: rank 0's clock, broadcast every step), then sync."""
    import torch

    t_start, t0, n = since_start(), time.perf_counter(), 0
    stop = torch.zeros(1, device="cuda")
    end = time.monotonic() + seconds
    while True:
        step()
        n += 1
        if dist.get_rank() == 0:
            stop.fill_(1.0 if time.monotonic() >= end else 0.0)
        dist.broadcast(stop, 0)
        if stop.item():
            break
    sync()
    wall = time.perf_counter() - t0
    return {"steps": n, "step_s": wall / n, "loop": [round(t_start, 3), round(t_start + wall, 3)]}


def profile(step, steps: int, sync) -> dict:
    """torch.profiler's kernel-time breakdown over ``steps`` steps: NCCL, GEMM/conv and other shares. Every rank must
    call it (the steps hold collectives)."""
    from torch.profiler import ProfilerActivity, profile as prof

    sync()
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(steps):
            step()
        sync()
    return shares(p, steps)


def shares(p, steps: int) -> dict:
    """The kernel-time breakdown of a finished torch.profiler ``p`` that covered ``steps`` steps."""
    total = nccl = gemm = 0.0
    top: dict[str, float] = {}
    averages = p.key_averages()
    host = {e.key for e in averages if e.device_type.name != "CUDA"}
    for e in averages:
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if not t or e.device_type.name != "CUDA":
            continue
        if getattr(e, "is_user_annotation", False) or e.key in host:  # record_function ranges on the GPU
            continue  # ("nccl:all_reduce", "Optimizer.step#SGD.step"): spans over kernels, not kernels
        total += t
        if NCCL.search(e.key):
            nccl += t
        elif GEMM.search(e.key):
            gemm += t
        top[e.key[:80]] = top.get(e.key[:80], 0.0) + t
    return {"profiled_steps": steps, "kernel_us_per_step": total / steps,
            "nccl_share": nccl / total if total else None, "gemm_share": gemm / total if total else None,
            "top_kernels": sorted(top.items(), key=lambda kv: -kv[1])[:8]}


def write_truth(a, rank: int, truth: dict) -> None:
    if not a.truth:
        return
    path = a.truth.replace("{rank}", str(rank))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({"rank": rank, **truth}, f, indent=1)


def run_and_profile(a, dist, rank: int, case: str, step, warmup: int, profiled: int, otherwise: str) -> None:
    """The corpus' usual run: ``warmup`` steps, the timed loop, then ``profiled`` steps under torch.profiler (every
    rank, since the steps hold collectives, and each keeps its own); rank 0's truth is labelled comms-bound when NCCL has at least half of
    the kernel time, else ``otherwise``. Every rank writes its truth; the process group is closed."""
    import torch

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    truth = {"case": case, "by": "torch.profiler", **timed_loop(step, a.seconds, dist, torch.cuda.synchronize)}
    truth.update(profile(step, profiled, torch.cuda.synchronize))  # each rank's own breakdown (--profile's windows)
    if rank == 0:
        truth["label"] = "comms-bound" if truth["nccl_share"] and truth["nccl_share"] >= 0.5 else otherwise
    write_truth(a, rank, truth)
    dist.destroy_process_group()
