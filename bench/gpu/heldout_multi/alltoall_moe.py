"""Held out: an expert-parallel (MoE-style) step: every rank sends its tokens to the experts on the other ranks with
all_to_all_single, runs its expert (two bf16 matmuls on what it received), and sends the results back. Tokens are
many and experts small, so the two all-to-alls dominate the step.

    torchrun --nproc-per-node N bench/gpu/heldout_multi/alltoall_moe.py [--seconds 20] [--truth F]

Truth: rank 0's torch.profiler NCCL share of kernel time over 5 steps.
"""

import _path  # noqa: F401

from _multi import args, init, run_and_profile

a = args(__doc__.splitlines()[0], tokens=(int, 65536, "tokens a rank sends a step"), hidden=(int, 2048, "hidden size"),
         ffn=(int, 1024, "expert width"))
torch, dist, rank, world = init()
x = torch.randn(a.tokens, a.hidden, device="cuda", dtype=torch.bfloat16)
w1 = torch.randn(a.hidden, a.ffn, device="cuda", dtype=torch.bfloat16) / a.hidden ** 0.5
w2 = torch.randn(a.ffn, a.hidden, device="cuda", dtype=torch.bfloat16) / a.ffn ** 0.5
inbox, outbox = torch.empty_like(x), torch.empty_like(x)


def step():
    dist.all_to_all_single(inbox, x)  # dispatch: tokens to their experts
    y = torch.nn.functional.gelu(inbox @ w1) @ w2  # this rank's expert
    dist.all_to_all_single(outbox, y)  # combine: results back to their tokens


run_and_profile(a, dist, rank, "alltoall_moe", step, warmup=3, profiled=5, otherwise="other")
