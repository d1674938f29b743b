"""matmul_fp64: 8192^3 FP64 matrix multiplies (expected: compute-bound, fp64).

DGEMM runs on the FP64 tensor cores (DMMA) on A100/H100/H200, or on the FP64 pipe elsewhere.
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
a = torch.randn(8192, 8192, device=dev, dtype=torch.float64)
b = torch.randn(8192, 8192, device=dev, dtype=torch.float64)


def step():
    a @ b
    torch.cuda.synchronize()


loop(torch, args.seconds, step, "fp64 matmul 8192^3")
