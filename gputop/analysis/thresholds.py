"""The thresholds the classifier's rules share, and those of the window around them, each with its reason.

A rule's own thresholds are in its module (gputop/analysis/rules/<class>.py); here are those of the window (its
length, how samples count as busy), those several rules share (a GPU busy with nothing near a peak, the fallback
without GPM), how a verdict is put together (mixed classes, confidence), the run's timeline and overall verdict,
finding the command's GPU, change detection and the live verdict.

Most rules are soft: a pair ``(lo, hi)`` means "score 0 at or below lo, 1 at or above hi, linear in
between" (:func:`gputop.analysis.rules.base.ramp`), so a value near a boundary gives a middling score and
a lower confidence instead of a flip. Percentages are 0..100 like the sample fields; fractions are 0..1.

References used below (and in the rules' modules):
  [NCU]  Nsight Compute "GPU Speed Of Light" rule: a unit above 60% of its peak throughput is a
         limiter; "achieved compute throughput and/or memory bandwidth below 60% of peak typically
         indicate latency issues".
  [HTA]  Holistic Trace Analysis / PyTorch profiler recommendations: GPU utilisation below 50% is
         "low"; time in the DataLoader above 5% of the step means the input pipeline is a bottleneck;
         memory above 90% of the device is near its capacity.
  [H200] measured on an H200 with gputop (GPM over 0.1 s windows): a large copy reads DRAM 87%,
         tensor 0%; a bf16 matmul loop reads tensor 94%, DRAM 16%; a loop of 1-element kernels with a
         sync after each reads SM activity 0.03% while NVML's kernel duty cycle reads 16% or more.
  [DECK] the seed deck "GPU workload design" (seeds/003): compute / bandwidth / latency bound advice,
         num_workers and pin_memory for starvation and slow host-to-device copies.
"""

from __future__ import annotations

# -- window and sample handling --------------------------------------------------------------------
WINDOW_S = 2.0  # timeline window: 20 samples at the default 10 Hz, long enough to average GPM noise
MIN_SAMPLES = 5  # fewer samples than this in a window: halve the confidence (one burst can dominate)
MIN_LAST_WINDOW_FRACTION = 0.5  # a final window shorter than half a window joins the one before it

# A sample counts as "GPU busy" (for burst counting and the busy-only clock statistics) above these.
BUSY_UTIL_PCT = 5.0
BUSY_SM_ACTIVE_PCT = 1.0
# One run of busy samples holding >= 90% of a window's busy samples, with >= 20% of the window idle
# around it, is a change of regime (a phase that first sets up on the CPU, then computes), not
# starvation: the verdict is the stretch's. Seen in the amp workload's first phase on an H200: 4.4 s
# of CPU set-up, then 3.6 s with FP32 pipes 60% busy.
ONE_STRETCH_SHARE = 0.9
ONE_STRETCH_IDLE_FRACTION = 0.2

# -- shared by several rules ------------------------------------------------------------------------
# latency-bound's busy part, memory-bound's kernel mix and comms-bound's resident kernels:
# The GPU is busy (duty cycle >= 70%) but neither a pipe nor DRAM is near its peak: latency-bound in
# the [NCU] sense (under-filled kernels, stalls on memory latency or dependencies).
BUSY_NOTHING_PEAK_UTIL_PCT = (40.0, 70.0)

# -- no GPM (pre-Hopper, or GPM unsupported) ------------------------------------------------------------
# Kernels resident nearly all the time (NVML duty cycle).
FALLBACK_BUSY_UTIL_PCT = (70.0, 90.0)
# NVML's memory-controller duty cycle: a streaming copy reads 80-95%, a bf16 GEMM 20-40%.
FALLBACK_MEM_UTIL_PCT = (40.0, 70.0)
# Board power as a fraction of the power limit: real SM work draws at least half of the limit on
# data-centre GPUs, a loop of tiny kernels stays near idle power (15-25%).
FALLBACK_POWER_FRACTION = (0.30, 0.50)
# Without GPM a verdict that needs SM/pipe/DRAM activity is at most this confident.
NO_GPM_CONFIDENCE = 0.6
# -- choosing and mixing ------------------------------------------------------------------------------
MIXED_MIN_SCORE = 0.5  # another class scoring at least this is listed as "mixed"
# A window whose samples, each judged on its own, show another GPU-side class in at least a quarter of
# them (half a second of a 2 s window) is mixed: a phase change, or alternating kernels. Confidence is
# scaled by 0.5 + 0.5 x (share of samples agreeing with the verdict).
MIXED_SAMPLE_FRACTION = 0.25
WEAK_SCORE = 0.3  # the best class scoring below this: "no class fits well", low confidence
MAX_CONFIDENCE = 0.95  # telemetry never makes a verdict certain
SECOND_CLASS_PENALTY = 0.3  # confidence *= 1 - this x (score of the runner-up)

