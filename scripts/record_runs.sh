#!/usr/bin/env bash
# Record every single-GPU workload on the GPU (the --quick version: small files, short demos) for gputop/data/runs/,
# where a machine without a GPU offers them on the workloads page and in gputop --tour.
#   source .whl/use.sh && bash scripts/record_runs.sh      (results in $OUT; about 2-5 minutes, at most 100 s a workload)
# Then copy $OUT/*.jsonl.gz into gputop/data/runs/ (names: WORKLOAD-GPU.jsonl.gz) and commit them.
set -u
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed 's/NVIDIA //; s/ .*//')
for w in roofline batchsize amp cudagraphs dataloader offload fusion transfer; do
  f="$OUT/$w-$gpu.jsonl.gz"
  start=$(date +%s)
  python3 -m gputop --run "$w" --quick --timeout 100 --record-run "$f" > "$OUT/$w.txt" 2>&1
  echo "$w: exit $? in $(( $(date +%s) - start )) s, $(du -k "$f" 2>/dev/null | cut -f1) KiB"; tail -n 4 "$OUT/$w.txt"
done
# each recording replays here as it will without a GPU (headless check: its final document is whole)
python3 - "$OUT" <<'PY'
import sys, glob
from gputop.runner.recording import read_recording
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl.gz")):
    r = read_recording(f)
    d = r["document"]
    print(f.rsplit("/", 1)[1], d["status"], len(r["events"]), "events", len(r["ticks"]), "ticks",
          len(d["points"]), "points", "verdict:", (d.get("verdict") or {}).get("class"))
PY
