#!/usr/bin/env bash
# The culprit of a stall in the TUI, live (issue 36: "the TUI over tmux"), driven by keys only: a torchrun DDP job on
# GPUS GPUs (bench/gpu/culprit/job.py) whose rank 1 leaves the loop after 10 s of healthy steps and sleeps in Python
# (the truth, by construction) under `gputop --tui --run -- torchrun ...`:
#
#   source .whl/use.sh; GPUS=2 bash bench/gpu/tui_culprit_tmux.sh [OUTDIR]
#
# 80x24: the monitor until the stalled GPU's verdict names the culprit ("culprit: rank 1 ...", polled twice a second:
# how many seconds after gputop started; the fault comes ~10 s after the ranks' first step), k (every rank's stack: rank 1 in time.sleep at job.py, the
# others in a collective), Escape; 160x48 the same; then q while the job hangs. Each pane is captured as text
# (OUTDIR/tui_culprit/NN_step.txt, packed into OUTDIR/tui_culprit_tmux.tar.gz) and checked; gputop must exit and no
# rank may outlive it (gputop's exit code is the command's: 128+N when gputop's stop had to kill it). PASS/FAIL per
# check. Run on 4 H100s (2026-11-27, docs/benchmarks.md "The culprit in the TUI, live"): at first every check passed
# but the culprit on the monitor; with the command panel's culprit line (session 7) it came on screen at 80x24 and at
# 160x48, but at 80x24 went again a moment later; with the wait's start kept (session 8) it came at 29.3 s and stayed
# (checked: 20 captures over 10 s).
set -u
out=${1:-${OUT:-.}}
py=${PYTHON:-python3}
N=${GPUS:-2}
S=gputop_culprit
dir=$(mktemp -d)/tui_culprit
mkdir -p "$dir"
fails=0
step=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. "$(dirname "$0")/tmux_checks.sh"  # cap, keys, until_on_screen
tmux kill-server 2>/dev/null
T0=$(date +%s.%N)
tmux new-session -d -s $S -x 80 -y 24 -e TERM=xterm-256color -e NCCL_NVLS_ENABLE=0 \
  -e TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -e NVSHMEM_DISABLE_NVLS=1 \
  "cd '$PWD' && $py -m gputop --tui --run -- torchrun --standalone --nproc-per-node $N bench/gpu/culprit/job.py --case sleep --culprit 1 --before 10; echo \$? > '$dir/exit_code'; sleep 30"
w=$(until_on_screen 'GPU 1 ' 60); echo "the strip shows GPU 1 after $w s"
cap monitor_80x24 'GPU 1 '
w=$(until_on_screen 'culprit: rank 1' 90)
echo "the culprit on screen $(python3 -c "print(f'{$(date +%s.%N) - $T0:.1f}')") s after gputop started (waited $w s more)"
cap culprit_80x24 'culprit: rank 1'
lost=0; for i in $(seq 20); do sleep 0.5; tmux capture-pane -p -t $S | grep -q 'culprit: rank 1' || lost=$((lost + 1)); done
if [ $lost = 0 ]; then echo "PASS the culprit stayed on the 80x24 screen for 20 captures over 10 s"; else
  echo "FAIL the culprit was off the 80x24 screen in $lost of 20 captures over 10 s"; fails=$((fails + 1)); fi
keys k; w=$(until_on_screen 'sleep' 20); echo "k: the stacks with 'sleep' after $w s"
cap stacks_80x24 'rank 1'
cap stacks_line_80x24 'sleep'
keys Escape; sleep 1
tmux resize-window -t $S -x 160 -y 48; sleep 3
cap monitor_160x48 'culprit: rank 1 .*sleep'
keys k; w=$(until_on_screen 'sleep' 20)
cap stacks_160x48 'rank 1.*sleep|sleep.*job\.py'
keys Escape; sleep 1
quit_leaves_no_rank 'culprit/job\.py'
tmux kill-server 2>/dev/null
tar -czf "$out/tui_culprit_tmux.tar.gz" -C "$(dirname "$dir")" tui_culprit
echo "captures: $out/tui_culprit_tmux.tar.gz; $fails failed"
[ $fails = 0 ]
