#!/usr/bin/env bash
# The roofline on a GPU machine, from the repo root (source .whl/use.sh first for the screenshots):
#   1. cold `gputop --run roofline --json` (empty CuPy kernel cache), timed;
#   2. bench/gpu/roofline_peers.py: torch's best streaming ops and 8192^3 bf16/fp16 matmuls, same call, with
#      the roof / peer ratios;
#   3. screenshots of the results view at 80x24 and 160x48 (bench/tools/tui_screens.py, needs textual).
# Everything lands in $OUT (roofline-<gpu>.json, roofline_gpu.txt, tui_screens_*.tar.gz). ~2 minutes.
set -u
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -1 | tr ' ' '_' | tr -cd 'A-Za-z0-9_-')
log="$OUT/roofline_gpu.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv | tee "$log"
cache=$(mktemp -d)
t0=$(date +%s.%N)
CUPY_CACHE_DIR=$cache PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} $py -m gputop --run roofline --json -o "$OUT/roofline-$gpu.json" 2>"$OUT/roofline-stderr.txt"
rc=$?
t1=$(date +%s.%N)
rm -rf "$cache"
echo "gputop --run roofline --json (cold CuPy cache): exit $rc, $($py -c "print(round($t1 - $t0, 1))") s wall" | tee -a "$log"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} $py bench/gpu/roofline_peers.py "$OUT/roofline-$gpu.json" 2>&1 | tee -a "$log"
if $py -c "import textual" 2>/dev/null; then
  for size in 80x24 160x48; do
    d=$(mktemp -d)
    PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} timeout 100 $py bench/tools/tui_screens.py --out "$d" --workloads roofline --size "$size" --settle 2 >>"$log" 2>&1
    cp "$d/tui_screens.tar.gz" "$OUT/tui_screens_$size.tar.gz" 2>/dev/null || echo "no screenshots at $size" | tee -a "$log"
    rm -rf "$d"
  done
fi
