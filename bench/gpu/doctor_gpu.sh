#!/usr/bin/env bash
# gputop --doctor on a GPU machine (issue 39), each step with its own timeout, progress in $OUT/progress.txt as it
# goes, everything within DEADLINE_S seconds of the start (a run that would not fit, judged by the last run of its
# mode, is not begun):
#   1. `gputop --doctor --passive --json` twice;
#   2. every GPU's NVML answers recorded as test data, at rest and under a load ($OUT/health/recorded_*.json: copy
#      them into tests/data/health/; RECORD=0 skips it);
#   3. `gputop --doctor --quick --json` and `gputop --doctor --json` in turn (a quick, a full, ...) until QUICK_RUNS
#      and RUNS are done, each document in $OUT/{passive,quick,full}_N.json, its stderr in *_N.err, each run's exit
#      code and wall time in $OUT/walls.txt;
#   4. the spread of each figure over the runs, the findings, the wall times ($OUT/summary.txt).
# The machine's settings are read (nvidia-smi -q, before and after), never changed.
#   source .whl/use.sh && RUNS=3 QUICK_RUNS=4 DEADLINE_S=385 bash bench/gpu/doctor_gpu.sh
# Measured on 2 H100s (2026-11-27, docs/benchmarks.md): passive 0.6 s, the record 23 s, quick 17-23 s, full 40-41 s;
# the example above took 234 s there. The limits below bound a hung run, well above those (more GPUs take longer:
# the pair copies grow with the pairs).
set -u
OUT=${OUT:-/tmp/gputop-doctor}; mkdir -p "$OUT/health"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export GPUTOP_DOCTOR_DIR="$OUT/state"
RUNS=${RUNS:-3}; QUICK_RUNS=${QUICK_RUNS:-4}; DEADLINE_S=${DEADLINE_S:-540}
RECORD_LIMIT=${RECORD_LIMIT:-90}; QUICK_LIMIT=${QUICK_LIMIT:-90}; FULL_LIMIT=${FULL_LIMIT:-180}
T0=$(date +%s); END=$((T0 + DEADLINE_S))
left() { echo $((END - $(date +%s))); }
log() { echo "$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s $*" | tee -a "$OUT/progress.txt"; }
run_doc() {  # MODE N LIMIT: one doctor run; its whole wall time in LASTWALL
  local mode=$1 i=$2 lim=$3 flag=
  [ "$mode" = quick ] && flag=--quick
  [ "$mode" = passive ] && flag=--passive
  local t0; t0=$(date +%s.%N)
  timeout "$lim" python3 -m gputop --doctor $flag --json -o "$OUT/${mode}_$i.json" > /dev/null 2> "$OUT/${mode}_$i.err"
  local rc=$?
  local wall; wall=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
  echo "$mode $i rc=$rc wall=$wall" >> "$OUT/walls.txt"
  log "$mode $i: exit $rc in $wall s (limit $lim s)"
  LASTWALL=${wall%.*}
}

N=$(nvidia-smi -L | wc -l)
log "$N GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')"
nvidia-smi -q > "$OUT/nvidia-smi-q-before.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1

log "1. passive x2"
run_doc passive 1 30
run_doc passive 2 30

if [ "${RECORD:-1}" = 1 ]; then
  log "2. recording NVML's answers"
  timeout "$RECORD_LIMIT" python3 bench/gpu/doctor_record.py --out "$OUT/health" > "$OUT/record.txt" 2>&1
  log "   record rc=$? ($(ls "$OUT/health" | tr '\n' ' '))"
else log "2. (RECORD=0: NVML's answers not recorded)"; fi

log "3. quick x$QUICK_RUNS and full x$RUNS in turn, within $(left) s"
q=0; f=0; QW=$((QUICK_LIMIT / 2)); FW=$((FULL_LIMIT / 2))  # before a run of its mode: half its limit
while [ $q -lt "$QUICK_RUNS" ] || [ $f -lt "$RUNS" ]; do
  for mode in quick full; do
    if [ $mode = quick ]; then [ $q -ge "$QUICK_RUNS" ] && continue; need=$((QW * 13 / 10 + 5)); lim=$QUICK_LIMIT
    else [ $f -ge "$RUNS" ] && continue; need=$((FW * 13 / 10 + 5)); lim=$FULL_LIMIT; fi
    if [ "$(left)" -lt $need ]; then
      log "   no time for another $mode run ($(left) s left; one takes about $([ $mode = quick ] && echo $QW || echo $FW) s)"
      [ $mode = quick ] && q=$QUICK_RUNS || f=$RUNS
      continue
    fi
    [ "$lim" -gt "$(left)" ] && lim=$(left)
    if [ $mode = quick ]; then q=$((q + 1)); run_doc quick $q "$lim"; QW=$LASTWALL
    else f=$((f + 1)); run_doc full $f "$lim"; FW=$LASTWALL; fi
  done
done

log "4. summary"
nvidia-smi -q > "$OUT/nvidia-smi-q-after.txt" 2>&1
timeout 60 python3 bench/gpu/doctor_summary.py "$OUT" > "$OUT/summary.txt" 2>&1
log "   left running: $(pgrep -f 'gputop.measure.(health|p2p)_load' | wc -l) load process(es)"
cat "$OUT/summary.txt"
