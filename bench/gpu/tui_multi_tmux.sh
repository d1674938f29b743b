#!/usr/bin/env bash
# The TUI on a multi-GPU machine (issue 25: "4 and 8 GPUs on screen"), driven in tmux by keys only, while a torchrun
# job all-reduces on every GPU (bench/gpu/corpus_multi/comms_mlp.py under `gputop --tui --run -- torchrun ...`):
#
#   source .whl/use.sh; bash bench/gpu/tui_multi_tmux.sh [OUTDIR]
#
# 80x24: the monitor with every GPU in the strip, g / G to select the next / previous GPU, the help; 160x48 the same;
# then q while the job runs. Each pane is captured as text (OUTDIR/tui_multi/NN_step.txt, packed into
# OUTDIR/tui_multi_tmux.tar.gz) and checked; gputop must exit and no rank may outlive it. PASS/FAIL per check.
set -u
out=${1:-${OUT:-.}}
py=${PYTHON:-python3}
S=gputop_multi
dir=$(mktemp -d)/tui_multi
mkdir -p "$dir"
fails=0
step=0
N=$(nvidia-smi -L | wc -l)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. "$(dirname "$0")/tmux_checks.sh"  # cap, keys, until_on_screen
tmux kill-server 2>/dev/null
tmux new-session -d -s $S -x 80 -y 24 -e TERM=xterm-256color -e NCCL_NVLS_ENABLE=0 \
  -e TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -e NVSHMEM_DISABLE_NVLS=1 \
  "cd '$PWD' && $py -m gputop --tui --run -- torchrun --standalone --nproc-per-node $N bench/gpu/corpus_multi/comms_mlp.py --seconds 60; echo \$? > '$dir/exit_code'; sleep 30"
sleep 25
cap monitor_80x24 "GPU $((N - 1)) "
cap verdict_80x24 'comms|NVLink'
selected() {  # the GPU the strip marks now (the command's first GPU is selected once it shows up on one)
  tmux capture-pane -p -t $S | grep -Eo '▶ GPU ?[0-9]+' | head -1 | grep -Eo '[0-9]+$'
}
i=$(selected); i=${i:-0}
keys g; sleep 2; cap next_gpu_80x24 "▶ GPU ?$(( (i + 1) % N )) "
keys G; sleep 2; cap previous_gpu_80x24 "▶ GPU ?$i "
keys '?'; sleep 1; cap help_80x24 'next / previous GPU'
keys Escape; sleep 1
tmux resize-window -t $S -x 160 -y 48; sleep 3; cap monitor_160x48 "GPU $((N - 1)) "
i=$(selected); i=${i:-0}
keys g; keys g; sleep 2; cap two_gpus_on_160x48 "▶ GPU ?$(( (i + 2) % N )) "
quit_leaves_no_rank 'corpus_multi/comms_mlp'
tmux kill-server 2>/dev/null
tar -czf "$out/tui_multi_tmux.tar.gz" -C "$(dirname "$dir")" tui_multi
echo "captures: $out/tui_multi_tmux.tar.gz; $fails failed"
[ $fails = 0 ]
