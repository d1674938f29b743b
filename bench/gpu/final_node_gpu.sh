#!/usr/bin/env bash
# The last checks of a session on a 4-GPU machine (nvidia-h100-x4), each bounded, each writing to $OUT as it ends:
#   1. start-up with every GPU (issue 23): bench/perf/first_frame.py --live, then the TUI against nvitop at 0.25 s
#      at 80x24 and 160x48 (first frame, CPU over the first 30 s and steady);
#   2. the TUI in tmux while a torchrun job runs on every GPU (bench/gpu/tui_multi_tmux.sh, issue 25);
#   3. the GPU-marked tests, each test's name as it ends (pytest -m gpu -v);
#   4. attribution (issue 27) with the loader's raw-event summary: GPT-2 training with and without --profile (the
#      throughput in and out of the window), and the host-heavy ResNet with its window's chrome trace kept, its idle
#      breakdown beside HolisticTraceAnalysis' own (bench/tools/hta_compare.py).
#   source .whl/use.sh && bash bench/gpu/final_node_gpu.sh [startup] [tmux] [gpu-tests] [attribution]   (default: all)
# PYTEST_S bounds the GPU-marked tests (default 150 s).
set -u
PARTS=" ${*:-startup tmux gpu-tests attribution} "
want() { [[ $PARTS == *" $1 "* ]]; }
OUT=${OUT:-/tmp/gputop-final-node}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc | sed 's/^/cores: /'
  python3 -c 'import nvitop, textual, torch; print("nvitop", nvitop.__version__, "textual", textual.__version__, "torch", torch.__version__)'
  python3 -m compileall -q -j 0 gputop /tmp/site > /dev/null 2>&1; echo "byte-compiled"; } > "$OUT/env.txt" 2>&1
if want startup; then
  timeout 45 python3 bench/perf/first_frame.py --live --marker quit -n 8 --json "$OUT/first_frame.json" > "$OUT/first_frame.txt" 2>&1
  timeout 110 python3 bench/perf/tui_vs_nvitop.py --sizes 80x24,160x48 --steady 15 --json "$OUT/tui_vs_nvitop.json" > "$OUT/tui_vs_nvitop.txt" 2>&1
  timeout 20 python3 bench/perf/startup_profile.py --steps > "$OUT/startup_profile.txt" 2>&1
fi
want tmux && timeout 75 bash bench/gpu/tui_multi_tmux.sh "$OUT" > "$OUT/tui_multi_tmux.txt" 2>&1
want gpu-tests && timeout "${PYTEST_S:-150}" python3 -m pytest -v -m gpu -p no:cacheprovider tests > "$OUT/pytest_gpu.txt" 2>&1
want attribution || { ls -la "$OUT"; exit 0; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .whl/extra/*.whl > /dev/null 2>&1
W=$OUT/attribution; mkdir -p "$W/traces"
C=bench/gpu/corpus
for mode in plain profiled; do
  flags=""; [ $mode = profiled ] && flags="--profile"
  GPUTOP_PROFILE_AT=7 timeout 60 python3 -m gputop --json -o "$W/hf_gpt2_train.$mode.json" $flags --run -- \
    python3 $C/hf_gpt2_train.py --seconds 14 --truth "$W/hf_gpt2_train.$mode.truth.json" > "$W/hf_gpt2_train.$mode.log" 2>&1
done
GPUTOP_PROFILE_AT=6 GPUTOP_PROFILE_KEEP_TRACE=$W/traces timeout 50 python3 -m gputop --json -o "$W/tv_resnet18_heavy_cpu.profiled.json" \
  --profile --run -- python3 $C/tv_resnet_train.py --workers 0 --heavy 1 --model resnet18 --batch 64 --seconds 12 \
  --truth "$W/tv_resnet18_heavy_cpu.profiled.truth.json" > "$W/tv_resnet18_heavy_cpu.profiled.log" 2>&1
python3 bench/tools/attribution_check.py "$W" > "$OUT/attribution.md" 2>&1
for t in "$W"/traces/trace-*.json; do
  [ -f "$t" ] && PYTHONPATH=$PYTHONPATH:/tmp/extra timeout 60 python3 bench/tools/hta_compare.py "$t" \
    --document "$W/tv_resnet18_heavy_cpu.profiled.json" >> "$OUT/hta_compare.txt" 2>&1
  gzip -f "$t"
done
tar -C "$OUT" -czf "$OUT/attribution.tar.gz" attribution && rm -rf "$W"
ls -la "$OUT"
