"""host-bound (issue 11): the GPU nearly idle while the process holding its CUDA context keeps a CPU core busy
(input preparation or CPU-side overhead: the GPU waits on the host). Subclass "workers": the process's children
(DataLoader workers) are busier than it; "one thread": one thread of it at a core.

Its score's part "host" (a quiet GPU x a busy holder) is damped by launch-bound's launches and by PCIe copies in
the arbitration table; :func:`settle` then leaves out a process busy driving another GPU. :func:`holder` (does
the watched tree hold the GPU's context, how busy is it, how quiet is the GPU) is idle's test of "waiting" too.
"""

from __future__ import annotations

from gputop.analysis.rules.base import TRACES, Example, Rule, Score, has_gpm, pct_text as _p, ramp
from gputop.analysis.vocabulary import Cls, Sub

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


def holder(ev: dict, hints: dict) -> dict | None:
    """{"context": the watched tree holds the GPU's CUDA context, "cpu_busy": 0..1 how busy it is on the CPU,
    "quiet": 0..1 how nearly idle the GPU is}; None without a duty cycle or SM activity. ``hints["on_gpu"]`` (a
    run: its command's process tree showed up on this GPU) says the tree holds the context: without process lists
    in the window (a run's stored ticks drop them), or through a child of the watched process (a launcher's
    ranks) while some process still holds the GPU (``HOST_TREE_HELD_FRACTION``)."""
    util, sm = ev.get("util_gpu_pct"), ev.get("sm_active_pct")
    if util is None and sm is None:
        return None
    quiet = 1 - ramp(util, HOST_GPU_UTIL_PCT)
    if has_gpm(ev):
        quiet *= 1 - ramp(sm, HOST_GPU_SM_PCT)
    frac = ev.get("feeder_on_gpu_fraction")
    itself = frac is not None and frac >= HOST_CONTEXT_FRACTION  # the watched process holds the context
    own = ev.get("feeder_sm_pct")  # NVML's per-process samples: the process's own kernels
    if own is not None and itself:  # it barely uses the SMs, whatever another process does on the GPU
        quiet = max(quiet, 1 - ramp(own, HOST_GPU_UTIL_PCT))
    held = ev.get("gpu_held_fraction")
    tree = bool((hints or {}).get("on_gpu")) and (frac is None or (held is not None
                                                                   and held >= HOST_TREE_HELD_FRACTION))
    return {"context": itself or tree, "itself": itself, "quiet": quiet,
            "cpu_busy": ramp(ev.get("feeder_cpu_pct"), HOST_FEEDER_CPU_PCT)}


def score(ev: dict, hints: dict) -> Score:
    got = holder(ev, hints)
    if got is None:
        return Score(0.0, parts={"host": 0.0})
    # Which host work: one thread at a core with the workers idle is the training process's own loop (CPU-side
    # overhead, or preprocessing in that process); worker processes busier than it is an input pipeline.
    thread, workers = ev.get("feeder_thread_pct"), ev.get("feeder_children_cpu_pct") or 0.0
    sub = None
    if (workers >= HOST_WORKERS_CPU_PCT and workers > (ev.get("feeder_cpu_pct") or 0.0) - workers
            and (got["itself"] or ev.get("feeder_on_gpu_fraction") is None)):  # a launcher's children: its ranks
        sub = Sub.WORKERS
    elif thread is not None and thread >= FEEDER_THREAD_PCT[1]:
        sub = Sub.ONE_THREAD
    got["elsewhere"] = ramp(ev.get("feeder_busy_elsewhere_fraction"), HOST_BUSY_ELSEWHERE_FRACTION)
    return Score(0.0, sub, parts={"host": got["quiet"] * got["cpu_busy"] if got["context"] else 0.0}, facts=got)


def settle(parts: dict, own: Score) -> tuple[float, Sub | None]:
    """Not when the process drives another GPU meanwhile: this one is merely held."""
    return parts["host"] * (1 - own.facts.get("elsewhere", 0.0)), own.sub


