"""Shared by the programs of bench/gpu/attribution_anywhere_gpu.sh (issue 37): a timed loop of one process or of a
job's ranks (the same number of steps on every rank: rank 0 times a warm-up and sends the count), and the ground
truth of a run from the program's own torch.profiler, each rank's (bench/gpu/corpus/_corpus.py's ``profile_truth``:
every kernel's time over its last steps, and each step's end for the throughput in and out of gputop's windows)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "corpus"))

from _corpus import LOOP, args, loop, profile_truth  # noqa: E402,F401


def rank_loop(step, seconds: float, dist, device) -> int:
    """``step()`` on every rank of ``dist``'s group the same number of times, about ``seconds`` long (fills LOOP as
    _corpus.loop does)."""
    import torch

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    n = torch.tensor([max(1, int(seconds / ((time.perf_counter() - t0) / 10)))], device=device)
    dist.broadcast(n, 0)
    ends = LOOP["step_ends"] = []
    t0 = time.perf_counter()
    for _ in range(int(n.item())):
        step()
        ends.append(round(time.time(), 4))
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    LOOP.update(steps=int(n.item()), step_s=wall / int(n.item()), loop=None)
    return int(n.item())


def truth_path(path: str | None, rank: int) -> str | None:
    """Each rank profiles the same steps (their collectives matched) and writes its truth: rank 0 to ``path``
    (FILE.json), rank N to FILE.rankN.json (a job's kernel time by category is compared over all its ranks: each
    rank's NCCL share says when it reached the collective, the job's how much the job communicates)."""
    if not path:
        return None
    return path if rank == 0 else (path[:-5] if path.endswith(".json") else path) + f".rank{rank}.json"


def multicast_off() -> None:
    for var, val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                     ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ[var] = val
