#!/usr/bin/env bash
# One device call's worth of checks on a 4-GPU machine (nvidia-h100-x4 / nvidia-h200-x4), each step bounded and its
# output written to $OUT as it finishes (a cut-off call keeps what ran):
#   1. the TUI against nvitop at 0.25 s with every GPU sampled (bench/perf/tui_vs_nvitop.py: first frame, CPU over
#      the first 30 s and in steady state) at 80x24, 120x40, 160x48, byte-compiled as a pip install would
#      (issue 23's start-up, issue 25's cost at 4 GPUs);
#   2. the early frame and Textual's own first frame apart (bench/perf/first_frame.py --live --marker quit);
#   3. --export's CPU with every GPU sampled at 10 Hz, scraped once a second (bench/perf/export_cpu.py);
#   4. the TUI in tmux while a torchrun job runs on every GPU (bench/gpu/tui_multi_tmux.sh);
#   5. the GPU-marked tests (pytest -m gpu).
#   source .whl/use.sh && bash bench/gpu/node_checks_gpu.sh
set -u
OUT=${OUT:-/tmp/gputop-node}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc | sed 's/^/cores: /'
  git rev-parse --short HEAD 2>/dev/null; python3 -c 'import nvitop, textual; print("nvitop", nvitop.__version__, "textual", textual.__version__)'
  python3 -m compileall -q -j 0 gputop /tmp/site > /dev/null 2>&1; echo "byte-compiled"; } > "$OUT/env.txt" 2>&1
timeout 170 python3 bench/perf/tui_vs_nvitop.py --steady 15 --json "$OUT/tui_vs_nvitop.json" > "$OUT/tui_vs_nvitop.txt" 2>&1
timeout 60 python3 bench/perf/first_frame.py --live --marker quit -n 8 --json "$OUT/first_frame.json" > "$OUT/first_frame.txt" 2>&1
timeout 60 python3 bench/perf/export_cpu.py --warmup 2 --seconds 40 --json > "$OUT/export_cpu.txt" 2>&1
timeout 100 bash bench/gpu/tui_multi_tmux.sh "$OUT" > "$OUT/tui_multi_tmux.txt" 2>&1
timeout 170 python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/pytest_gpu.txt" 2>&1
pkill -9 -f corpus_multi/ 2>/dev/null; ls -la "$OUT"
