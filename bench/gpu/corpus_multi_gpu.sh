#!/usr/bin/env bash
# Multi-GPU corpus (issue 25): third-party-style programs on every GPU of the machine, each recorded by gputop
# (`gputop --json --record TRACE --run -- torchrun ...`), each with a ground truth that does not come from gputop
# (bench/gpu/corpus_multi/_multi.py). From the repo root on a multi-GPU device:
#     source .whl/use.sh && bash bench/gpu/corpus_multi_gpu.sh [CASE ...]
# $OUT gets: summary.txt, nvml_links.json, corpus_multi.tar.gz (traces, gputop documents, truths, logs).
set -u
OUT=${OUT:-/tmp/gputop-corpus-multi}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=4
S=${SECONDS_PER_CASE:-20}
N=$(nvidia-smi -L | wc -l)
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -1 | tr ' /' '__')
W=$(mktemp -d)/corpus_multi_${N}x; mkdir -p "$W"
P=bench/gpu/corpus_multi
H=bench/gpu/heldout_multi
TR="torchrun --standalone --nproc-per-node $N"
declare -A CMD=(
  [ddp_resnet50_overlap]="$TR $P/ddp_resnet.py --overlap 1"
  [ddp_resnet50_after_backward]="$TR $P/ddp_resnet.py --overlap 0"
  [comms_mlp]="$TR $P/comms_mlp.py"
  [fsdp_gpt2]="$TR $P/fsdp_gpt2.py"
  [straggler]="$TR $P/straggler.py --slow 1 --factor 3"
  [hang_exit]="$TR $P/hang.py --before 8 --leaver 1 --how exit"
  [hang_idle]="$TR $P/hang.py --before 8 --leaver $((N - 1)) --how idle"
  [jax_psum]="python3 $P/jax_psum.py"
  # GPUs joined only by PCIe, on an NVLink machine: NCCL without peer-to-peer goes through host memory (SHM), its
  # kernels reading and writing over PCIe (NCCL_DEBUG's INIT lines in the log say "via SHM")
  [comms_mlp_pcie]="env NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT $TR $P/comms_mlp.py"
  [ddp_resnet50_after_backward_pcie]="env NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT $TR $P/ddp_resnet.py --overlap 0"
  # with --profile (issue 27): each rank's window against its own torch.profiler pass (the truth's nccl_share)
  [prof_ddp_resnet50_after_backward]="$TR $P/ddp_resnet.py --overlap 0"
  [prof_held_lightning_ddp]="$TR $H/lightning_ddp.py"
  # held out (bench/gpu/heldout_multi/): written after the classifier's rules were set, never used to tune them
  [held_lightning_ddp]="$TR $H/lightning_ddp.py"
  [held_hf_trainer_ddp]="$TR $H/hf_trainer_ddp.py"
  [held_alltoall_moe]="$TR $H/alltoall_moe.py"
  [held_pipeline_stall]="$TR $H/pipeline_stall.py --before 8"
  [held_host_straggler]="$TR $H/host_straggler.py --slow $((N - 2)) --host-ms 40"
)
HELD="held_alltoall_moe held_pipeline_stall held_host_straggler held_lightning_ddp held_hf_trainer_ddp"
ORDER="comms_mlp ddp_resnet50_after_backward ddp_resnet50_overlap straggler hang_exit hang_idle fsdp_gpt2 jax_psum"
CASES=${*:-$ORDER}
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nvidia-smi topo -m
  git rev-parse --short HEAD; python3 -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'; } > "$OUT/summary.txt" 2>&1
python3 $P/nvml_links.py > "$OUT/nvml_links.json" 2>&1
for c in $CASES; do
  extra=""; case $c in hang_*|held_pipeline_stall) extra="--timeout 40 --grace 3";; prof_*) extra="--profile";; esac
  t0=$(date +%s.%N)
  timeout ${CASE_TIMEOUT:-90} python3 -m gputop --json -o "$W/$c.json" --record "$W/$c.jsonl.gz" $extra \
    --run -- ${CMD[$c]} --seconds "$S" --truth "$W/${c}_truth_rank{rank}.json" > "$W/$c.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  left=$(pgrep -f "corpus_multi/|heldout_multi/" | wc -l)
  echo "== $c: exit $rc, $(python3 -c "print(round($t1-$t0,1))") s, processes left: $left" >> "$OUT/summary.txt"
  python3 - "$W/$c.json" >> "$OUT/summary.txt" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for g in d.get("gpus", []):
    v = g.get("verdict") or {}
    print(f"  gpu {g.get('index')}: {v.get('class')} ({v.get('subclass')}) {v.get('confidence')}: {str(v.get('evidence_text'))[:150]}")
for w in (d.get("attribution") or {}).get("windows", []):
    for p in w.get("per_process") or [w]:
        cats = {c["category"]: round(100 * c["share"], 1) for c in p.get("categories") or []}
        print(f"  window {w['seq']} pid {p.get('pid')}: {p.get('status', w['status'])} {p.get('why_none') or ''} "
              f"steps {p.get('steps')} wall {p.get('wall_s')} started {p.get('started_at')} comms {cats.get('communication')}% {cats}")
PY
  for f in "$W"/${c}_truth_rank*.json; do [ -f "$f" ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('top_kernels',None); print('  truth', d)" "$f" >> "$OUT/summary.txt"; done
  pkill -9 -f "corpus_multi/|heldout_multi/" 2>/dev/null; sleep 1
  tar -C "$(dirname "$W")" -czf "$OUT/corpus_multi.tar.gz" "$(basename "$W")"  # after every case: a cut-off call keeps what ran
done
tar -C "$(dirname "$W")" -czf "$OUT/corpus_multi.tar.gz" "$(basename "$W")"
ls -la "$OUT"
