"""A 2-rank torch.distributed job on the CPU (gloo), started with torch.multiprocessing.spawn, whose ranks misbehave
as told: the truth of a culprit test is written here, before gputop looks.

    python gloo_job.py FAULT PORT [SECONDS]

FAULT: ``sleep`` (rank 0 leaves the loop and sleeps in Python while rank 1 waits in all_reduce), ``mismatch``
(rank 0 calls broadcast, rank 1 all_reduce: both block), ``nojoin`` (rank 1 sleeps before it joins the group,
rank 0 waits in init_process_group), ``healthy`` (both all-reduce in a loop). Each rank writes
``READY <rank> <pid>`` on stdout once it is where the fault puts it.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, fault: str, port: str, seconds: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2")
    if fault == "nojoin":
        os.write(1, f"READY {rank} {os.getpid()}\n".encode())
        if rank == 1:
            time.sleep(seconds)  # the culprit: never joins the group
        dist.init_process_group("gloo", rank=rank, world_size=2)  # rank 0 waits here for rank 1
        return
    dist.init_process_group("gloo", rank=rank, world_size=2)
    x = torch.ones(1024)
    for _ in range(3):
        dist.all_reduce(x)
    os.write(1, f"READY {rank} {os.getpid()}\n".encode())  # one write: the two ranks share the pipe
    end = time.monotonic() + seconds
    if fault == "sleep":
        if rank == 0:
            time.sleep(seconds)  # the culprit: out of the loop
        else:
            dist.all_reduce(x)  # waits for rank 0
    elif fault == "mismatch":
        if rank == 0:
            dist.broadcast(x, 0)  # the odd one
        else:
            dist.all_reduce(x)
    else:
        while time.monotonic() < end:
            dist.all_reduce(x)
            time.sleep(0.01)


if __name__ == "__main__":
    fault, port = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    mp.spawn(rank_main, args=(fault, port, seconds), nprocs=2)
