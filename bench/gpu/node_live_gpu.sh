#!/usr/bin/env bash
# The node live (issue 25), on a multi-GPU machine: `gputop --export` watching the node while a torchrun job's last
# rank leaves the all-reduce (bench/gpu/corpus_multi/hang.py --how exit) and, with 3 GPUs or more, a second job
# started apart (its own process group) computes on the last GPU. The exporter must find the jobs by process group
# (analysis.comms.node_jobs, each process's pgid), name the stall on the hung job's GPUs, and leave the other job's
# GPU out of it. Scraped every 2 s; $OUT/node_live.txt gets
# each scrape's gputop_bottleneck and gputop_stalled_seconds lines.
#   source .whl/use.sh && bash bench/gpu/node_live_gpu.sh
set -u
OUT=${OUT:-/tmp/gputop-node-live}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
N=$(nvidia-smi -L | wc -l); [ "$N" -ge 2 ] || { echo "needs 2 GPUs or more"; exit 2; }
LAST=$((N - 1)); HUNG=$(seq -s, 0 $((N - 2)))
PORT=9477
python3 -m gputop --export 127.0.0.1:$PORT > "$OUT/export.log" 2>&1 &
EXP=$!
sleep 3
OTHER=""; W=$N; HUNG=$(seq -s, 0 $LAST)
if [ "$N" -ge 3 ]; then  # the other job: one process on the last GPU, its own session (setsid: its own process group)
  W=$((N - 1)); HUNG=$(seq -s, 0 $((N - 2)))
  setsid python3 -c "
import time, torch
x = torch.randn(8192, 8192, device='cuda:$LAST', dtype=torch.bfloat16)
end = time.time() + 75
while time.time() < end:
    y = x @ x
torch.cuda.synchronize()" > "$OUT/other.log" 2>&1 &
  OTHER=$!
fi
CUDA_VISIBLE_DEVICES=$HUNG setsid torchrun --standalone --nproc-per-node $W bench/gpu/corpus_multi/hang.py \
  --before 8 --leaver $((W - 1)) --how exit --seconds 60 > "$OUT/hung.log" 2>&1 &
JOB=$!
t0=$(date +%s)
{ echo "GPUs $N: hung job on $HUNG ($W ranks, rank $((W - 1)) leaves after 8 s); other job: ${OTHER:+GPU $LAST}"
  for i in $(seq 1 30); do
    sleep 2
    echo "== t+$(( $(date +%s) - t0 )) s"
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=2).read().decode())" \
      2>&1 | grep -E '^gputop_(bottleneck|stalled|straggler|verdict)' | grep -vE ' 0(\.0)?$'
  done; } > "$OUT/node_live.txt" 2>&1
kill -- -$JOB 2>/dev/null; pkill -f corpus_multi/hang.py; [ -n "$OTHER" ] && kill $OTHER 2>/dev/null; kill $EXP; wait 2>/dev/null
sleep 1; echo "processes left: $(pgrep -f 'corpus_multi/hang.py|gputop --export' | wc -l)" >> "$OUT/node_live.txt"
tail -40 "$OUT/node_live.txt"
