#!/usr/bin/env bash
# Attribution for any Python GPU program however it is launched, and on a job already running (issue 37), on a
# machine of 2 GPUs (1 works: the 2-process shapes then share it). Each program shape runs once under
#   GPUTOP_PROFILE_AT=$AT python -m gputop --json -o shape_CASE.json --run --profile -- CMD --seconds $S --truth T
# and writes its own truth (torch.profiler over its last steps, bench/gpu/corpus/_corpus.py); then one
# `gputop --watch PID --profile` of a running prepared process, and bench/gpu/anywhere/cycles.py: the throughput a
# window costs (one against none), request-to-window times, 50 request cycles on one long-running process.
#   source .whl/use.sh && bash bench/gpu/attribution_anywhere_gpu.sh [CASE ...]
# $OUT: anywhere.md (the tables), progress.txt (as it goes), anywhere.tar.gz (documents, truths, logs).
# About 7 minutes on 2 H100s: 9 shapes x ~25 s, the watch ~25 s, cycles.py ~3 min.
set -u
OUT=${OUT:-/tmp/gputop-anywhere}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1
S=${SECONDS_PER_CASE:-12}
AT=${PROFILE_AT:-6}
W=$(mktemp -d)/anywhere; mkdir -p "$W"
A=bench/gpu/anywhere
C=bench/gpu/corpus
N=${GPUS:-$(nvidia-smi -L | wc -l)}  # GPUS=2 CUDA_VISIBLE_DEVICES=2,3: on two GPUs of a larger machine
declare -A CMD=(
  [tp_spawn]="python3 $A/tp_spawn.py"
  [torchrun_plain]="torchrun --standalone --nproc-per-node $N $A/plain_allreduce.py"
  [accelerate]="accelerate launch --multi_gpu --num_processes $N --num_machines 1 --mixed_precision no --dynamo_backend no $A/accelerate_train.py"
  [shell_two]="bash $A/two_pythons.sh"
  [infer]="python3 $A/single.py --shape infer"
  [server]="python3 $A/single.py --shape server"
  [graphs]="python3 $A/single.py --shape graphs"
  [decode]="python3 $C/hf_gpt2_generate.py"
  [cupy]="python3 $C/cupy_loops.py --op gemm"
)
ORDER="tp_spawn torchrun_plain accelerate shell_two infer server graphs decode cupy"
say() { echo "$(date -u +%T) $*" | tee -a "$OUT/progress.txt"; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
  for m in accelerate cupy cupti transformers; do python3 -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1; done
} > "$W/env.txt" 2>&1
cat "$W/env.txt" >> "$OUT/progress.txt"
for c in ${*:-$ORDER}; do
  if [ "$c" = accelerate ] && ! python3 -c 'import accelerate' 2>/dev/null; then say "$c: skipped (no accelerate)"; continue; fi
  if [ "$c" = cupy ] && ! python3 -c 'import cupy' 2>/dev/null; then say "$c: skipped (no cupy)"; continue; fi
  if [ "$c" = shell_two ]; then args="$S $W/shape_$c.truth.json"; else args="--seconds $S --truth $W/shape_$c.truth.json"; fi
  say "$c: start"
  GPUTOP_PROFILE_AT=$AT timeout ${CASE_TIMEOUT:-100} python3 -m gputop --json -o "$W/shape_$c.json" --run --profile -- \
    ${CMD[$c]} $args > "$W/shape_$c.log" 2>&1
  say "$c: exit $?"
  tar -C "$(dirname "$W")" -czf "$OUT/anywhere.tar.gz" anywhere
done

# --watch PID --profile on a running process started prepared (the line gputop --profile-env prints)
say "watch: start"
( eval "$(python3 -m gputop --profile-env)"; exec python3 $A/long_run.py --seconds 40 --truth "$W/watch.truth.json" ) \
  > "$W/watch_program.log" 2>&1 &
P=$!
sleep 10
timeout 60 python3 -m gputop --json -o "$W/watch.json" --watch $P --profile --seconds 12 > "$W/watch.log" 2>&1
say "watch: gputop exit $?"
wait $P; say "watch: program exit $?"

say "cycles: start"
timeout 420 python3 $A/cycles.py "$W" > "$W/cycles.log" 2>&1
say "cycles: exit $?"

{ echo "## Program shapes under gputop --run --profile (each first window)"; echo
  python3 bench/tools/anywhere_check.py "$W"; echo
  echo "## --watch PID --profile of a running prepared process"; echo
  python3 - "$W/watch.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:
    print("- no document:", exc); raise SystemExit
a = d.get("attribution") or {}
for w in a.get("windows") or []:
    first = w["started_at"] - w["request_read_at"] if w.get("started_at") and w.get("request_read_at") else None
    print("- window %s: %s %s, asked %.1f s after the start, started %s s after the loader read it, %s" % (
        w["seq"], w["status"], w.get("started_by") or w.get("why_none"), w["asked_at_s"],
        "%.2f" % first if first is not None else "n/a", w.get("headline") or ""))
print("- why none:", a.get("why_none"))
PY
  echo; echo "## A window's cost, request times, 50 request cycles (cycles.py)"; echo
  cat "$W/cycles.md" 2>/dev/null || echo "- cycles.py wrote nothing (see cycles.log)"
} > "$OUT/anywhere.md" 2>&1
tar -C "$(dirname "$W")" -czf "$OUT/anywhere.tar.gz" anywhere
say "done"
ls -la "$OUT"
