"""idle: a CUDA context and a little memory, then nothing (expected: idle).

The process sleeps: no kernels, no copies, no CPU. gputop must not invent a bottleneck.
"""

import time

from _common import setup

torch, dev, args = setup(__doc__)
x = torch.ones(1 << 20, device=dev)  # creates the context; 4 MiB
torch.cuda.synchronize()
time.sleep(args.seconds)
print(f"idle: slept {args.seconds:g} s holding {x.numel() * 4 >> 20} MiB", flush=True)
