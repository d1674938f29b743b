"""Held out: Hugging Face transformers' Trainer under torchrun (DDP), GPT-2 small from its config (random weights, no
download), bf16, random token batches. The Trainer's DDP overlaps the all-reduce with backward; eager GPT-2 training
spends most of its kernel time outside GEMMs (elementwise, normalisation, optimizer).

    torchrun --nproc-per-node N bench/gpu/heldout_multi/hf_trainer_ddp.py [--seconds 20] [--truth F]

The ranks stop together: a callback broadcasts rank 0's "time is up" every step. Truth: torch.profiler over 5 steps
(steps 20-24) inside the Trainer's loop, NCCL and GEMM shares of rank 0's kernel time.
"""

import _path  # noqa: F401
import os
import tempfile
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from _multi import args, shares, since_start, write_truth

a = args(__doc__.splitlines()[0], batch=(int, 8, "sequences per step per GPU"), seq=(int, 512, "tokens a sequence"))
P0, PN = 20, 5


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 10**7

    def __getitem__(self, i):
        ids = torch.randint(0, 50257, (a.seq,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class Clock(TrainerCallback):
    def __init__(self):
        self.prof, self.result, self.t, self.end = None, {}, {}, None

    def on_train_begin(self, args_, state, control, **kw):
        self.t["start"], self.end = since_start(), time.monotonic() + a.seconds

    def on_step_begin(self, args_, state, control, **kw):
        if state.global_step == P0:
            torch.cuda.synchronize()
            self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self.prof.__enter__()

    def on_step_end(self, args_, state, control, **kw):
        if state.global_step == P0 + PN and self.prof is not None:
            torch.cuda.synchronize()
            self.prof.__exit__(None, None, None)
            self.result, self.prof = shares(self.prof, PN), None
        stop = torch.tensor([1.0 if time.monotonic() >= self.end else 0.0], device="cuda")
        dist.broadcast(stop, 0)  # rank 0's clock decides for every rank
        if stop.item():
            control.should_training_stop = True
        self.t["steps"] = state.global_step

    def on_train_end(self, args_, state, control, **kw):
        self.t["end"] = since_start()


clock = Clock()
targs = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=a.batch, bf16=True, max_steps=10**6,
                          report_to=[], save_strategy="no", logging_strategy="no", dataloader_num_workers=2,
                          ddp_find_unused_parameters=False, disable_tqdm=True)
trainer = Trainer(model=GPT2LMHeadModel(GPT2Config()), args=targs, train_dataset=Tokens(), callbacks=[clock])
trainer.train()
rank = int(os.environ.get("RANK", 0))
t = clock.t
out = {"case": "hf_trainer_ddp_gpt2", "by": "torch.profiler", "steps": t.get("steps"),
       "step_s": (t["end"] - t["start"]) / max(1, t.get("steps") or 1), "loop": [round(t["start"], 3), round(t["end"], 3)]}
if rank == 0:
    out.update(clock.result)
    out["label"] = "comms-bound" if (out.get("nccl_share") or 0) >= 0.5 else "compute- or memory-bound"
write_truth(a, rank, out)
dist.destroy_process_group()
