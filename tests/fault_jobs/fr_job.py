"""A 2- or 4-rank torch.distributed job on the CPU (gloo), its flight recorder on, whose ranks issue collectives as told
and then each writes its own flight recorder dump where PyTorch's dump writer would (``TORCH_FR_DUMP_TEMP_FILE`` +
rank: torch's pickle, or JSON with ``json``): real dumps of the fault written down here, before gputop reads them.
(gloo has no on-demand dump pipe, NCCL's heartbeat monitor does: the GPU corpus triggers those through the pipe.)

    python fr_job.py FAULT PORT DUMP_STEM [WORLD] [json]

FAULT: ``behind`` (the last rank stops after 5 all-reduces while the others issue a 6th), ``op`` (at the 6th
collective rank 1 broadcasts while the others all-reduce), ``sizes`` (at the 6th rank 1's all-reduce is 2048
floats, the others' 1024), ``healthy`` (every rank 6 all-reduces), ``small`` (every rank 150 all-reduces of 1024
floats, as fast as it can). The 6th collectives are issued asynchronously (``async_op=True``) and never waited
for, so that every rank gets to its dump whatever its peers do.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank: int, fault: str, port: str, stem: str, world: int, as_json: bool) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.ones(1024)
    n = 150 if fault == "small" else 5
    for _ in range(n):
        dist.all_reduce(x)
    last = world - 1
    if fault == "op" and rank == 1:
        dist.broadcast(x, 0, async_op=True)
    elif fault == "sizes":  # gloo aborts a rank whose peer's data is larger than its own: rank 0 issues its own
        if rank == 1:       # once rank 1 has dumped, and dumps at once (its record is made when it is issued)
            dist.all_reduce(torch.ones(2048), async_op=True)
        else:
            while not os.path.exists(f"{stem}1"):
                time.sleep(0.01)
            dist.all_reduce(x, async_op=True)
    elif fault == "behind" and rank == last:
        pass  # the culprit: it never calls the 6th
    elif fault != "small":
        dist.all_reduce(x, async_op=True)
    c10d = torch._C._distributed_c10d
    data = c10d._dump_fr_trace_json(True, False) if as_json else c10d._dump_fr_trace(True, True, False)
    with open(f"{stem}{rank}.tmp", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.rename(f"{stem}{rank}.tmp", f"{stem}{rank}")
    os._exit(0)  # the async collectives would wait for peers that never come


if __name__ == "__main__":
    fault, port, stem = sys.argv[1], sys.argv[2], sys.argv[3]
    world = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    as_json = len(sys.argv) > 5 and sys.argv[5] == "json"
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    mp.spawn(rank_main, args=(fault, port, stem, world, as_json), nprocs=world)
