#!/usr/bin/env bash
# Attribution on the GPU (issue 27): each corpus program (bench/gpu/corpus/: Hugging Face GPT-2 train and decode,
# the host-heavy torchvision ResNet, the torch.compile MLP, CuPy, JAX) run twice under gputop:
#   plain:    python -m gputop --json --run -- python PROG --seconds S --truth T0.json
#   profiled: GPUTOP_PROFILE_AT=A python -m gputop --json --run --profile -- python PROG --seconds S --truth T1.json
# Each program writes its own ground truth (torch.profiler by hand over its last steps: every kernel's time; and each
# step's end time), so bench/tools/attribution_check.py compares gputop's window with it (category shares of kernel
# time) and the throughput in and out of the window, and against the plain run.
#   source .whl/use.sh && bash bench/gpu/attribution_gpu.sh [CASE ...]
# $OUT: attribution.md (the table), attribution.tar.gz (documents, truths, logs).
set -u
OUT=${OUT:-/tmp/gputop-attribution}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
S=${SECONDS_PER_CASE:-16}
AT=${PROFILE_AT:-7}
W=$(mktemp -d)/attribution; mkdir -p "$W"
C=bench/gpu/corpus
declare -A CMD=(
  [hf_gpt2_train]="$C/hf_gpt2_train.py"
  [hf_gpt2_generate]="$C/hf_gpt2_generate.py"
  [tv_resnet18_heavy_cpu]="$C/tv_resnet_train.py --workers 0 --heavy 1 --model resnet18 --batch 64"
  [compiled_mlp]="$C/compiled_mlp.py"
  [cupy_gemm]="$C/cupy_loops.py --op gemm"
  [jax]="$C/jax_step.py"
)
ORDER="hf_gpt2_train hf_gpt2_generate tv_resnet18_heavy_cpu compiled_mlp cupy_gemm jax"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__)'; python3 -c 'import cupti; print("cupti-python", cupti.__version__)' 2>&1 | tail -1
  python3 -c 'import hta; print("HolisticTraceAnalysis importable")' 2>&1 | tail -1; } > "$W/env.txt" 2>&1
for c in ${*:-$ORDER}; do
  for mode in plain profiled; do
    flags=""; envs=""
    [ $mode = profiled ] && flags="--profile" && envs="GPUTOP_PROFILE_AT=$AT"
    env $envs timeout ${CASE_TIMEOUT:-90} python3 -m gputop --json -o "$W/$c.$mode.json" $flags --run -- \
      python3 ${CMD[$c]} --seconds "$S" --truth "$W/$c.$mode.truth.json" > "$W/$c.$mode.log" 2>&1
    echo "$c $mode exit $?" >> "$W/env.txt"
  done
  tar -C "$(dirname "$W")" -czf "$OUT/attribution.tar.gz" attribution
done
python3 bench/tools/attribution_check.py "$W" > "$OUT/attribution.md" 2>&1
tar -C "$(dirname "$W")" -czf "$OUT/attribution.tar.gz" attribution
ls -la "$OUT"
