"""FSDP of a Hugging Face GPT-2 (built from its config, random weights) on synthetic tokens, bf16 autocast.

    torchrun --nproc-per-node N bench/gpu/corpus_multi/fsdp_gpt2.py [--seconds 20] [--truth F]

Third-party code: transformers.GPT2LMHeadModel, torch.distributed.fsdp. Truth: rank 0's torch.profiler breakdown.
"""

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import GPT2Config, GPT2LMHeadModel

from _multi import args, init, run_and_profile

a = args(__doc__.splitlines()[0], batch=(int, 8, "sequences per step per GPU"), seq=(int, 1024, "tokens a sequence"),
         layers=(int, 24, "transformer layers"), width=(int, 1024, "hidden size"))
torch, dist, rank, world = init()
cfg = GPT2Config(n_layer=a.layers, n_embd=a.width, n_head=16, n_positions=a.seq)
model = FSDP(GPT2LMHeadModel(cfg).cuda(), device_id=torch.cuda.current_device(), use_orig_params=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


run_and_profile(a, dist, rank, "fsdp_gpt2", step, warmup=3, profiled=3, otherwise="compute-bound")