# -- timeline and overall verdict -----------------------------------------------------------------------
# The overall verdict of a run is the class with the most time, ignoring idle time unless the GPU was
# idle for more than 75% of the time it was in use. Classes with at least 20% of the busy time are
# listed as mixed.
OVERALL_IDLE_FRACTION = 0.75
# Set-up before a run's first work (imports, model building, DDP's set-up) is left out of its overall verdict: the
# GPU idle or host-bound, or "input-starved" with kernels active under this (a CPU-busy process whose GPU has not
# started; Lightning's and the HF Trainer's DDP set-up on 4 H100s read 1-3%, a starved loop's bursts far more).
# So is the teardown after its last work, judged the same way (results written, process groups destroyed, the
# interpreter exiting: 1-8 s after the loops of the multi-GPU corpus and the held-out programs on 4 H100s, every
# rank's process at a core, kernels active 0-9%): it is not the work's bottleneck either. Host-bound stretches
# between two stretches of work still count.
SETUP_UTIL_PCT = 10.0
OVERALL_MIXED_FRACTION = 0.20

# -- finding the command's GPU without its pid in NVML's process list ------------------------------------
# A CUDA context costs 250-600 MiB of device memory; a rise of 200 MiB over the baseline means "used".
MEM_RISE_BYTES = 200 * 2**20
# Or SM activity / kernel duty cycle rising from idle to above these.
ACTIVITY_RISE_PCT = 10.0

# -- change detection (gputop.analysis.segments) ----------------------------------------------------------
# A change of regime: a feature (kernel duty, SM activity, DRAM, a pipe; 0..100) moves by at least 20
# points from its segment's mean, and by more than 3 standard deviations of the segment (a bursty segment
# tolerates its own swings), in 3 samples in a row (0.3 s at 10 Hz: one odd sample is not a change). The
# demo's phases move these by 40-90 points; the sample-to-sample noise of a steady phase is under 2 points.
CHANGE_DELTA_PCT = 20.0
# PCIe as % of the link's per-direction peak: pageable copies read 14%, a training loop's batches 1-2%.
CHANGE_PCIE_DELTA_PCT = 5.0
# The watched process tree's CPU (100 = one core, capped at 200): a change of half a core.
CHANGE_CPU_DELTA_PCT = 50.0
CHANGE_CPU_CAP_PCT = 200.0
CHANGE_Z = 3.0
CONFIRM_SAMPLES = 3
CHANGE_MIN_REF_SAMPLES = 3  # a segment's mean is not judged on fewer samples
# The slow test: the mean of the last 10 samples (1 s) differs from the segment's mean before them by
# more than max(delta, 3 x std / sqrt(10)) (a bursty segment turning steady, idle turning bursty, or the
# reverse). A steady bursty segment (busy in 30% of samples: std 46) moves its 10-sample mean by 15
# points (1 std), well under the 44 that the test asks.
CHANGE_SLOW_SAMPLES = 10
CHANGE_Z_SLOW = 3.0
CHANGE_MEM_DELTA_PCT = 10.0  # device memory used, % of the total: a model loaded, a batch size doubled
CHANGE_CONTEXT_DELTA = 50.0  # the watched process gets or drops its CUDA context on the GPU (0 or 100)

# -- the live verdict (gputop.analysis.live) ----------------------------------------------------------------
# The live verdict judges the current segment (since the last change of regime), at most its last 30 s,
# again every second (every 5 s once the segment is older than 30 s), and at once when a change is confirmed.
# A segment younger than 0.5 s (5 samples) is not judged yet: the previous verdict stays, marked as the
# previous segment's.
LIVE_MAX_S = 30.0
LIVE_MIN_S = 0.5
LIVE_EVERY_S = 1.0  # classifying a 30 s window costs 1-3 ms
# A regime older than LIVE_MAX_S: its window slides, sharing 25 of 30 s with the last. Each judgement (classify
# over 300 ticks, and the panel's evidence written again) costs 6-8 ms of the H100 machine's CPU: every 2 s it was
# 0.2-0.45% of a core at rest, a fifth of the TUI's steady CPU (bench/perf/tui_parts.py, docs/benchmarks.md).
LIVE_SLIDING_EVERY_S = 5.0
# A verdict whose window ends this close to the newest tick is the current one (judged again within
# LIVE_SLIDING_EVERY_S, at a frame): its words say "last 30.0 s" and the charts shade it up to their right edge.
# One threshold for both, so the words and the shading never disagree, and the shading does not step left and
# back between two judgements (which also redrew every chart row).
LIVE_CURRENT_S = LIVE_SLIDING_EVERY_S + 0.5
LIVE_STRIP_EVERY_S = 5.0  # the other GPUs of the TUI's strip (a class and a confidence, no numbers): 8 GPUs
# judged every second would cost ~2% of a core; a change of their regime is still judged at once
# Hysteresis within a segment: the class shown stays while its score is within 0.15 of the best class's
# (and fits at all, >= MIXED_MIN_SCORE), so a window near a boundary does not flip label every second.
STICKY_MARGIN = 0.15
