#!/usr/bin/env bash
# The cluster live (issue 38), on a 2-GPU machine: two `gputop --export`, one a GPU, as two "nodes" (node-a: GPU 0,
# node-b: GPU 1, NODE_NAME their Hostname label), while one torchrun job spans both: first a straggler (rank 1 does
# 3x the math: bench/gpu/corpus_multi/straggler.py), then a second job whose rank 1 stops taking part and idles while
# rank 0 waits in an all-reduce (hang.py --how idle). Each exporter labels its GPU with the job as its processes
# know it (torchrun's TORCHELASTIC_RUN_ID: the same on both "nodes"), which this script checks on the /metrics text
# itself. The GPU image has no Prometheus: every scrape of both exporters is kept, as Prometheus would store it, in
# $OUT/scrapes.jsonl.gz, and judged afterwards on a machine with Prometheus (backfilled with promtool):
#     python bench/gpu/cluster_live_record.py judge OUT/scrapes.jsonl.gz --at 40 --at 95
# which must name node-b the straggler, then node-b the culprit of the stall.
#   source .whl/use.sh && bash bench/gpu/cluster_live_gpu.sh        # about 2 minutes
set -u
OUT=${OUT:-/tmp/gputop-cluster-live}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
N=$(nvidia-smi -L | wc -l); [ "$N" -ge 2 ] || { echo "needs 2 GPUs" | tee "$OUT/summary.txt"; exit 2; }
P=bench/gpu/corpus_multi
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version --format=csv; git rev-parse --short HEAD; } \
  > "$OUT/summary.txt" 2>&1
CUDA_VISIBLE_DEVICES=0 NODE_NAME=node-a timeout 170 python3 -m gputop --export 127.0.0.1:9501 > "$OUT/node-a.log" 2>&1 &
A=$!
CUDA_VISIBLE_DEVICES=1 NODE_NAME=node-b timeout 170 python3 -m gputop --export 127.0.0.1:9502 > "$OUT/node-b.log" 2>&1 &
B=$!
sleep 4
timeout 160 python3 bench/gpu/cluster_live_record.py record --target node-a=127.0.0.1:9501 \
  --target node-b=127.0.0.1:9502 --seconds 130 --out "$OUT/scrapes.jsonl.gz" > "$OUT/record.log" 2>&1 &
R=$!
t0=$(date +%s)
# the straggler: 40 s of steps, rank 1 (GPU 1, node-b) three times the math
timeout 75 torchrun --standalone --nproc-per-node 2 $P/straggler.py --slow 1 --factor 3 --seconds 40 \
  > "$OUT/straggler.log" 2>&1
echo "straggler: exit $?, $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
# the stall: 8 s of healthy steps, then rank 1 idles (its GPU idle, its process alive) while rank 0 waits
timeout 50 torchrun --standalone --nproc-per-node 2 $P/hang.py --before 8 --leaver 1 --how idle --seconds 40 \
  > "$OUT/hang.log" 2>&1
echo "hang: exit $? (124: stopped by its timeout, as meant), $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
pkill -f "corpus_multi/(hang|straggler).py" 2>/dev/null
wait $R; echo "record: exit $? (0: one job id on both nodes)" >> "$OUT/summary.txt"
cat "$OUT/record.log" >> "$OUT/summary.txt"
kill $A $B 2>/dev/null; wait 2>/dev/null
echo "processes left: $(pgrep -f 'corpus_multi/|gputop --export' | wc -l), total $(( $(date +%s) - t0 )) s" \
  >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
