"""elementwise: y = x * a + b over 1 GiB float32 arrays (expected: memory-bound).

Each element is read once and written once (8 bytes) for 2 FLOPs: arithmetic intensity 0.25
FLOP/byte, far left of the ridge point, so DRAM bandwidth is the limit.
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
x = torch.randn(1 << 28, device=dev)  # 1 GiB
y = torch.empty_like(x)


def step():
    for _ in range(10):
        torch.mul(x, 1.0001, out=y)
        torch.add(y, 0.5, out=x)
    torch.cuda.synchronize()


loop(torch, args.seconds, step, "elementwise mul+add over 1 GiB x10")
