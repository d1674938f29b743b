#!/usr/bin/env bash
# One device call for issue 27 (attribution) and issue 23 (where start-up time goes), on any GPU machine:
#   1. bench/perf/startup_profile.py: each start-up step's wall and CPU time, and cProfile's top functions;
#   2. bench/gpu/attribution_gpu.sh: the corpus programs with and without --profile, windows vs hand-run profiles;
#   3. bench/gpu/cupti_check.py: CuPy and JAX without torch (a CUPTI window), one window on the live verdict's
#      cue, and JAX holding CUPTI itself (the window must say CUPTI is busy).
#   source .whl/use.sh && bash bench/gpu/profile_checks_gpu.sh
# Needs cupti-python and its libraries: .whl/extra is installed into /tmp/extra, last on PYTHONPATH (the image's own
# packages first).
set -u
OUT=${OUT:-/tmp/gputop-profile}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/extra .whl/extra/*.whl > "$OUT/extra_install.txt" 2>&1
export PYTHONPATH=$PYTHONPATH:/tmp/extra PYTHONUNBUFFERED=1
timeout 40 python3 bench/perf/startup_profile.py > "$OUT/startup_profile.txt" 2>&1
OUT=$OUT SECONDS_PER_CASE=${SECONDS_PER_CASE:-14} timeout 380 bash bench/gpu/attribution_gpu.sh > "$OUT/attribution_driver.txt" 2>&1
{ timeout 20 python3 -c "from cupti import cupti; print('cupti ok', cupti.get_timestamp())"
  for lib in cupy jax; do
    GPUTOP_PROFILE_AT=6 timeout 60 python3 -m gputop --json --run --profile --profile-seconds 3 -- python3 bench/gpu/cupti_check.py $lib \
      --seconds 14 --truth /tmp/$lib.truth.json > /tmp/$lib.doc.json; echo "$lib rc $?"
    python3 bench/gpu/cupti_check.py compare /tmp/$lib.doc.json /tmp/$lib.truth.json; cp /tmp/$lib.doc.json /tmp/$lib.truth.json "$OUT/"
  done
  GPUTOP_PROFILE_AT=10 timeout 60 python3 -m gputop --json --run --profile -- python3 bench/gpu/cupti_check.py jax --seconds 16 \
    --own-profiler /tmp/jaxtrace > /tmp/j2.doc.json; echo "jax own profiler rc $?"
  python3 -c "import json; print(json.load(open('/tmp/j2.doc.json'))['attribution'])" | cut -c1-600
} > "$OUT/cupti.txt" 2>&1
ls -la "$OUT"
