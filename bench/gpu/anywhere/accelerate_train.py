"""A small MLP trained with Hugging Face accelerate (its launcher starts a process a GPU): DDP underneath.

    accelerate launch --multi_gpu --num_processes N accelerate_train.py [--seconds 12] [--truth FILE]
"""

import torch
from accelerate import Accelerator

from _anywhere import args, multicast_off, profile_truth, rank_loop, truth_path

multicast_off()
a = args(__doc__.splitlines()[0])
acc = Accelerator()
model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 2048))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
model, opt = acc.prepare(model, opt)
x = torch.randn(128, 2048, device=acc.device)


def step():
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    acc.backward(loss)
    opt.step()


import torch.distributed as dist  # noqa: E402

rank_loop(step, a.seconds, dist, acc.device)
profile_truth(step, 50, truth_path(a.truth, acc.process_index), warmup=5, sync=dist.barrier)
acc.wait_for_everyone()
