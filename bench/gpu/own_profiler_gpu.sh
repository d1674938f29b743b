#!/usr/bin/env bash
# A program that brings its own sitecustomize and its own torch.profiler (bench/gpu/own_profiler/), on a GPU: once
# alone, once under `gputop --run --profile` with gputop's window recording when the program's profiler starts.
# The program's own profile must be the same both times, its output its own, exit 0; gputop's window ends where the
# program's profiler starts (ended_by).   source .whl/use.sh && bash bench/gpu/own_profiler_gpu.sh
set -u
OUT=${OUT:-/tmp/gputop-own-profiler}; mkdir -p "$OUT"
D=bench/gpu/own_profiler
export PYTHONPATH=$PWD/$D/usersite${PYTHONPATH:+:$PYTHONPATH}
timeout 60 python3 $D/train_own_profiler.py --seconds 10 --own-at 5 > "$OUT/alone.log" 2>&1; echo "alone: exit $?" > "$OUT/own_profiler.txt"
GPUTOP_PROFILE_AT=3 timeout 90 python3 -m gputop --json -o "$OUT/profiled.json" --run --profile --profile-seconds 30 \
  --profile-steps 0 -- python3 $D/train_own_profiler.py --seconds 10 --own-at 5 > "$OUT/profiled.log" 2>&1
echo "under gputop --profile: exit $?" >> "$OUT/own_profiler.txt"
{ echo "-- alone"; grep -E "own profile|sitecustomize|disableProfiler|Error" "$OUT/alone.log"
  echo "-- under gputop"; grep -E "own profile|sitecustomize|disableProfiler|Error" "$OUT/profiled.log"
  python3 - "$OUT/profiled.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for w in d["attribution"]["windows"]:
    print("window", w["seq"], w["status"], w.get("why_none"), "ended_by:", w.get("ended_by"), "wall", w.get("wall_s"),
          "steps", w.get("steps"), "kernels", w.get("kernel_count"))
print("exit", d.get("command_exit_code"))
PY
} >> "$OUT/own_profiler.txt" 2>&1
cat "$OUT/own_profiler.txt"
