"""Another job's process on one GPU (not of the DDP job): bf16 matmuls for --seconds, so that the rank on this GPU
shares it and falls behind its peers (a straggler by time, not a hang).

    CUDA_VISIBLE_DEVICES=N python bench/gpu/culprit/hog.py --seconds 40
"""

import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=40.0)
a = ap.parse_args()
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + a.seconds
while time.monotonic() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
print("hog done", float(y[0, 0]))
