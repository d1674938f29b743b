#!/usr/bin/env bash
# What a profiler window costs the program (issue 27), on one GPU, plus a DDP step's window on two:
#   1. bench/experiments/profiler_stop_cost.py in fresh processes: GPT-2 training's steps/s before, inside and after
#      one torch.profiler window, and the stop's seconds, with CUPTI torn down after it or not (TEARDOWN_CUPTI), with
#      CUDA activity alone, and with a window of 5 steps instead of 3 s;
#   2. bench/gpu/attribution_gpu.sh for GPT-2 training and the torch.compile MLP (plain and --profile, 24 s each: the
#      throughput outside the window against the plain run; TEARDOWN_CUPTI=1 is gputop's default in the child);
#   3. `gputop --profile --run -- torchrun` of the DDP step with its all-reduce after backward on 2 GPUs: each rank's
#      window and its communication (NCCL) share.
#   source .whl/use.sh && bash bench/gpu/profile_cost_gpu.sh
set -u
OUT=${OUT:-/tmp/gputop-profile-cost}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
R=$OUT/stop_cost.jsonl; : > "$R"
for setting in "1 cpu,cuda 0" "0 cpu,cuda 0" "1 cuda 0" "1 cpu,cuda 5"; do
  set -- $setting
  CUDA_VISIBLE_DEVICES=0 TEARDOWN_CUPTI=$1 timeout 90 python3 bench/experiments/profiler_stop_cost.py \
    --activities "$2" --steps "$3" 2> "$OUT/stop_cost.err" | tail -1 >> "$R"
done
CUDA_VISIBLE_DEVICES=0 SECONDS_PER_CASE=24 OUT=$OUT bash bench/gpu/attribution_gpu.sh hf_gpt2_train compiled_mlp > /dev/null 2>&1
D=$OUT/ddp; mkdir -p "$D"
GPUTOP_PROFILE_AT=8 timeout 90 python3 -m gputop --json -o "$D/ddp_after_backward.profiled.json" --profile --run -- \
  torchrun --standalone --nproc-per-node 2 bench/gpu/corpus_multi/ddp_resnet.py --overlap 0 --seconds 22 \
  --truth "$D/ddp_truth_rank{rank}.json" > "$D/ddp.log" 2>&1
echo "exit $?" >> "$D/ddp.log"
tar -C "$OUT" -czf "$OUT/ddp.tar.gz" ddp && rm -rf "$D"
ls -la "$OUT"
