"""matmul_fp32: 8192^3 FP32 matrix multiplies with TF32 off (expected: compute-bound, fp32).

With ``allow_tf32 = False`` cuBLAS runs SGEMM on the FP32 CUDA cores (FFMA), not the tensor cores:
the FP32 pipe is the limit.
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
a = torch.randn(8192, 8192, device=dev)
b = torch.randn(8192, 8192, device=dev)


def step():
    for _ in range(4):
        a @ b
    torch.cuda.synchronize()


loop(torch, args.seconds, step, "fp32 (no TF32) matmul 8192^3 x4")
