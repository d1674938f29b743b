# The checks the tmux scripts (tui_tmux.sh, tui_multi_tmux.sh, tui_culprit_tmux.sh) share, sourced by each after it
# set S (the tmux session), dir (where the captures go), step=0 and fails=0:
#   cap NAME PATTERN          capture the pane as dir/NN_NAME.txt; PASS if PATTERN (grep -E) is on it, else FAIL
#                             (counted in fails) and the pane printed
#   keys KEY...               send keys to the pane
#   until_on_screen PAT SECS  poll the pane twice a second until PAT is on it or SECS pass; prints the seconds waited
#   quit_leaves_no_rank PAT   q while a job runs: gputop exits, no process matching PAT outlives it
cap() {
  step=$((step + 1))
  local f size
  f=$(printf '%s/%02d_%s.txt' "$dir" "$step" "$1")
  tmux capture-pane -p -t "$S" > "$f"
  size=$(tmux display -p -t "$S" '#{window_width}x#{window_height}')
  if grep -Eq "$2" "$f"; then echo "PASS $step $1 ($size): /$2/"; else
    echo "FAIL $step $1 ($size): /$2/ not on screen"; fails=$((fails + 1)); cat "$f"; fi
}
keys() { tmux send-keys -t "$S" "$@"; }
until_on_screen() {
  local t0 now
  t0=$(date +%s.%N)
  while :; do
    tmux capture-pane -p -t "$S" | grep -Eq "$1" && break
    now=$(date +%s.%N)
    python3 -c "import sys; sys.exit(0 if $now - $t0 < $2 else 1)" || break
    sleep 0.5
  done
  python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')"
}
quit_leaves_no_rank() {  # quit_leaves_no_rank PATTERN: q while the job runs; gputop must exit (dir/exit_code, written
  # by the session's shell) and no process whose command line matches PATTERN (its ranks and launcher; not gputop,
  # whose command line names the program too) may outlive it
  local ranks left p code
  ranks=$(ps -eo pid=,args= | grep -E "$1" | grep -Ev 'gputop|grep|tmux' | awk '{print $1}' | tr '\n' ' ')
  echo "ranks and launcher before q: ${ranks:-none}"
  keys q; sleep 10
  code=$(cat "$dir/exit_code" 2>/dev/null || echo none)
  case $code in none) echo "FAIL quit: gputop did not exit"; fails=$((fails + 1));;
    *) echo "PASS quit while the job ran: gputop exit code $code";; esac
  left=""; for p in $ranks; do  # a zombie (ended, not reaped yet) is not left running
    case $(ps -o stat= -p "$p" 2>/dev/null) in ''|Z*) ;; *) left="$left $p";; esac; done
  if [ -z "$ranks" ]; then echo "FAIL no rank seen before q"; fails=$((fails + 1))
  elif [ -z "$left" ]; then echo "PASS no rank left of: $ranks"
  else echo "FAIL ranks left:$left"; ps -o pid=,args= -p "${left# }" | cut -c1-120; fails=$((fails + 1)); pkill -9 -f "$1"; fi
}
