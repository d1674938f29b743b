"""Shared by the proof scripts: a --seconds flag, torch on CUDA, and a timed loop.

Each proof script is a workload whose bottleneck is known by construction; bench/gpu/proof/record_all.py
runs each one under ``gputop --json --record ... --run -- python bench/gpu/proof/X.py`` on a GPU machine.
"""

from __future__ import annotations

import argparse
import sys
import time


def setup(doc: str, seconds: float = 10.0):
    """(torch, device, args) or exit: 4 without torch, 3 without a CUDA device."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--seconds", type=float, default=seconds, help=f"how long the loop runs (default {seconds:g})")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("this proof script needs torch", file=sys.stderr)
        raise SystemExit(4)
    if not torch.cuda.is_available():
        print("this proof script needs a CUDA GPU", file=sys.stderr)
        raise SystemExit(3)
    return torch, torch.device("cuda"), args


def loop(torch, seconds: float, step, what: str) -> int:
    """Call ``step()`` (which should synchronise now and then) until ``seconds`` pass; print a rate."""
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        step()
        n += 1
    torch.cuda.synchronize()
    dt = time.monotonic() - t0
    print(f"{what}: {n} steps in {dt:.1f} s ({n / dt:.1f}/s)", flush=True)
    return n
