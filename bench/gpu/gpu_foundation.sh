#!/usr/bin/env bash
# Foundation checks on a GPU machine (run from the repo root after `source .whl/use.sh`; results in $OUT):
# NVML facts vs nvidia-smi, static info of each GPU, GPM probe, the demo trace, sampler CPU cost.
set -u
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L; nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
python3 -c 'import pynvml, torch, cupy, textual, sys; print("python", sys.version.split()[0], "pynvml", pynvml.__file__, "torch", torch.__version__, "cupy", cupy.__version__, "textual", textual.__version__)'
# --once and nvidia-smi at the same moment
q=index,name,memory.total,memory.used,clocks.max.sm,clocks.max.mem,power.draw,power.limit,pcie.link.gen.max,pcie.link.width.max,driver_version
python3 -m gputop --once --json > "$OUT/once.json" 2> "$OUT/once.err" & nvidia-smi --query-gpu=$q --format=csv,nounits > "$OUT/smi_query.csv"; wait
cat "$OUT/once.err"; cat "$OUT/smi_query.csv"
python3 - <<'PY' > "$OUT/static.json"
import json
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import read_static, device_count
nvml = Nvml(); assert nvml.available(), nvml.error
print(json.dumps({"static": [read_static(nvml, i) for i in range(device_count(nvml))], "na_reasons": nvml.na_reasons}, indent=2))
PY
head -c 1500 "$OUT/static.json"; echo
python3 -m gputop --once
python3 scripts/record_demo.py "$OUT/demo.jsonl.gz" --seconds-per-phase 7
python3 bench/perf/sampler_cpu.py --seconds 30
