"""memory_full: fill the GPU's memory to ~98%, then light work (expected: memory-capacity).

Allocates 1 GiB blocks (then smaller ones) until under 2% of the device memory is free, then runs a
small kernel a few times a second: nothing is slow yet, but the next allocation fails.
"""

import time

from _common import setup

torch, dev, args = setup(__doc__)
free, total = torch.cuda.mem_get_info()
blocks = []
chunk = 1 << 30
while chunk >= 1 << 24:
    free, total = torch.cuda.mem_get_info()
    if free < 0.02 * total:
        break
    try:
        blocks.append(torch.empty(chunk, dtype=torch.uint8, device=dev))
    except torch.cuda.OutOfMemoryError:
        chunk //= 2
free, total = torch.cuda.mem_get_info()
print(f"holding {sum(b.numel() for b in blocks) / 2**30:.1f} GiB; {100 * (1 - free / total):.1f}% of "
      f"{total / 2**30:.0f} GiB used", flush=True)
x = torch.zeros(1 << 16, device=dev)
t0 = time.monotonic()
while time.monotonic() - t0 < args.seconds:
    x.add_(1.0)
    torch.cuda.synchronize()
    time.sleep(0.2)
