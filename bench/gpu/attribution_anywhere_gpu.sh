#!/usr/bin/env bash
# Attribution for any Python GPU program however it is launched, and on a job already running (issue 37), on a
# machine of 2 GPUs (1 works: the 2-process shapes then share it). Each program shape runs once under
#   GPUTOP_PROFILE_AT=$AT python -m gputop --json -o shape_CASE.json --run --profile -- CMD --seconds $S --truth T
# and writes its own truth (torch.profiler over its last steps, bench/gpu/corpus/_corpus.py; a job's every rank:
# T, T.rankN.json); then `watch`: one `gputop --watch PID --profile` of a running prepared process, and `cycles`:
# bench/gpu/anywhere/cycles.py, the throughput a window costs (one against none), request-to-window times, 50
# request cycles on one long-running process.
#   source .whl/use.sh && bash bench/gpu/attribution_anywhere_gpu.sh [CASE ...]   # CASE: a shape, watch, cycles
# $OUT: anywhere.md (the tables), progress.txt (as it goes), anywhere.tar.gz (documents, truths, logs: remade
# after every step, so a run cut short keeps what it did). Scored by bench/tools/anywhere_check.py.
# On 2 H100s the 9 shapes take about 6.5 minutes (decode alone ~1 min), `watch cycles` about 4.5: more than one
# call's 10 minutes together, so two calls:
#   GPUS=2 CUDA_VISIBLE_DEVICES=2,3 bash bench/gpu/attribution_anywhere_gpu.sh            # the shapes
#   GPUS=2 CUDA_VISIBLE_DEVICES=2,3 bash bench/gpu/attribution_anywhere_gpu.sh watch cycles
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
STEPS=${*:-$ORDER watch cycles}
say() { echo "$(date -u +%T) $*" | tee -a "$OUT/progress.txt"; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
  for m in accelerate cupy cupti transformers; do python3 -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1; done
} > "$W/env.txt" 2>&1
cat "$W/env.txt" >> "$OUT/progress.txt"
keep() { tar -C "$(dirname "$W")" -czf "$OUT/anywhere.tar.gz" anywhere; }
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
for c in $STEPS; do
  case " $ORDER " in *" $c "*) ;; *) continue;; esac
  if [ "$c" = accelerate ] && ! python3 -c 'import accelerate' 2>/dev/null; then say "$c: skipped (no accelerate)"; continue; fi
  if [ "$c" = cupy ] && ! python3 -c 'import cupy' 2>/dev/null; then say "$c: skipped (no cupy)"; continue; fi
  if [ "$c" = shell_two ]; then args="$S $W/shape_$c.truth.json"; else args="--seconds $S --truth $W/shape_$c.truth.json"; fi
  say "$c: start"
  GPUTOP_PROFILE_AT=$AT timeout ${CASE_TIMEOUT:-100} python3 -m gputop --json -o "$W/shape_$c.json" --run --profile -- \
    ${CMD[$c]} $args > "$W/shape_$c.log" 2>&1
  say "$c: exit $?"
  keep
done

# --watch PID --profile on a running process started prepared (the line gputop --profile-env prints)
if has watch; then
  say "watch: start"
  ( eval "$(python3 -m gputop --profile-env)"; exec python3 $A/long_run.py --seconds 40 --truth "$W/watch.truth.json" ) \
    > "$W/watch_program.log" 2>&1 &
  P=$!
  sleep 10
  timeout 60 python3 -m gputop --json -o "$W/watch.json" --watch $P --profile --seconds 12 > "$W/watch.log" 2>&1
  say "watch: gputop exit $?"
  wait $P; say "watch: program exit $?"
  keep
fi

if has cycles; then
  say "cycles: start"
  timeout 420 python3 $A/cycles.py "$W" > "$W/cycles.log" 2>&1
  say "cycles: exit $?"
  keep
fi

{ echo "## Program shapes under gputop --run --profile (every window)"; echo
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
keep
say "done"
ls -la "$OUT"
