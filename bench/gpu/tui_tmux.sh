#!/usr/bin/env bash
# Drive the TUI in tmux, keyboard only, the way a user over SSH would, on the GPU machine:
#
#   source .whl/use.sh; bash bench/gpu/tui_tmux.sh [OUTDIR]
#
# 80x24: the monitor, the workloads page, run the roofline and watch it live on both pages; resize to
# 200x50 while it runs, and back; help; run amp and cancel it (c); run cudagraphs and quit (q) while it
# runs. The pane is captured as text after each step (OUTDIR/tmux/NN_step.txt, packed into
# OUTDIR/tui_tmux.tar.gz) and checked: each capture must show what the step is about, gputop must exit 0,
# and no workload process may outlive it. Prints PASS/FAIL per check; exit 1 if any failed.
# PYTHON picks the interpreter (default python3); GPUTOP_ARGS adds arguments to gputop. Without a GPU
# the GPU-only checks (SM activity, workloads on the GPU) fail by design.
set -u
out=${1:-${OUT:-.}}
py=${PYTHON:-python3}
S=gputop_tmux
dir=$(mktemp -d)/tmux
mkdir -p "$dir"
fails=0
step=0

. "$(dirname "$0")/tmux_checks.sh"  # cap, keys, until_on_screen

tmux kill-server 2>/dev/null
tmux new-session -d -s $S -x 80 -y 24 -e TERM=xterm-256color \
  "cd '$PWD' && $py -m gputop ${GPUTOP_ARGS:-}; echo \$? > '$dir/exit_code'; sleep 30"
sleep 8
cap monitor_80x24 'SM activity.*%'
keys '?'; sleep 1; cap help 'gputop keys'
keys Escape; sleep 1
keys 2; sleep 2; cap workloads_80x24 'roofline'
keys End; sleep 1; keys r; sleep 6; cap roofline_running_80x24 'roofline'
keys 1; sleep 3; cap monitor_while_running_80x24 'SM activity.*%'
tmux resize-window -t $S -x 200 -y 50; sleep 3; cap monitor_running_200x50 'roofline (running|ok)'
keys 2; sleep 3; cap workloads_running_200x50 'roofline'
sleep 15; cap roofline_done_200x50 'ridge|roof'
tmux resize-window -t $S -x 80 -y 24; sleep 3; cap back_to_80x24 'roofline|run 1/1'
keys Home; sleep 1; keys r; sleep 8; cap amp_running 'amp'
keys c; sleep 6; cap amp_cancelled 'amp interrupted'
keys 1; sleep 2; keys 2; sleep 1; keys Down Down; sleep 1; keys r; sleep 8; cap cudagraphs_running 'cudagraphs'
keys q; sleep 10
code=$(cat "$dir/exit_code" 2>/dev/null || echo none)
if [ "$code" = 0 ]; then echo "PASS quit while cudagraphs ran: gputop exit code 0"; else
  echo "FAIL quit: exit code $code"; fails=$((fails + 1)); fi
left=$(pgrep -f 'gputop.workloads|gputop/workloads|workloads/.*\.py' || true)
if [ -z "$left" ]; then echo "PASS no workload process left"; else
  echo "FAIL workload processes left: $left"; fails=$((fails + 1)); fi
tmux kill-server 2>/dev/null
tar -czf "$out/tui_tmux.tar.gz" -C "$(dirname "$dir")" tmux
echo "captures: $out/tui_tmux.tar.gz; $fails failed"
[ $fails = 0 ]
