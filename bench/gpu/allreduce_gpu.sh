#!/usr/bin/env bash
# The allreduce workload and the comms-bound class on a machine with 2+ GPUs (not run yet: no multi-GPU machine
# so far). From the repository root on the device: source .whl/use.sh && bash bench/gpu/allreduce_gpu.sh
# Needs: 2 or more GPUs, torch with CUDA, nvidia-ml-py. About 3-6 minutes. Files in $OUT (at most 8):
#   allreduce.json       gputop --run allreduce --json (every GPU, NCCL): busbw vs size, the DDP step
#   allreduce.txt        its text report
#   monitor.json         gputop --run -- torchrun ... (a DDP loop with overlap off): one verdict per GPU
#   nvml_links.json      what NVML says joins GPU 0 and 1 (read_link), and each GPU's NVLink facts
#   pytest.txt           the GPU-marked tests and the allreduce/comms tests
#   summary.txt          what to look at, with PASS/FAIL lines
set -u
OUT=${OUT:-/tmp/allreduce_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python}
NGPU=$(nvidia-smi -L | wc -l)
echo "GPUs: $NGPU" | tee "$OUT/summary.txt"
nvidia-smi topo -m >> "$OUT/summary.txt" 2>&1

$PY - > "$OUT/nvml_links.json" <<'PYEOF'
import json
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import device_count, read_link, read_nvlink
from gputop.analysis.links import link_peak
nvml = Nvml()
n = device_count(nvml)
facts = read_link(nvml, 0, 1) if n >= 2 else None
print(json.dumps({"gpus": n, "link_0_1": facts, "peak": link_peak(facts),
                  "nvlink": [read_nvlink(nvml, i) for i in range(n)], "na_reasons": nvml.na_reasons}, indent=1))
PYEOF

timeout 400 $PY -m gputop --run allreduce --json -o "$OUT/allreduce.json" > /dev/null 2>> "$OUT/summary.txt"
echo "allreduce exit: $?" >> "$OUT/summary.txt"
$PY -m gputop --run allreduce --param sizes=4096,1073741824 --param steps=5 2>&1 | tail -40 > "$OUT/allreduce.txt"

# a DDP loop with the gradient all-reduce after backward (no overlap), watched through torchrun
cat > /tmp/ddp_no_overlap.py <<'PYEOF'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(r)
m = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(8)]).cuda()
ps = list(m.parameters()); x = torch.randn(32, 8192, device="cuda")
end = time.time() + 25
while time.time() < end:
    m(x).square().mean().backward()
    flat = torch.cat([p.grad.reshape(-1) for p in ps]); dist.all_reduce(flat)
    for p in ps: p.grad = None
torch.cuda.synchronize(); dist.destroy_process_group()
PYEOF
timeout 120 $PY -m gputop --json -o "$OUT/monitor.json" --run -- $PY -m torch.distributed.run --standalone \
  --nproc-per-node="$NGPU" /tmp/ddp_no_overlap.py > /dev/null 2>> "$OUT/summary.txt"
echo "monitor exit: $?" >> "$OUT/summary.txt"

timeout 200 $PY -m pytest -q -p no:cacheprovider tests/test_allreduce.py tests/test_comms_class.py > "$OUT/pytest.txt" 2>&1

$PY - >> "$OUT/summary.txt" <<'PYEOF'
import json, os
out = os.environ.get("OUT", "/tmp/allreduce_out")
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as exc:
        print(f"{name}: unreadable ({exc})"); return None
d = load("allreduce.json")
if d:
    link = (d.get("results") or {}).get("link_peak") or {}
    big = max((q for q in d["points"] if q["phase"] == "bus bandwidth"), key=lambda q: q["size_bytes"], default=None)
    if big and link.get("peak_gbps"):
        pct = 100 * big["busbw_gbps"] / link["peak_gbps"]
        print(f"{'PASS' if pct >= 70 else 'FAIL'} busbw at {big['size_bytes']} B: {big['busbw_gbps']:.1f} GB/s = {pct:.0f}% "
              f"of the {link['kind']} peak {link['peak_gbps']:.0f} GB/s ({link.get('source')})")
    else:
        print("FAIL no busbw point or no link peak:", link)
    v = d.get("verdict") or {}
    print(f"{'PASS' if v.get('class') == 'comms-bound' else 'CHECK'} DDP step verdict: {v.get('class')} ({v.get('subclass')}): {v.get('evidence_text')}")
m = load("monitor.json")
if m:
    for g in m.get("gpus", []):
        ov = g.get("verdict") or {}
        print(f"GPU {g['index']} used={g['used']}: {ov.get('class')} ({ov.get('subclass')}) {ov.get('evidence_text', '')[:160]}")
    comms = [g for g in m.get("gpus", []) if g["used"] and (g.get("verdict") or {}).get("class") == "comms-bound"]
    print(f"{'PASS' if len(comms) >= 2 else 'CHECK'} comms-bound on {len(comms)} used GPUs (overlap off)")
PYEOF
cat "$OUT/summary.txt"
