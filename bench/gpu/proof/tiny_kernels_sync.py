"""tiny_kernels_sync: one-element kernels with a synchronize after each (expected: latency-bound, launch).

Each kernel runs one thread block for a microsecond or two; the launch and the synchronize cost more
than the kernel, so the GPU is "active" part of the time while its SMs do almost nothing.
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
x = torch.zeros(1, device=dev)


def step():
    x.add_(1.0)
    torch.cuda.synchronize()


loop(torch, args.seconds, step, "1-element add + synchronize")
