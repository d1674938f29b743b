"""A Hugging Face transformers GPT-2 (from its config, random weights) trained eagerly in bf16 autocast.

    python bench/gpu/corpus/hf_gpt2_train.py [--seconds 10] [--truth FILE]

Third-party code: transformers' GPT2LMHeadModel and torch's AdamW. Ground truth: torch.profiler's
kernel-time breakdown over the last steps (bench/gpu/corpus/_corpus.py).
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _corpus import args, loop, profile_truth

a = args(__doc__.splitlines()[0], batch=(int, 8, "sequences per step"), seq=(int, 512, "tokens per sequence"))
cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=a.seq, vocab_size=50257)
model = GPT2LMHeadModel(cfg).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


step()
n = loop(step, a.seconds, torch.cuda.synchronize)
print(f"{n} steps", flush=True)
profile_truth(step, 5, a.truth)
