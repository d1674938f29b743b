"""What one torch.profiler window costs an eager training loop (issue 27), before, inside and after it.

    TEARDOWN_CUPTI=1 python bench/experiments/profiler_stop_cost.py [--activities cpu,cuda] [--window 3] [--steps 0]

A Hugging Face GPT-2 (random weights, bf16 autocast, AdamW: bench/gpu/corpus/hf_gpt2_train.py's model) trains for
``--before`` seconds; then torch.profiler records a window (``--window`` seconds, or ``--steps`` optimizer steps when
given) with the activities asked for; ``stop()`` is timed on the training thread, then the event count; then the
loop trains ``--after`` seconds more. One JSON line: steps/s before, inside the window, after it, the stop's seconds.
Run each setting in a fresh process (CUPTI's state, TEARDOWN_CUPTI, is per process).
"""

import argparse
import json
import os
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--activities", default="cpu,cuda")
ap.add_argument("--window", type=float, default=3.0)
ap.add_argument("--steps", type=int, default=0, help="end the window after this many steps (0: --window seconds)")
ap.add_argument("--before", type=float, default=6.0)
ap.add_argument("--after", type=float, default=8.0)
a = ap.parse_args()

cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
model = GPT2LMHeadModel(cfg).cuda().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def rate(seconds):
    """Steps a second over ``seconds`` of training (the GPU drained at both ends)."""
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


for _ in range(3):
    step()
before = rate(a.before)
acts = [{"cpu": torch.profiler.ProfilerActivity.CPU, "cuda": torch.profiler.ProfilerActivity.CUDA}[x]
        for x in a.activities.split(",")]
prof = torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False)
torch.cuda.synchronize()
t0, n = time.perf_counter(), 0
prof.start()
while (n < a.steps) if a.steps else (time.perf_counter() - t0 < a.window):
    step()
    n += 1
torch.cuda.synchronize()
window_s = time.perf_counter() - t0
t1 = time.perf_counter()
prof.stop()
stop_s = time.perf_counter() - t1
t2 = time.perf_counter()
events = len(prof.profiler.kineto_results.events())
events_s = time.perf_counter() - t2
after = rate(a.after)
print(json.dumps({"activities": a.activities, "teardown_cupti": os.environ.get("TEARDOWN_CUPTI"),
                  "window_s": round(window_s, 3), "window_steps": n, "steps_per_s_before": round(before, 3),
                  "steps_per_s_inside": round(n / window_s, 3), "stop_s": round(stop_s, 3), "events": events,
                  "events_list_s": round(events_s, 3), "steps_per_s_after": round(after, 3),
                  "after_vs_before_pct": round(100 * (after / before - 1), 2), "torch": torch.__version__}))
