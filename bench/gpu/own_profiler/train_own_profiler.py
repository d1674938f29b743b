"""A training loop that brings its own torch.profiler, the way many do: a schedule (wait 1, warm-up 1, active 3)
started partway through, its trace handed to on_trace_ready. Under `gputop --run --profile` gputop's window may be
recording when this profiler starts; the program's own profile must come out whole (the same kernels and steps as
without gputop), its output its own, its exit code 0.

    python3 bench/gpu/own_profiler/train_own_profiler.py [--seconds 10] [--own-at 5]
"""

import argparse
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=10.0)
ap.add_argument("--own-at", type=float, default=5.0, help="seconds into the loop when the program's profiler starts")
a = ap.parse_args()

dev = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(), torch.nn.LayerNorm(4096),
                            torch.nn.Linear(4096, 2048)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 2048, device=dev)
got = {}


def on_trace_ready(p):
    kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    got["kernels"] = len(kernels)
    got["steps"] = sum(1 for e in p.events() if e.name.startswith("ProfilerStep"))
    got["addmm"] = sum(1 for e in p.events() if e.name == "aten::addmm")


acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
own = None
t0 = time.time()
steps = 0
while time.time() - t0 < a.seconds:
    if own is None and time.time() - t0 >= a.own_at:
        own = torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                                     on_trace_ready=on_trace_ready)
        own.start()
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    steps += 1
    if own is not None:
        own.step()
if own is not None:
    own.stop()
print(f"own profile: {got.get('kernels')} kernel events, {got.get('addmm')} addmm ops over {got.get('steps')} profiled "
      f"steps; {steps} steps",
      file=sys.stderr)
