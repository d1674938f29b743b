"""Held out: PyTorch Lightning's own Trainer, DDP strategy, bf16-mixed, a torchvision ResNet-50 on a synthetic batch
that lives on the GPU (the loader hands out indices only). Lightning's DDP overlaps the gradient all-reduce with
backward (the usual case): the GPU's own class, comms in `mixed` at most.

    torchrun --nproc-per-node N bench/gpu/heldout_multi/lightning_ddp.py [--seconds 20] [--truth F]

Truth: torch.profiler over 5 training steps (batches 30-34) inside Lightning's loop, NCCL and GEMM/conv shares of
rank 0's kernel time (every rank profiles: the steps hold collectives); the fit's start and end.
"""

import _path  # noqa: F401
import torch
import torchvision
try:
    import lightning.pytorch as pl
except ImportError:  # the image ships it as pytorch_lightning
    import pytorch_lightning as pl
from torch.profiler import ProfilerActivity, profile

from _multi import args, shares, since_start, write_truth

a = args(__doc__.splitlines()[0], batch=(int, 64, "images per step per GPU"))
P0, PN = 30, 5


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet50(num_classes=1000)

    def on_fit_start(self):
        self.x = torch.randn(a.batch, 3, 224, 224, device=self.device)
        self.y = torch.randint(0, 1000, (a.batch,), device=self.device)

    def training_step(self, batch, i):
        return torch.nn.functional.cross_entropy(self.net(self.x), self.y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


class Truth(pl.Callback):
    def __init__(self):
        self.prof, self.result, self.t = None, {}, {}

    def on_train_start(self, trainer, module):
        self.t["start"] = since_start()

    def on_train_batch_start(self, trainer, module, batch, i):
        if i == P0:
            torch.cuda.synchronize()
            self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self.prof.__enter__()

    def on_train_batch_end(self, trainer, module, outputs, batch, i):
        if i == P0 + PN - 1 and self.prof is not None:
            torch.cuda.synchronize()
            self.prof.__exit__(None, None, None)
            self.result = shares(self.prof, PN)
        self.t["steps"] = i + 1

    def on_train_end(self, trainer, module):
        self.t["end"] = since_start()


data = torch.utils.data.DataLoader(range(10**7), batch_size=a.batch)
truth = Truth()
trainer = pl.Trainer(accelerator="gpu", devices=-1, strategy="ddp", precision="bf16-mixed", max_time={"seconds": a.seconds},
                     callbacks=[truth], logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False)
trainer.fit(Net(), data)
rank = trainer.global_rank
t = truth.t
out = {"case": "lightning_ddp_resnet50", "by": "torch.profiler", "steps": t.get("steps"),
       "step_s": (t["end"] - t["start"]) / max(1, t.get("steps") or 1), "loop": [round(t["start"], 3), round(t["end"], 3)]}
if rank == 0:
    out.update(truth.result)
    out["label"] = "comms-bound" if (out.get("nccl_share") or 0) >= 0.5 else "compute-bound"
write_truth(a, rank, out)
