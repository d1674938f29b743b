#!/usr/bin/env bash
# gputop --doctor on a GPU machine (issue 39), in three steps, each with its own timeout, progress in
# $OUT/progress.txt as it goes:
#   1. every GPU's NVML answers recorded as test data, at rest and under a load ($OUT/health/recorded_*.json: copy
#      them into tests/data/health/);
#   2. `gputop --doctor --quick --json` QUICK_RUNS times, then `gputop --doctor --json` RUNS times, each document in
#      $OUT/{quick,full}_N.json, each run's exit code and wall time in $OUT/walls.txt;
#   3. the spread of each figure over the runs, the findings, the wall times ($OUT/summary.txt).
# The machine's settings are read (nvidia-smi -q, before and after), never changed.
#   source .whl/use.sh && bash bench/gpu/doctor_gpu.sh          # RUNS=10 QUICK_RUNS=10 by default
set -u
OUT=${OUT:-/tmp/gputop-doctor}; mkdir -p "$OUT/health"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export GPUTOP_DOCTOR_DIR="$OUT/state"
RUNS=${RUNS:-10}; QUICK_RUNS=${QUICK_RUNS:-10}
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/progress.txt"; }
now() { date +%s.%N; }
N=$(nvidia-smi -L | wc -l)
log "$N GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')"
nvidia-smi -q > "$OUT/nvidia-smi-q-before.txt" 2>&1

log "1. recording NVML's answers"
timeout 150 python3 bench/gpu/doctor_record.py --out "$OUT/health" > "$OUT/record.txt" 2>&1
log "   record rc=$? ($(ls "$OUT/health" | tr '\n' ' '))"

for mode in quick full; do
  if [ "$mode" = quick ]; then n=$QUICK_RUNS; flag=--quick; limit=180; else n=$RUNS; flag=; limit=360; fi
  log "2. $mode x$n (each bounded by ${limit} s)"
  for i in $(seq 1 "$n"); do
    t0=$(now)
    timeout "$limit" python3 -m gputop --doctor $flag --json -o "$OUT/${mode}_$i.json" > /dev/null 2> "$OUT/${mode}_$i.err"
    rc=$?
    wall=$(python3 -c "print(f'{$(now) - $t0:.1f}')")
    echo "$mode $i rc=$rc wall=$wall" >> "$OUT/walls.txt"
    log "   $mode $i: exit $rc in $wall s"
  done
done

log "3. summary"
nvidia-smi -q > "$OUT/nvidia-smi-q-after.txt" 2>&1
timeout 60 python3 bench/gpu/doctor_summary.py "$OUT" > "$OUT/summary.txt" 2>&1
log "   left running: $(pgrep -f 'gputop.measure.(health|p2p)_load' | wc -l) load process(es)"
cat "$OUT/summary.txt"
