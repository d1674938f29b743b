#!/usr/bin/env bash
# Labelled traces of third-party code under gputop, and a confusion table, on one GPU (issue 11).
# Run from the repo root on a GPU machine (after `source .whl/use.sh`):
#     bash bench/gpu/corpus_gpu.sh                 # every case (about 4 minutes on an H100)
#     bash bench/gpu/corpus_gpu.sh cupy_gemm jax   # some cases
# Each case is one program of bench/gpu/corpus/ (Hugging Face transformers, torchvision, CuPy, torch.compile,
# JAX; random weights, synthetic data) run as
#     python -m gputop --json --record TRACE --run -- python bench/gpu/corpus/PROG.py --seconds S --truth T.json
# The program writes its ground truth (torch.profiler's kernel-time breakdown over its last steps, or its
# construction: bench/gpu/corpus/_corpus.py) to T.json, with its timed loop's start and end; the trace is then
# copied as corpus_<gpu>_CASE.jsonl.gz with that loop marked "steady loop expect=<truth>"
# (gputop/evaluate/corpus_truth.py), so the calibration and tests/test_classify_traces.py score that window.
# Results in $OUT (at most 4 files): summary_<gpu>.md (env, per case: truth, gputop's verdict, wall time;
# the confusion table; the calibration table over these traces), corpus_<gpu>.tar.gz (traces, truth JSON,
# gputop's JSON documents, logs). Copy traces/corpus_*.jsonl.gz into tests/data/traces/ to make them test
# data, then run `python -m gputop.evaluate.calibration --write`.
set -u
OUT=${OUT:-/tmp/gputop-corpus}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SECONDS_PER_CASE=${SECONDS_PER_CASE:-8}
CASE_TIMEOUT=${CASE_TIMEOUT:-75}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1 | tr ' /' '__')
GPU=${GPU:-unknown}
case "$GPU" in *H100*) GPU_SHORT=h100;; *H200*) GPU_SHORT=h200;; *) GPU_SHORT=$(echo "$GPU" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_');; esac
export GPU_SHORT
WORK=$(mktemp -d); mkdir -p "$WORK/traces"
SUMMARY="$OUT/summary_$GPU.md"

declare -A CMD=(
  [hf_gpt2_train]="bench/gpu/corpus/hf_gpt2_train.py"
  [hf_gpt2_generate]="bench/gpu/corpus/hf_gpt2_generate.py"
  [tv_resnet50_workers8]="bench/gpu/corpus/tv_resnet_train.py --workers 8"
  [tv_resnet18_heavy_cpu]="bench/gpu/corpus/tv_resnet_train.py --workers 0 --heavy 1 --model resnet18 --batch 64"
  [cupy_gemm]="bench/gpu/corpus/cupy_loops.py --op gemm"
  [cupy_fft]="bench/gpu/corpus/cupy_loops.py --op fft"
  [compiled_mlp]="bench/gpu/corpus/compiled_mlp.py"
  [jax]="bench/gpu/corpus/jax_step.py"
)
ORDER="cupy_gemm cupy_fft hf_gpt2_train hf_gpt2_generate tv_resnet50_workers8 tv_resnet18_heavy_cpu compiled_mlp jax"
CASES=${*:-$ORDER}

{
  echo "# gputop corpus on $GPU"
  echo
  echo '```'
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  echo "cpus: $(nproc)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
  python3 -c 'import transformers, torchvision; print("transformers", transformers.__version__, "torchvision", torchvision.__version__)' 2>&1 | tail -1
  python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -1
  python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tail -1
  git rev-parse --short HEAD 2>/dev/null
  echo '```'
  echo
  echo "| case | truth (by) | gputop verdict | confidence | wall s | exit |"
  echo "|---|---|---|---|---|---|"
} > "$SUMMARY"

for case in $CASES; do
  cmd=${CMD[$case]:-}
  if [ -z "$cmd" ]; then echo "unknown case $case (known: $ORDER)"; continue; fi
  echo "== $case  ($(date -u +%H:%M:%S))"
  t0=$(date +%s)
  timeout "$CASE_TIMEOUT" python3 -m gputop --json --record "$WORK/$case.jsonl.gz" --run -- \
    python3 $cmd --seconds "$SECONDS_PER_CASE" --truth "$WORK/$case.truth.json" \
    > "$WORK/$case.json" 2> "$WORK/$case.log"
  rc=$?
  wall=$(( $(date +%s) - t0 ))
  row=$(python3 - "$WORK" "$case" <<'PY'
import json, os, shutil, sys
work, case = sys.argv[1], sys.argv[2]
try:
    truth = json.load(open(f"{work}/{case}.truth.json"))
except (OSError, ValueError):
    truth = {"label": None, "by": "none (the program failed: see its log)"}
try:
    v = json.load(open(f"{work}/{case}.json"))["verdict"] or {}
except (OSError, ValueError, KeyError, TypeError):
    v = {}
if truth.get("label") and os.path.exists(f"{work}/{case}.jsonl.gz"):
    # the timed loop marked "steady loop expect=<label>" (gputop/evaluate/corpus_truth.py): the labelled window
    import subprocess
    gpu = os.environ.get("GPU_SHORT", "gpu")
    subprocess.run([sys.executable, "-m", "gputop.evaluate.corpus_truth", f"{work}/{case}.jsonl.gz",
                    f"{work}/{case}.truth.json", f"{work}/traces/corpus_{gpu}_{case}.jsonl.gz"], check=False,
                   stdout=sys.stderr)
extra = {k: truth[k] for k in ("busy", "gemm_share", "mean_kernel_us", "kernels_per_s") if k in truth}
print(f"{truth.get('label')} ({truth.get('by')}{', ' + json.dumps(extra) if extra else ''}) | "
      f"{v.get('class')} {('(' + v['subclass'] + ')') if v.get('subclass') else ''} | {v.get('confidence')}")
PY
)
  echo "   $row  wall ${wall}s exit $rc"
  echo "| $case | $row | $wall | $rc |" >> "$SUMMARY"
  tail -3 "$WORK/$case.log" | sed 's/^/   log: /'
done

{
  echo
  echo "## Confusion table (bench/gpu/proof/confusion.py over these traces)"
  echo
  python3 bench/gpu/proof/confusion.py "$WORK/traces" 2>&1
  echo
  echo "## Calibration over these traces (gputop/evaluate/calibration.py; the demo and tests/data/traces included)"
  echo
  python3 -m gputop.evaluate.calibration --traces "$WORK/traces" 2>&1
} >> "$SUMMARY"
tar -C "$WORK" -czf "$OUT/corpus_$GPU.tar.gz" .
rm -rf "$WORK"
cat "$SUMMARY"
echo "results: $SUMMARY $OUT/corpus_$GPU.tar.gz"
