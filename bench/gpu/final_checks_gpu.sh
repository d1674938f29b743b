#!/usr/bin/env bash
# One device call's worth of checks on a 2-GPU machine (nvidia-h100-x2 / nvidia-h200-x2), each step bounded and its
# output written to $OUT as it finishes (a cut-off call keeps what ran):
#   1. the TUI against nvitop at 0.25 s (bench/perf/tui_vs_nvitop.py: time to the first frame, CPU over the first 30 s
#      and in steady state) at 80x24, 120x40, 160x48, after byte-compiling as a pip install would (issue 23);
#   2. the early frame and Textual's own first frame apart (bench/perf/first_frame.py --live --marker quit);
#   3. the GPU-marked tests on 2 GPUs (issue 25: pytest -m gpu);
#   4. three multi-GPU corpus cases recorded again with this build (bench/gpu/corpus_multi_gpu.sh).
#   source .whl/use.sh && bash bench/gpu/final_checks_gpu.sh
set -u
OUT=${OUT:-/tmp/gputop-final}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc | sed 's/^/cores: /'
  git rev-parse --short HEAD; python3 -c 'import nvitop, textual; print("nvitop", nvitop.__version__, "textual", textual.__version__)'
  python3 -m compileall -q -j 0 gputop /tmp/site > /dev/null 2>&1; echo "byte-compiled"; } > "$OUT/env.txt" 2>&1
timeout 170 python3 bench/perf/tui_vs_nvitop.py --steady 15 --json "$OUT/tui_vs_nvitop.json" > "$OUT/tui_vs_nvitop.txt" 2>&1
timeout 60 python3 bench/perf/first_frame.py --live --marker quit -n 8 --json "$OUT/first_frame.json" > "$OUT/first_frame.txt" 2>&1
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/pytest_gpu.txt" 2>&1
SECONDS_PER_CASE=10 CASE_TIMEOUT=60 OUT="$OUT/corpus" timeout 130 bash bench/gpu/corpus_multi_gpu.sh comms_mlp hang_exit straggler \
  > /dev/null 2>&1; cp "$OUT/corpus/summary.txt" "$OUT/corpus_summary.txt" 2>/dev/null; cp "$OUT/corpus/corpus_multi.tar.gz" "$OUT/" 2>/dev/null
rm -rf "$OUT/corpus"; ls -la "$OUT"
