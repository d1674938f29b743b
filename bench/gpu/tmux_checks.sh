# The checks the tmux scripts (tui_tmux.sh, tui_multi_tmux.sh, tui_culprit_tmux.sh) share, sourced by each after it
# set S (the tmux session), dir (where the captures go), step=0 and fails=0:
#   cap NAME PATTERN          capture the pane as dir/NN_NAME.txt; PASS if PATTERN (grep -E) is on it, else FAIL
#                             (counted in fails) and the pane printed
#   keys KEY...               send keys to the pane
#   until_on_screen PAT SECS  poll the pane twice a second until PAT is on it or SECS pass; prints the seconds waited
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
