"""A torch.compile'd MLP block trained in bf16 (Inductor fuses the elementwise ops; the GEMMs remain).

    python bench/gpu/corpus/compiled_mlp.py [--seconds 10] [--truth FILE]

Third-party code: torch.compile (Inductor, Triton kernels). Ground truth: torch.profiler's kernel-time
breakdown over the last steps.
"""

import torch

from _corpus import args, loop, profile_truth

a = args(__doc__.splitlines()[0], width=(int, 4096, "hidden width"), batch=(int, 8192, "rows per step"))
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.GELU(),
                                                  torch.nn.LayerNorm(a.width)) for _ in range(4)])
model = model.cuda().to(torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
cmodel = torch.compile(model)
x = torch.randn(a.batch, a.width, device="cuda", dtype=torch.bfloat16)


def step():
    cmodel(x).float().square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


step()
step()
n = loop(step, a.seconds, torch.cuda.synchronize)
print(f"{n} steps", flush=True)
profile_truth(step, 5, a.truth)