def describe(sub, ev: dict) -> str:
    sm = f", SMs {_p(ev.get('sm_active_pct'))} busy" if has_gpm(ev) else ""
    frac = ev.get("feeder_on_gpu_fraction")  # under half: a launcher, whose child (a rank) holds the GPU
    who = ("the watched process tree, whose child holds its CUDA context," if frac is not None
           and frac < HOST_CONTEXT_FRACTION else "the process holding its CUDA context")
    return (f"the GPU idle {_p(ev.get('gpu_idle_pct'))} of the time (kernels active "
            f"{_p(ev.get('util_gpu_pct'))}{sm}) while {who} used {_p(ev.get('feeder_cpu_pct'))} CPU")


ADVICE = {
    None:
        "the GPU waits on the host: if the busy CPU time is input preparation (decoding, augmenting, "
        "tokenising), move it off the training loop (DataLoader(num_workers>0, pin_memory=True), GPU-side "
        "transforms, cached pre-processed data); if it is the loop itself (Python, launches, .item() syncs), "
        "do more per step (larger batch, torch.compile, CUDA graphs); profile the CPU side (py-spy, "
        "torch.profiler) to see which",
    Sub.WORKERS:
        "the GPU waits on the input pipeline's worker processes: cheaper transforms, GPU-side augmentation "
        "(torchvision.transforms.v2 on tensors, DALI), cached pre-processed data, more workers if cores are free",
    Sub.ONE_THREAD:
        "one thread of the process is at a full core while the GPU waits: profile it (py-spy top) to see "
        "whether it is preparing data (move it to DataLoader workers) or the loop's own overhead (larger "
        "batch, torch.compile, CUDA graphs, fewer .item() syncs)",
}


def host_detail(ev: dict) -> str:
    """The host evidence beyond the tree's CPU%, for a "decided by" note: the feeder's busiest thread, its
    workers, and NVML's per-process SM samples (empty where not measured)."""
    parts = []
    if ev.get("feeder_thread_pct") is not None:
        parts.append(f"its busiest thread at {_p(ev['feeder_thread_pct'])} of a core")
    if (ev.get("feeder_children_cpu_pct") or 0) >= 1:
        parts.append(f"its child processes at {_p(ev['feeder_children_cpu_pct'])}")
    if ev.get("feeder_sm_pct") is not None:
        parts.append(f"its own kernels {_p(ev['feeder_sm_pct'])} of the SMs (NVML's per-process samples)")
    return " (" + ", ".join(parts) + ")" if parts else ""


def notes(ev: dict, board, main) -> list[str]:
    if main != Cls.HOST_BOUND:
        return []
    return [f"decided by: kernels active only {_p(ev.get('util_gpu_pct'))} while the process holding the GPU "
            f"kept {_p(ev.get('feeder_cpu_pct'))} CPU busy{host_detail(ev)}: the host is the bottleneck (a "
            "process that only waits would use little CPU)"]


EXAMPLES = (
    Example(TRACES + "corpus_h200_tv_resnet18_heavy_cpu.jsonl.gz", 0, 24.0, 28.0, True,
            "ResNet-18 with heavy CPU transforms in the training process: one thread at a core", Sub.ONE_THREAD),
    Example(TRACES + "corpus_h200_tv_resnet50_workers8.jsonl.gz", 0, 20.0, 24.0, True,
            "ResNet-50 fed by 8 DataLoader workers busier than the loop", Sub.WORKERS),
    Example(TRACES + "dataloader_starved.input-starved.jsonl.gz", 0, 4.0, 8.0, True,
            "the GPU idle nearly all the time while its process is at a core"),
    Example(TRACES + "heldout_multi_h100x4/held_hf_trainer_ddp.jsonl.gz", 0, 30.0, 34.0, True,
            "the HF Trainer under torchrun: the ranks (the launcher's children) hold the GPUs, the tree at 4 cores",
            hints={"on_gpu": True}),
    Example(TRACES + "idle.idle.jsonl.gz", 0, 4.0, 8.0, False,
            "a process that holds the GPU but sleeps: idle, waiting"),
    Example(TRACES + "tiny_kernels_sync.latency-bound.jsonl.gz", 0, 4.0, 8.0, False,
            "a busy loop launching tiny kernels: launch-bound (the table damps host-bound)"),
)

RULE = Rule(Cls.HOST_BOUND, score, describe, ADVICE, examples=EXAMPLES, settle=settle, notes=notes)
