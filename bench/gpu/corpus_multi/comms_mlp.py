"""A DDP-style loop whose gradient all-reduce dominates the step: a wide MLP (8 x 8192^2 fp32, 2 GiB of gradients)
on a tiny batch, the flat gradient all-reduced after backward.

    torchrun --nproc-per-node N bench/gpu/corpus_multi/comms_mlp.py [--seconds 20] [--truth F]

Truth: rank 0's torch.profiler NCCL share of kernel time (by construction it is most of it).
"""

import torch

from _multi import args, init, run_and_profile

a = args(__doc__.splitlines()[0], layers=(int, 8, "Linear(8192, 8192) layers"), batch=(int, 32, "rows per step"))
torch, dist, rank, world = init()
m = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(a.layers)]).cuda()
ps = list(m.parameters())
x = torch.randn(a.batch, 8192, device="cuda")


def step():
    m(x).square().mean().backward()
    flat = torch.cat([p.grad.reshape(-1) for p in ps])
    dist.all_reduce(flat)
    for p in ps:
        p.grad = None


run_and_profile(a, dist, rank, "comms_mlp", step, warmup=3, profiled=3, otherwise="other")
