"""A straggler: every rank runs the same matmul step then all-reduces its gradient-sized buffer, but rank --slow does
--factor times the math. The others wait in the all-reduce for it each step. Truth: each rank's compute time per
step measured with CUDA events (construction), written by every rank.

    torchrun --nproc-per-node N bench/gpu/corpus_multi/straggler.py --slow 1 --factor 3 --truth DIR/rank{rank}.json
"""

import torch

from _multi import args, init, timed_loop, write_truth

a = args(__doc__.splitlines()[0], slow=(int, 1, "the slow rank"), factor=(int, 3, "its extra work"),
         size=(int, 8192, "matmul size"), mults=(int, 6, "matmuls a step on a normal rank"))
torch, dist, rank, world = init()
x = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
g = torch.randn(32 * 2**20, device="cuda")  # 128 MiB
n = a.mults * (a.factor if rank == a.slow else 1)
compute_ms: list[float] = []


def step():
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    y = x
    for _ in range(n):
        y = x @ y
    e.record()
    dist.all_reduce(g)
    g.mul_(0.5)
    compute_ms.append((s, e))


for _ in range(3):
    step()
torch.cuda.synchronize()
compute_ms.clear()
loop = timed_loop(step, a.seconds, dist, torch.cuda.synchronize)
ms = sorted(s.elapsed_time(e) for s, e in compute_ms[-50:])
write_truth(a, rank, {"case": "straggler", "by": "construction", "label": "straggler" if rank == a.slow else "waits",
                      "slow_rank": a.slow, "factor": a.factor, "compute_ms_median": ms[len(ms) // 2], **loop})
dist.destroy_process_group()
