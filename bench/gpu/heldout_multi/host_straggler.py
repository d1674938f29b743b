"""Held out: a straggler slowed by its host, not its GPU: every rank runs the same matmul step and all-reduces a
gradient-sized buffer, but rank --slow first spends --host-ms of CPU time a step (its data pipeline is slower:
a busy loop in Python, as a heavy transform would be). Its GPU idles while the CPU works; the others wait for it in
the all-reduce.

    torchrun --nproc-per-node N bench/gpu/heldout_multi/host_straggler.py --slow 2 --host-ms 40 [--truth F]

Truth: construction; each rank's GPU compute time a step (CUDA events) and host time a step, written by every rank.
"""

import _path  # noqa: F401
import time

from _multi import args, init, timed_loop, write_truth

a = args(__doc__.splitlines()[0], slow=(int, 2, "the slow rank"), host_ms=(float, 40.0, "its host work a step"),
         size=(int, 8192, "matmul size"), mults=(int, 4, "matmuls a step"))
torch, dist, rank, world = init()
x = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
g = torch.randn(32 * 2**20, device="cuda")  # 128 MiB
events: list = []
host_s: list[float] = []


def step():
    t0 = time.perf_counter()
    if rank == a.slow:
        while time.perf_counter() - t0 < a.host_ms / 1e3:  # the slow input pipeline: pure host work
            pass
    host_s.append(time.perf_counter() - t0)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    y = x
    for _ in range(a.mults):
        y = x @ y
    e.record()
    dist.all_reduce(g)
    g.mul_(0.5)
    events.append((s, e))


for _ in range(3):
    step()
torch.cuda.synchronize()
events.clear()
host_s.clear()
loop = timed_loop(step, a.seconds, dist, torch.cuda.synchronize)
ms = sorted(s.elapsed_time(e) for s, e in events[-50:])
write_truth(a, rank, {"case": "host_straggler", "by": "construction", "label": "straggler" if rank == a.slow else "waits",
                      "slow_rank": a.slow, "host_ms_median": 1e3 * sorted(host_s)[len(host_s) // 2],
                      "compute_ms_median": ms[len(ms) // 2], **loop})
dist.destroy_process_group()
