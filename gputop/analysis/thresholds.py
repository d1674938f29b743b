"""Every threshold of the bottleneck classifier, in one place, each with its reason.

Most rules are soft: a pair ``(lo, hi)`` means "score 0 at or below lo, 1 at or above hi, linear in
between" (:func:`gputop.analysis.scoring.ramp`), so a value near a boundary gives a middling score and
a lower confidence instead of a flip. Percentages are 0..100 like the sample fields; fractions are 0..1.

References used below:
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

# -- idle ------------------------------------------------------------------------------------------
# NVML's kernel duty cycle (util_gpu_pct) reads 0 on an idle GPU; a few % is background (the display
# driver, another process's occasional kernel). Above 5% something is running.
IDLE_UTIL_PCT = (1.0, 5.0)
# GPM SM activity of an idle GPU is 0.0x%; above 2% kernels are doing work.
IDLE_SM_ACTIVE_PCT = (0.5, 2.0)
# A sample counts as "GPU busy" (for burst counting and the busy-only clock statistics) above these.
BUSY_UTIL_PCT = 5.0
BUSY_SM_ACTIVE_PCT = 1.0

# -- compute-bound and memory-bound (GPM) ------------------------------------------------------------
# A pipe (tensor, FP32, FP64, FP16) busy >= 60% of the time is the limiter [NCU]; below 40% it is not.
PIPE_BUSY_PCT = (40.0, 60.0)
# DRAM bandwidth >= 60% of the theoretical peak is the limiter [NCU]; a streaming copy reaches ~87% [H200].
DRAM_BUSY_PCT = (40.0, 60.0)
# FP64 tensor (DMMA) counts as "fp64" rather than "tensor" when it is at least this share of all tensor
# activity (ANY_TENSOR includes DMMA).
FP64_TENSOR_SHARE = 0.5

# Memory-bound on chip: SMs >= 90% active with >= 60% occupancy (many warps resident, as in a streaming
# kernel: the H200 copy reads 80% occupancy, a bf16 GEMM 20%, tiny kernels 0.06%) while no pipe and no
# DRAM is near its peak: the warps wait on L2/L1 or memory latency (data that fits in the 50 MB L2).
# GPM has no cache counters, so this scores at most CACHE_SCORE.
CACHE_SM_ACTIVE_PCT = (70.0, 90.0)
CACHE_OCCUPANCY_PCT = (40.0, 60.0)
CACHE_SCORE = 0.8

# A busy GPU (duty cycle >= 70%, BUSY_NOTHING_PEAK_UTIL_PCT) whose DRAM, at 20-35% of its peak, is the busiest
# unit relative to its peak is memory-bound as a kernel mix: an eager GPT-2 training step on an H100 reads DRAM 45%,
# tensor 10%, SMs 81% active, and torch.profiler puts 66% of its kernel time in elementwise, normalisation and
# optimizer kernels (each at its own bandwidth limit [NCU]) and 34% in GEMMs. The same step on an H200 moves about
# as many bytes a second (1.6 TB/s) but that is 33% of the H200's 4.8 TB/s (tensor 11%, SMs 74%; GEMMs 40% of the
# kernel time): hence a ramp from 20% (it was 25-45% until the H200 corpus). Scored at most 0.9: the window's
# mean does not show a unit at its peak, the kernel breakdown does.
MIX_DRAM_PCT = (20.0, 35.0)
MIX_SCORE = 0.9

# -- latency / launch-bound --------------------------------------------------------------------------
# Kernels resident at least 15% of the time (NVML duty cycle) ...
LAUNCH_UTIL_PCT = (5.0, 15.0)
# ... while the SMs are busy for under 20% of that time: the kernels are tiny (one block, a few
# microseconds) and the GPU waits on launches and syncs between them. 1-element kernels read
# 0.03% / 16% = 0.002 [H200]; GPT-2 decoding at batch 1 (GEMV kernels of 3 us on average) 0.16 [H100];
# kernels that fill the GPU read 0.8-0.9 (an eager GPT-2 training step 0.86, ResNet-50 0.89 [H100]). At
# half the SMs' time the kernels are no longer tiny.
LAUNCH_SM_PER_UTIL = (0.20, 0.50)
# The GPU is busy (duty cycle >= 70%) but neither a pipe nor DRAM is near its peak: latency-bound in
# the [NCU] sense (under-filled kernels, stalls on memory latency or dependencies).
BUSY_NOTHING_PEAK_UTIL_PCT = (40.0, 70.0)
# Subclasses of latency-bound: SMs active >= 80% of the time -> "stalls" (SMs busy, waiting on
# something), otherwise "underfilled" (kernels too small to fill the SMs) or "launch" (ratio above).
STALLS_SM_ACTIVE_PCT = 80.0

# -- input-starved ------------------------------------------------------------------------------------
# The GPU is under-used: kernel duty cycle below 50% is "low" [HTA]; at 30% it clearly is.
STARVED_UTIL_PCT = (40.0, 80.0)
# The feeding process tree is busy on the CPU: CPU% is per core (100 = one core), summed over the
# process and its children. A DataLoader with num_workers=0 and a heavy transform reads ~100%.
FEEDER_CPU_PCT = (30.0, 70.0)
# A feeder that is not busy on the CPU (blocked on disk or network I/O, a sleep, a lock) still starves
# the GPU when the GPU works in recurring bursts (at least 2 separate runs of busy samples in the
# window) with idle time between them; that scores at most this (below a busy feeder's 1.0).
IDLE_FEEDER_SCORE = 0.6
MIN_RECURRING_BURSTS = 2
# One run of busy samples holding >= 90% of a window's busy samples, with >= 20% of the window idle
# around it, is a change of regime (a phase that first sets up on the CPU, then computes), not
# starvation: the verdict is the stretch's. Seen in the amp workload's first phase on an H200: 4.4 s
# of CPU set-up, then 3.6 s with FP32 pipes 60% busy.
ONE_STRETCH_SHARE = 0.9
ONE_STRETCH_IDLE_FRACTION = 0.2
# Without a watched process, the busiest host core is a weak stand-in (some process is CPU-bound).
HOST_CORE_BUSY_PCT = (70.0, 95.0)
# A workload's own report: time waiting for data above 5% of the step is a bottleneck [HTA]; at 15%
# it is the main one.
DATA_WAIT_FRACTION = (0.05, 0.15)

# -- host-bound (issue 11) ----------------------------------------------------------------------------
# The GPU is nearly idle: kernel duty cycle under 5% (at 15% kernels run often enough to be launch- or
# input-bound instead) and SMs under 2% active (10%: real work) ...
HOST_GPU_UTIL_PCT = (5.0, 15.0)
HOST_GPU_SM_PCT = (2.0, 10.0)
# ... while the process holding a CUDA context on it (in NVML's process list in at least half the window's
# samples) keeps a core busy: 80% of one core is busy, 50% is not yet. An H100 training loop preparing data
# on the CPU read "process tree CPU 99%" with SMs 0.1% busy (issue 11). A process that holds the context
# but uses little CPU is waiting (sleep, I/O, a lock): idle, subclass "waiting".
HOST_FEEDER_CPU_PCT = (50.0, 80.0)
# The feeder's busiest thread (psutil's per-thread CPU times, 100 = one core): a Python loop that launches
# kernels or prepares data keeps one thread at 90%+ of a core (the GIL serialises it); under 60% it is not
# the limit. A launch-bound verdict with that thread under 60% scores half (the gaps are waits, not launches).
FEEDER_THREAD_PCT = (60.0, 90.0)
# Host-bound subclass "workers": the process's children (DataLoader workers) use at least one core, more than
# the process itself: an input pipeline, not the training loop's own overhead.
HOST_WORKERS_CPU_PCT = 100.0
HOST_CONTEXT_FRACTION = 0.5
# A run's command that is a launcher (torchrun, mpirun, a shell) does not hold the GPUs itself: its children (the
# ranks) do. Once the run saw its process tree on a GPU (its "on GPU n" mark), a process still in that GPU's list
# in at least half the window's samples is taken as the tree's, and the tree's CPU% as theirs. Hugging Face's
# Trainer under torchrun on 4 H100s (tests/data/traces/heldout_multi_h100x4, held_hf_trainer_ddp, 30-34 s): every
# GPU at 0% kernels, 0.0% SMs for 4 s while the tree used 401% CPU (4 cores at 100%: each rank's profiler export),
# read "idle" when only torchrun's own pid (on no GPU) could hold a context. A rank that left its GPU (no process
# in its list: the multi-GPU corpus's hang_exit) stays idle.
HOST_TREE_HELD_FRACTION = 0.5
# ... unless it drives another GPU meanwhile (busy there in 5% of the window: a little; 25%: it is working,
# this GPU is merely held).
HOST_BUSY_ELSEWHERE_FRACTION = (0.05, 0.25)
# A nearly idle GPU fed in rare bursts fits input-starved too; the more idle the GPU, the more the host is the
# whole story: input-starved's score is scaled by 1 - 0.5 x (how nearly idle the GPU is), so it stays listed
# as mixed while host-bound wins.
HOST_OVER_STARVED = 0.5
# Launch-bound vs input-starved: kernels in (nearly) every sample (no idle gap at 10 Hz) with the SMs busy
# for a small part of the kernels' time is a steady trickle of tiny kernels (a decode loop), not a GPU
# waiting for input between bursts. Share of busy samples: 80% has gaps, 95% has none.
CONTINUOUS_BUSY_PCT = (80.0, 95.0)

# -- PCIe / transfer-bound -----------------------------------------------------------------------------
# PCIe throughput (busier direction) as a fraction of the link's per-direction peak. Measured on an
# H200 (gen5 x16, 63 GB/s per direction) [H200]: pageable host-to-device copies run at ~9 GB/s (14%),
# because the CPU stages them through a pinned bounce buffer; the loops of the other cases move
# 0.01-0.14 GB/s (under 0.3%). A training loop copying one batch per step moves 1-2% of a gen5 link.
# So 4% is already unusual and 12% is transfer-dominated when the SMs wait.
PCIE_LINK_FRACTION = (0.04, 0.12)
# Subclass "link": the link itself is near its peak (pinned copies reach 80-90%); "pageable": well
# below it while the feeding process is busy on the CPU (staging pageable memory is the limit).
PCIE_NEAR_LINK_FRACTION = 0.5

# -- communication between GPUs (gputop.analysis.comms) ---------------------------------------------------
# NVLink traffic (busier direction, GPM's NVLink rx/tx) as a fraction of the link's per-direction peak.
# NCCL's large all-reduces reach 70-90% of an NVLink's peak; a data-parallel step that waits for its
# gradients averages less over a window (the link idles while backward computes). 15% of an H100's
# 450 GB/s is ~70 GB/s, more than a PCIe gen5 link carries: GPUs talking, not a stray copy. On the 4-H100
# corpus (2026-11-26) a 98%-NCCL all-reduce loop averages 47% of the 450 GB/s link.
NVLINK_LINK_FRACTION = (0.15, 0.45)
# Subclass "link": the link itself near its peak (as PCIE_NEAR_LINK_FRACTION).
NVLINK_NEAR_LINK_FRACTION = 0.7
# GPUs that talk through host memory (no peer-to-peer path: joined by PCIe only, or NCCL_P2P_DISABLE): NCCL's
# kernels write to and read from pinned host memory, so each GPU's PCIe carries traffic both ways at once, and
# every GPU of the job alike. On 2 H100s with NCCL_P2P_DISABLE=1 (2026-11-26, "via SHM"): an all-reduce loop
# reads rx 27.8 / tx 31.8 GB/s on each GPU, DDP ResNet-50 4.9 / 5.5 GB/s, NVLink 0. A single GPU's copies go one
# way at a time (pageable host-to-device: rx 9 GB/s, tx ~0): the lesser direction under half the busier.
PCIE_COMMS_BALANCE = 0.5  # the lesser direction at least this share of the busier, on each GPU
PCIE_COMMS_MIN_BPS = 1e9  # and at least this much (bytes/s) each way
# A sample carries NVLink traffic at or above this (bytes/s, the busier direction). An idle NVLink reads exactly
# 0 in every GPM sample of the 32 single-GPU traces (H100, H200); the 4-H100 corpus's DDP all-reduces (RING_LL,
# 25 MB buckets) carry 1.5-9 GB/s, a straggler's waiters 6-8 GB/s.
NVLINK_ACTIVE_BYTES_PER_S = 5e8
# Share of a window's samples with NVLink traffic: communication in most samples, a job's GPUs at work together
# (DDP ResNet-50 with overlap: 93-94% of the samples; FSDP GPT-2: 72-76%, its shards gathered in bursts).
NVLINK_STEADY_SAMPLE_FRACTION = (0.5, 0.8)
# NCCL's kernels on the SMs (kernels resident, a few SMs busy, no pipe near a peak) while the link carries
# steady but light traffic: the GPU waits in collectives (small all-reduces, or peers that are late). Scores
# below a window whose link is busy (1.0): the light traffic could be another job's; DDP ResNet-50 (NCCL 56-67%
# of kernel time by torch.profiler) and a straggler's waiters (72% of their step in the all-reduce) score 0.9.
COMMS_STEADY_SCORE = 0.9
# NCCL's kernels hold one SM a channel: 24 channels of an H100's 132 SMs read 18.2% SM activity while they wait.
# SMs this busy with kernels resident count as waiting in collectives even where NVML's duty cycle dips.
COMMS_SM_ACTIVE_PCT = (10.0, 20.0)
# DRAM bytes per NVLink byte (rx + tx) that NCCL's own kernels move: received data lands in DRAM, is read back
# to reduce and sent on. comms_mlp (an all-reduce of 98% of kernel time, 211 GB/s each way on 4 H100s) reads
# 1.37 TB/s of DRAM: 3.2 bytes a link byte. That much DRAM traffic is the communication's, not a memory-bound
# kernel mix of the GPU's own (the memory-bound score looks at the rest).
COMMS_DRAM_PER_LINK_BYTE = 3.0

# -- a stalled collective, a straggler (gputop.analysis.collectives) ----------------------------------------
# NCCL's kernels waiting for a peer that never comes, on the 4-H100 corpus (hang_exit, hang_idle): duty cycle
# 100% in every sample, SMs 18.18% (24 channels / 132 SMs) to the hundredth, INT pipe 0.16% and the others 0,
# DRAM 0.001%, NVLink 0, PCIe 0.2-1.4 MB/s (NVML's own reads), power 123-142 W of 700 flat to 0.1%. The
# nearest single-GPU window (wl_cudagraphs_h200's CUDA-graph replay of tiny kernels): duty cycle 95-97%, SMs
# 21%, INT pipe 1.38%, tensor and FP32 0.23%, DRAM 0: its pipes and duty cycle keep it latency-bound.
STALL_UTIL_PCT = (97.0, 99.5)
STALL_SM_ACTIVE_PCT = ((2.0, 5.0), (35.0, 50.0))  # (rises over, falls over): a few SMs, not none, not most
STALL_PIPE_PCT = (0.5, 1.0)  # the busiest pipe (the spinning warps' integer compares): about nothing
STALL_DRAM_PCT = (0.1, 0.5)
STALL_LINK_BYTES_PER_S = (1e8, 5e8)  # NVLink, the busier direction
STALL_PCIE_FRACTION = (0.01, 0.03)
STALL_POWER_FRACTION = (0.35, 0.5)  # a waiting kernel draws little over idle (130 W of 700 on an H100)
# ... or its power is on its way down there: the last sample at most this share of the window's highest (an H100
# falls from 580 W to 130 W over the 2 s after its last matmul, 45 W every 100 ms)
STALL_POWER_FALLING = 0.8
# A straggler: a GPU of the job that works (compute- or memory-bound) while the others wait in collectives, with
# its busiest unit this much busier than the same unit on the waiters (more work: the 4-H100 straggler, 3x
# the matmuls, reads tensor 89% against 22%), or its SM clock at most this share of theirs (throttled).
STRAGGLER_WORK_RATIO = 1.5
STRAGGLER_WORK_MARGIN_PCT = 10.0
STRAGGLER_CLOCK_RATIO = 0.9
# An all-reduce message is latency-bound when the fixed cost of a call (the sweep's fitted latency) is at
# least half its time: the usual alpha-beta model's crossover, where the transfer time equals the latency.
COMMS_LATENCY_SHARE = 0.5
# A training step is comms-bound when the all-reduce the GPU waits for (step time less the compute-only
# step) is at least a fifth of the step: removing it would speed the step up by 25% or more.
COMMS_EXPOSED_SHARE = 0.2

# -- throttling -----------------------------------------------------------------------------------------
# The clock-event reasons that mean "slowed by heat or hardware" (abnormal on any load) and the power
# cap are words of gputop.telemetry.sample (THERMAL_REASONS, POWER_CAP_REASON), counted over busy samples.
# Share of busy samples with a thermal reason: 10% is a blip, 30% is throttled.
THERMAL_SAMPLE_FRACTION = (0.10, 0.30)
# The power cap is normal under a compute-bound load: a bf16 matmul loop sits at its power limit with
# the SM clock at 74% of max on an H200 [H200] (75-90% on other parts). It is the main problem only
# when it holds the SM clock far down: at or below 45% of max (a lowered power limit), not at all
# above 60%.
POWER_CAP_SAMPLE_FRACTION = (0.20, 0.50)
POWER_CAP_CLOCK_RATIO = (0.45, 0.60)  # reversed: a lower clock ratio scores higher

# -- memory capacity -----------------------------------------------------------------------------------
# Device memory above 90% used is near capacity [HTA]; 88% is not yet.
MEM_USED_FRACTION = (0.88, 0.92)
# ... or a window whose peak reached 97% (MEM_FULL_FRACTION: the next allocation fails there); 95% is not yet.
# The batch-size sweep's batch 8192 on an H200 swings between 53% and 98% as the allocator grows and frees.
MEM_PEAK_FRACTION = (0.95, 0.97)
# At or above 97% (or an out-of-memory error) capacity is the main verdict whatever else is going on:
# the next allocation fails. Between 90% and 97% it is the main verdict only when the GPU is not
# clearly compute-, memory- or transfer-bound (inference servers and PyTorch's caching allocator
# routinely hold 90% of the memory while running at full speed).
MEM_FULL_FRACTION = 0.97

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
# Input-starved judged without the feeding process's CPU%, only from the busiest host core.
NO_FEEDER_CONFIDENCE = 0.7

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
