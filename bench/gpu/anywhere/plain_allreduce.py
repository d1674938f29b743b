"""A plain loop of torch.matmul and dist.all_reduce under torchrun: no nn.Module, no optimizer (a benchmark's shape).

    torchrun --nproc-per-node N plain_allreduce.py [--seconds 12] [--truth FILE]
"""

import os

import torch
import torch.distributed as dist

from _anywhere import args, multicast_off, profile_truth, rank_loop, truth_path

multicast_off()
a = args(__doc__.splitlines()[0])
r = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(r)
dist.init_process_group("nccl")
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)


def step():
    y = torch.matmul(x, w)
    dist.all_reduce(y)


rank_loop(step, a.seconds, dist, torch.device("cuda", r))
profile_truth(step, 100, truth_path(a.truth, dist.get_rank()), warmup=5, sync=dist.barrier)
dist.barrier()
dist.destroy_process_group()
