"""A long training run on one GPU (an MLP, AdamW) for the cost and the endurance of windows asked of a running
process: it trains for ``--seconds`` or until the file ``--stop`` exists, then writes each step's end (Unix time)
to ``--truth``. Started prepared (``eval "$(gputop --profile-env)"``) by cycles.py.

    python long_run.py --seconds 40 [--stop FILE] [--truth FILE]
"""

import json
import os
import time

import torch

from _anywhere import args

a = args(__doc__.splitlines()[0], stop=(str, "", "end when this file exists"))
model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 2048)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 2048, device="cuda")
ends = []
end = time.monotonic() + a.seconds
while time.monotonic() < end and not (a.stop and os.path.exists(a.stop)):
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if len(ends) % 10 == 0:
        torch.cuda.synchronize()  # (the step's end as the GPU ran it, every 10th step)
    ends.append(round(time.time(), 4))
torch.cuda.synchronize()
if a.truth:
    with open(a.truth, "w") as f:
        json.dump({"step_ends": ends}, f)
print("long_run done", len(ends), "steps", flush=True)
