#!/usr/bin/env bash
# The TUI issue's GPU-machine runs (each part fits one 10-minute device command):
#
#   source .whl/use.sh; bash bench/gpu/tui_gpu.sh cpu       # gputop vs nvitop, CPU % side by side, idle and busy GPU (~5 min)
#   source .whl/use.sh; bash bench/gpu/tui_gpu.sh tmux      # drive the TUI in tmux at 80x24 and 200x50 while workloads run
#   source .whl/use.sh; bash bench/gpu/tui_gpu.sh screens   # screenshots of a real run, every workload (~5 min)
#   source .whl/use.sh; bash bench/gpu/tui_gpu.sh rss       # RSS of the live monitor for 9 minutes
#
# Wheels to carry (.whl): the TUI stack (../shared/device/wheels.sh) and nvitop (../shared/device/wheels.sh
# nvitop==1.7.2; its other needs, nvidia-ml-py and psutil, are on the image). Output goes to $OUT.
set -u
out=${OUT:-.}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
case "${1:-cpu}" in
  cpu)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/tui_cpu.txt"
    nproc | sed 's/^/cores: /' | tee -a "$out/tui_cpu.txt"
    $py bench/perf/sample_cost.py --json "$out/sample_cost.json" 2>&1 | tee -a "$out/tui_cpu.txt"
    $py bench/perf/sampler_cpu.py --seconds 20 2>&1 | tee -a "$out/tui_cpu.txt"
    for spec in 120x40:60 200x50:40 80x24:40; do
      size=${spec%%:*} secs=${spec##*:}
      $py bench/perf/tui_cpu.py --size "$size" --seconds "$secs" --json "$out/tui_cpu_$size.json" 2>&1 | tee -a "$out/tui_cpu.txt"
    done
    for spec in 120x40:60 200x50:40; do
      size=${spec%%:*} secs=${spec##*:}
      $py bench/perf/tui_cpu.py --size "$size" --seconds "$secs" --load --json "$out/tui_cpu_${size}_load.json" 2>&1 | tee -a "$out/tui_cpu.txt"
    done
    ;;
  tmux)
    bash bench/gpu/tui_tmux.sh "$out" 2>&1 | tee "$out/tui_tmux.txt"
    ;;
  screens)
    $py bench/tools/tui_screens.py --out "$out" --size 160x48 --timeout 120
    ;;
  rss)
    $py bench/perf/tui_cpu.py --rss-minutes 9 --rss-every 10 --size 120x40 --json "$out/tui_rss.json" 2>&1 | tee "$out/tui_rss.txt"
    ;;
  *)
    echo "usage: bash bench/gpu/tui_gpu.sh cpu|tmux|screens|rss" >&2
    exit 2
    ;;
esac
