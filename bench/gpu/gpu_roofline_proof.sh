#!/usr/bin/env bash
# GPU run: roofline benchmark + GPU tests + labelled proof traces for the classifier + sampler cost.
# From the repo root after `source .whl/use.sh`; everything lands in $OUT/r.tgz (plus the log).
set -u
OUT=${OUT:-/tmp/gputop-out}; W=$OUT/r; mkdir -p "$W"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT="$W" bash bench/gpu/roofline_gpu.sh 2>&1 | tail -30
OUT="$W" python3 bench/perf/sampler_cpu.py --seconds 20
python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_live.py tests/test_runner_gpu.py tests/test_roofline_workload.py 2>&1 | tail -15
python3 bench/gpu/proof/record_all.py --out "$W/proof" --seconds 8 2>&1 | tail -30
tar czf "$OUT/r.tgz" -C "$OUT" r && rm -rf "$W"
