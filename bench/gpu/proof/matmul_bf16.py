"""matmul_bf16: a loop of 8192^3 bf16 matrix multiplies (expected: compute-bound, tensor).

2 x 8192^3 = 1.1 TFLOP per multiply on 384 MiB of operands: arithmetic intensity ~2700 FLOP/byte, far
right of any GPU's ridge point, so the tensor cores are the limit. Such a loop usually sits at the
board's power cap with the SM clock below max: normal for compute-bound work, not "throttled".
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)


def step():
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()


n = loop(torch, args.seconds, step, "bf16 matmul 8192^3 x10")
