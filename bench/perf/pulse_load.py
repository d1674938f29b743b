"""A GPU load that keeps changing, so a monitor's numbers and charts move on every frame.

    python bench/perf/pulse_load.py --seconds 60 [--gpu 0]

Cycles through a bf16 matmul (tensor cores), a large copy (DRAM) and an idle pause, 1.5 s / 1.5 s /
1 s, until ``--seconds`` have passed. bench/perf/tui_cpu.py runs it with ``--load`` to compare the
monitors' CPU cost while a GPU works, not only on an idle one. Needs torch with CUDA (exit 4 without).
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("pulse_load: needs torch", file=sys.stderr)
        return 4
    if not torch.cuda.is_available():
        print("pulse_load: no CUDA GPU", file=sys.stderr)
        return 3
    dev = torch.device("cuda", args.gpu)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    src = torch.empty(1 << 28, device=dev, dtype=torch.float32)  # 1 GiB
    dst = torch.empty_like(src)
    end = time.monotonic() + args.seconds
    phases = 0
    while time.monotonic() < end:
        t = time.monotonic()
        while time.monotonic() - t < 1.5:
            for _ in range(10):
                a @ b
            torch.cuda.synchronize(dev)
        t = time.monotonic()
        while time.monotonic() - t < 1.5:
            for _ in range(10):
                dst.copy_(src)
            torch.cuda.synchronize(dev)
        time.sleep(1.0)
        phases += 1
    print(f"pulse_load: {phases} cycles of matmul / copy / idle", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
