#!/usr/bin/env bash
# The culprit corpus (issue 36): a DDP job on every GPU (G = 2 or 4, from nvidia-smi -L), healthy for BEFORE s, then
# one rank's fault (bench/gpu/culprit/job.py); each case run as
#     gputop --run --json --record TRACE --timeout T -- torchrun --standalone --nproc-per-node G job.py --case C ...
# its truth (which rank, which kind) written under $OUT/culprit/truth/ BEFORE gputop runs it. Then the summary
# (python -m gputop.evaluate.culprit_corpus $OUT/culprit: culprit named, right rank, time to the hang verdict and to
# the culprit, the confusion table for docs/diagnosis.md). From the repo root on a 2- or 4-GPU machine:
#     source .whl/use.sh && bash bench/gpu/culprit_corpus_gpu.sh [CASE ...]
# Time: 9 hangs x ~42 s + the shared GPU ~40 s + small collectives ~45 s + healthy ~60 s = about 9 minutes; CASES to split it over calls
# (e.g. "sleep exit spin io lock" then "op size nojoin dataloader shared healthy"); HEALTHY_S=600 for a long healthy run.
# $OUT/culprit gets: progress.txt (as it goes), truth/, docs/ (each gputop document), traces/ (--record: test data),
# fr/ (each case's NCCL flight recorder dumps, asked for by gputop through the ranks' pipes: test data for
# tests/data/flight_recorder/), logs/, summary.txt and summary.json; culprit_corpus.tar.gz after every case (a cut-off call keeps what ran).
set -u
OUT=${OUT:-/tmp/gputop-culprit}; D="$OUT/culprit"; mkdir -p "$D"/{truth,docs,traces,logs}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
G=${GPUS:-$(nvidia-smi -L | wc -l)}; [ "$G" -ge 4 ] && G=4; [ "$G" -lt 2 ] && { echo "needs 2 GPUs or more" >&2; exit 2; }  # GPUS=2 on a 4-GPU machine: a 2-GPU job on GPUs 0-1
C=$((G - 1))                       # the culprit: the last rank (a rank that is not 0: rank 0 is where people look)
BEFORE=${BEFORE:-8}; T=${HANG_TIMEOUT:-38}; HEALTHY_S=${HEALTHY_S:-45}
J="torchrun --standalone --nproc-per-node $G bench/gpu/culprit/job.py"
# case -> "kind rank": the truth, by construction (a 2-rank mismatch has no odd one out: either rank is right)
declare -A TRUTH=([exit]="left $C" [sleep]="outside $C" [spin]="outside $C" [io]="outside $C" [lock]="outside $C"
                  [op]="mismatch $C" [size]="mismatch $C" [nojoin]="outside $C" [dataloader]="outside $C"
                  [shared]="straggler $C" [small]="small -" [healthy]="none -")
ORDER="sleep exit spin io lock op size nojoin dataloader shared small healthy"
CASES=${*:-$ORDER}
P="$D/progress.txt"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; git rev-parse --short HEAD
  python3 -c 'import torch; print("torch", torch.__version__)'; echo "G=$G culprit=$C before=$BEFORE timeout=$T"; } > "$P" 2>&1
if [ "${COST:-0}" = 1 ]; then  # what a stack read costs a program, on this node's idle cores (docs/benchmarks.md)
  timeout 300 python3 bench/perf/stack_read_cost.py --seconds 20 --json "$D/stack_read_cost.json" >> "$P" 2>&1
fi
for c in $CASES; do
  set -- ${TRUTH[$c]}
  python3 - "$D/truth/$c.json" "$c" "$1" "$2" "$G" "$BEFORE" <<'PY'
import json, sys
path, case, kind, rank, g, before = sys.argv[1:]
ranks = [] if rank == "-" else ([0, 1] if kind == "mismatch" and int(g) == 2 else [int(rank)])
json.dump({"case": case, "kind": kind, "rank": None if rank == "-" else int(rank), "ranks": ranks, "gpus": int(g),
           "fault_after_s": None if kind in ("none", "straggler", "small") else float(before), "by": "construction"},
          open(path, "w"), indent=1)
PY
  case $c in
    healthy) args="--case healthy --seconds $HEALTHY_S"; limit=$((HEALTHY_S + 30));;
    small)   args="--case small --seconds 35"; limit=70;;  # the flight recorder is read 20 s into the job
    shared)  args="--case healthy --seconds 30"; limit=90
             CUDA_VISIBLE_DEVICES=$C timeout 80 python3 bench/gpu/culprit/hog.py --seconds 45 > "$D/logs/hog.log" 2>&1 &
             sleep 3;;
    *)       args="--case $c --culprit $C --before $BEFORE"; limit=$T;;  # ~8 s of start, 8 of work, the stall
  esac
  t0=$(date +%s.%N)
  mkdir -p "$D/fr/$c"  # the ranks' flight recorder dumps land here (a dump path of the user's: gputop keeps it):
  export TORCH_FR_DUMP_TEMP_FILE="$D/fr/$c/rank_" TORCH_NCCL_DEBUG_INFO_TEMP_FILE="$D/fr/$c/rank_"  # NCCL's, as test data
  timeout -k 10 $((limit + 30)) python3 -m gputop --json -o "$D/docs/$c.json" --record "$D/traces/$c.jsonl.gz" \
    --timeout $limit --grace 3 --run -- $J $args > "$D/logs/$c.log" 2>&1
  rc=$?
  wait 2>/dev/null
  left=$(pgrep -f "bench/gpu/culprit/" | wc -l)
  echo "== $c: exit $rc, $(python3 -c "import time; print(round(time.time() - $t0, 1))") s, processes left: $left" >> "$P"
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1])); c = d.get('culprit') or {}
print('  culprit:', c.get('kind'), c.get('culprit_ranks'), 'named', c.get('named_after_s'), 's after the stall;',
      str(c.get('where') or c.get('sentence'))[:160])
print('  flight recorder:', (c.get('flight_recorder') or {}).get('sentence'), '| collectives:', d.get('collectives'))
for g in d.get('gpus', []):
    v = g.get('verdict') or {}
    print(f\"  gpu {g['index']}: {v.get('class')} ({v.get('subclass')}) {str(v.get('evidence_text'))[:140]}\")
" "$D/docs/$c.json" >> "$P" 2>&1
  pkill -9 -f "bench/gpu/culprit/" 2>/dev/null; sleep 2
  tar -C "$OUT" -czf "$OUT/culprit_corpus.tar.gz" culprit
done
python3 -m gputop.evaluate.culprit_corpus "$D" --json "$D/summary.json" > "$D/summary.txt" 2>&1
cat "$D/summary.txt" >> "$P"
tar -C "$OUT" -czf "$OUT/culprit_corpus.tar.gz" culprit
ls -la "$OUT" "$D"
