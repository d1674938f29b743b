"""Held out: a pipeline-parallel loop (stage r receives activations from r-1, runs its layers, sends to r+1) whose
first stage stops feeding it: after --before seconds rank 0 stays in host code for good (a data loader that
deadlocked), its GPU idle, while every later stage waits in its receive, each for the one before it.

    torchrun --nproc-per-node N bench/gpu/heldout_multi/pipeline_stall.py --before 8 [--truth F]

Truth: the construction (when the stall began, rank 0 idles, ranks 1..N-1 wait in point-to-point receives).
"""

import _path  # noqa: F401
import time

from _multi import args, init, since_start, write_truth

a = args(__doc__.splitlines()[0], before=(float, 8.0, "seconds of healthy steps"), size=(int, 8192, "activations: rows"))
torch, dist, rank, world = init()
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
act = torch.randn(a.size, 4096, device="cuda", dtype=torch.bfloat16)
stop = torch.zeros(1, device="cuda")
t_end = time.monotonic() + a.before


def stage():
    global act
    if rank > 0:
        dist.recv(act, rank - 1)
    for _ in range(4):
        act = (act @ w).tanh()
    if rank < world - 1:
        dist.send(act, rank + 1)


while True:  # healthy: every stage works; rank 0's clock decides when the "deadlock" comes
    stage()
    if rank == 0:
        stop.fill_(1.0 if time.monotonic() >= t_end else 0.0)
    dist.broadcast(stop, 0)
    if stop.item():
        break
torch.cuda.synchronize()
t_stall = since_start()
write_truth(a, rank, {"case": "pipeline_stall", "by": "construction", "label": "stalled collective",
                      "stall_from": round(t_stall, 3), "leaver": 0, "how": "idle",
                      "waiting": [r for r in range(1, world)]})
if rank == 0:
    while True:  # the deadlocked loader: the process lives, its GPU runs nothing
        time.sleep(1)
stage()  # waits in recv for the stage before it: forever
torch.cuda.synchronize()
