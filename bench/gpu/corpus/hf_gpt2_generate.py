"""Token-by-token greedy generation at batch 1 with a Hugging Face GPT-2 (from its config, random weights).

    python bench/gpu/corpus/hf_gpt2_generate.py [--seconds 10] [--truth FILE]

Third-party code: transformers' GPT2LMHeadModel.generate with its KV cache: hundreds of tiny kernels per
token. Ground truth: torch.profiler's kernel-time breakdown over the last generations.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _corpus import args, loop, profile_truth

a = args(__doc__.splitlines()[0], tokens=(int, 64, "new tokens per generate call"))
cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257)
model = GPT2LMHeadModel(cfg).cuda().eval()
prompt = torch.randint(0, cfg.vocab_size, (1, 16), device="cuda")


@torch.inference_mode()
def step():
    model.generate(prompt, max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False,
                   pad_token_id=0)


step()
n = loop(step, a.seconds, torch.cuda.synchronize)
print(f"{n} generations of {a.tokens} tokens", flush=True)
profile_truth(step, 2, a.truth)
