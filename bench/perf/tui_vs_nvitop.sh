#!/usr/bin/env bash
# gputop's TUI vs nvitop at 0.25 s on the GPU machine, then the observer effect (about 3.5 minutes):
#   source .whl/use.sh && bash bench/perf/tui_vs_nvitop.sh                 (results in $OUT)
# 1. bench/perf/tui_vs_nvitop.py: both launched together in a pty at 80x24, 120x40 and 160x48: CPU over the first
#    30 s from launch, CPU in steady state (the 15 s after), time to the first frame; ratios gputop/nvitop.
# 2. bench/perf/observer_effect.py: a bf16 matmul loop's and a copy loop's throughput with gputop sampling at
#    10 Hz vs paused, alternating in the same run; % difference.
# Wheels to carry (.whl): the TUI stack and nvitop==1.7.2 (../shared/device/wheels.sh nvitop==1.7.2).
# Byte-compiled first: the device's wheels go in with `pip install --no-compile` and the checkout has no
# __pycache__, so without this every module (gputop's, Textual's, nvitop's) would be compiled from source
# at each launch (0.68 s of start-up on 2026-11-23). A real `pip install` byte-compiles; this measures that.
set -u
OUT=${OUT:-/tmp/gputop-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
site=${SITE:-/tmp/site}  # where .whl/use.sh installed the wheels
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc | sed 's/^/cores: /'
  $py -c 'import nvitop, textual; print("nvitop", nvitop.__version__, "textual", textual.__version__)'; } | tee "$OUT/tui_vs_nvitop.txt"
{ t0=$(date +%s%N)
  $py -m compileall -q -j 0 gputop "$site" > /tmp/compileall.log 2>&1 || echo "compileall: $(grep -c -i error /tmp/compileall.log) files did not compile (they compile at import, as before)"
  echo "byte-compiled gputop and $site in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(find gputop "$site" -name '*.pyc' | wc -l) .pyc files"
} 2>&1 | tee -a "$OUT/tui_vs_nvitop.txt"
# where gputop's start-up CPU goes on this machine: imports, and a profile of the first second
$py -X importtime -c 'import gputop.tui.app' 2> "$OUT/importtime.txt"
sort -t'|' -k2 -n "$OUT/importtime.txt" | tail -n 12 | tee -a "$OUT/tui_vs_nvitop.txt"
timeout 60 $py - <<'PY' 2>&1 | tail -n 40 | tee -a "$OUT/tui_vs_nvitop.txt"
import asyncio, cProfile, pstats, time
t0 = time.perf_counter()
pr = cProfile.Profile(); pr.enable()
from gputop.cli import parse
from gputop.tui.app import make_app
app = make_app(parse([])[0])
async def main():
    async with app.run_test(size=(160, 48)) as pilot:
        while app.frames < 1:
            await pilot.pause(0.01)
        print(f"start-up to the first frame (headless, live NVML): {time.perf_counter() - t0:.2f} s wall")
        await pilot.pause(1.0)
asyncio.run(main())
pr.disable()
pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
PY
# the live verdict's cost (judged once a second over up to LIVE_MAX_S of ticks): one classify of an idle
# window of that length, as the monitor does it at rest
timeout 60 $py - <<'PY' 2>&1 | tee -a "$OUT/tui_vs_nvitop.txt"
import sys, time
sys.path.insert(0, "bench/perf")
from tui_cpu import idle_trace
from gputop.analysis import thresholds as T
from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.telemetry.trace import read_trace
header, rows = read_trace(idle_trace())
ticks = [r for r in rows if r.get("type") != "mark"][:int(T.LIVE_MAX_S * 10)]
static = header["devices"][0]
peaks = compute_peaks(static)
for _ in range(3):
    classify(ticks, static, peaks, prefer="idle")
t0, n = time.process_time(), 50
for _ in range(n):
    classify(ticks, static, peaks, prefer="idle")
ms = (time.process_time() - t0) / n * 1e3
print(f"live verdict: classify({len(ticks)} idle ticks, {T.LIVE_MAX_S:g} s) {ms:.2f} ms CPU; once a second: {ms / 10:.2f}% of a core")
PY
timeout 200 $py bench/perf/tui_vs_nvitop.py --json "$OUT/tui_vs_nvitop.json" 2>&1 | tee -a "$OUT/tui_vs_nvitop.txt"
timeout 100 $py bench/perf/observer_effect.py --json "$OUT/observer_effect.json" 2>&1 | tee "$OUT/observer_effect.txt"
