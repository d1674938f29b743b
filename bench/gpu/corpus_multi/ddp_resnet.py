"""torchrun DDP of a torchvision ResNet-50 (bf16 autocast, synthetic images already on the GPU).

    torchrun --nproc-per-node N bench/gpu/corpus_multi/ddp_resnet.py [--overlap 1] [--seconds 20] [--truth F]

--overlap 1: DDP's own bucketed all-reduce, overlapped with backward (the usual case: compute-bound, comms in mixed).
--overlap 0: backward under no_sync(), then every gradient all-reduced after backward (comms on the critical path).
Truth: rank 0's torch.profiler breakdown (NCCL and GEMM/conv share of kernel time) over 5 steps.
"""

import torch
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

from _multi import args, init, run_and_profile

a = args(__doc__.splitlines()[0], overlap=(int, 1, "1: DDP overlap; 0: all-reduce after backward"),
         batch=(int, 64, "images per step per GPU"), model=(str, "resnet50", "torchvision model"))
torch, dist, rank, world = init()
model = getattr(torchvision.models, a.model)(num_classes=1000).cuda().to(memory_format=torch.channels_last)
ddp = DDP(model, device_ids=[torch.cuda.current_device()], bucket_cap_mb=25)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (a.batch,), device="cuda")
params = [p for p in model.parameters() if p.requires_grad]


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
    if a.overlap:
        loss.backward()
    else:
        with ddp.no_sync():
            loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)
        flat /= world
        off = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[off:off + n].view_as(p.grad))
            off += n
    opt.step()
    opt.zero_grad(set_to_none=False)


run_and_profile(a, dist, rank, f"ddp_{a.model}_overlap{a.overlap}", step, warmup=5, profiled=5, otherwise="compute-bound")
