"""oom: a few seconds of work, then an allocation larger than the GPU (expected: memory-capacity, oom).

The out-of-memory error is not caught: the script dies with PyTorch's "CUDA out of memory" message on
stderr and exit code 1, which gputop passes through and reports.
"""

from _common import loop, setup

torch, dev, args = setup(__doc__, seconds=4.0)
a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)


def step():
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()


loop(torch, args.seconds, step, "bf16 matmul 4096^3 x10")
free, total = torch.cuda.mem_get_info()
print(f"now asking for {2 * total / 2**30:.0f} GiB", flush=True)
too_big = torch.empty(2 * total, dtype=torch.uint8, device=dev)  # raises torch.OutOfMemoryError
