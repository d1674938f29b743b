"""Tensor-parallel inference started with torch.multiprocessing.spawn: each rank a column shard of an MLP's first
layer and a row shard of its second, an all-reduce of the partial sums each forward pass (NCCL).

    python tp_spawn.py [--seconds 12] [--truth FILE]
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _anywhere import args, multicast_off, profile_truth, rank_loop, truth_path


class Shard(torch.nn.Module):
    def __init__(self, d, h, world):
        super().__init__()
        self.up = torch.nn.Linear(d, h // world)
        self.down = torch.nn.Linear(h // world, d, bias=False)

    def forward(self, x):
        y = self.down(torch.nn.functional.gelu(self.up(x)))
        dist.all_reduce(y)
        return y


def rank(r, world, port, a):
    multicast_off()
    torch.cuda.set_device(r)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=world)
    model = Shard(2048, 8192, world).cuda().half().eval()
    x = torch.randn(64, 2048, device="cuda", dtype=torch.half)

    @torch.no_grad()
    def step():
        model(x)
    rank_loop(step, a.seconds, dist, torch.device("cuda", r))
    profile_truth(step, 200, truth_path(a.truth, r), warmup=5, sync=dist.barrier)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    a = args(__doc__.splitlines()[0])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    world = torch.cuda.device_count()
    mp.spawn(rank, args=(world, port, a), nprocs=world)
    print("tp_spawn done", world, "ranks", flush=True)
