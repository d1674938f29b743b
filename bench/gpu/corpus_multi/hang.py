"""A collective that never completes: every rank all-reduces for --before seconds; then rank --leaver stops taking
part (--how exit: its process ends; --how idle: it sleeps, its GPU idle) while the others enter the next all-reduce
and wait in it until gputop's --timeout stops the job. The truth is the construction: when the stall began.

    torchrun --nproc-per-node N bench/gpu/corpus_multi/hang.py --before 10 --leaver 1 --how exit --truth F
"""

import time

import torch

from _multi import args, init, since_start, write_truth

a = args(__doc__.splitlines()[0], before=(float, 10.0, "seconds of healthy steps"), leaver=(int, 1, "the rank that leaves"),
         how=(str, "exit", "exit or idle"))
torch, dist, rank, world = init()
w = torch.randn(8192, 8192, device="cuda")
g = torch.randn(64 * 2**20, device="cuda")  # 256 MiB
t_end = time.monotonic() + a.before
stop = torch.zeros(1, device="cuda")
while True:  # healthy: a matmul and an all-reduce a step, the ranks agree when to stop (rank 0's clock)
    for _ in range(4):
        w = (w @ w).tanh_()
    dist.all_reduce(g)
    g.mul_(0.5)
    if rank == 0:
        stop.fill_(1.0 if time.monotonic() >= t_end else 0.0)
    dist.broadcast(stop, 0)
    if stop.item():
        break
torch.cuda.synchronize()
t_stall = since_start()
write_truth(a, rank, {"case": f"hang_{a.how}", "by": "construction", "label": "stalled collective",
                      "stall_from": round(t_stall, 3), "leaver": a.leaver, "how": a.how,
                      "waiting": [r for r in range(world) if r != a.leaver]})
if rank == a.leaver:
    if a.how == "exit":
        import os

        os._exit(0)  # gone, without a word to the others
    while True:
        time.sleep(1)
dist.all_reduce(g)  # waits for the rank that left: forever
torch.cuda.synchronize()
