"""Whom a profiler window is asked of (:mod:`gputop.session.profiling`): the processes of a command or a watched tree
that hold a GPU (NVML's process list), else those in which torch initialised CUDA, else the innermost that imported
torch or a CUDA library; never a launcher or multiprocessing's helpers; and a job's ranks together (their job-mates
under one parent, :func:`late_mates`; a rank's job for the TUI's key and the HTTP POST, :func:`job_of`).
"""

from __future__ import annotations

import platform

from gputop.session import profile_target as PT
from gputop.telemetry.process_job import JobReader

# multiprocessing's own helpers (they carry the loader, never run the program's work): not ranks
_MP_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "multiprocessing.semaphore_tracker")


def gpu_pids(ticks: list[dict]) -> set[int]:
    """The pids NVML lists on any GPU in the latest of ``ticks`` that carries each GPU's process list."""
    latest: dict[int, list] = {}
    for tick in ticks:
        for pos, s in enumerate(tick.get("gpus") or []):
            if s.get("processes") is not None:
                latest[pos] = s["processes"]
    return {p.get("pid") for procs in latest.values() for p in procs if p.get("pid") is not None}


def choose(targets: list[PT.Target], holders: set[int]) -> list[PT.Target]:
    """Whom to ask of ``targets``: those that hold a GPU (NVML). Where NVML lists none of them (another PID
    namespace, before the first kernel, a CPU machine): those in which torch has initialised CUDA; else those that
    imported torch or a CUDA library and launched no other process of the command's (a rank, not torchrun,
    accelerate's launcher or mp.spawn's main process above it, even while its ranks are still importing torch;
    multiprocessing's resource tracker and fork server do not make a launcher). Never one that imported neither."""
    on_gpu = [t for t in targets if t.pid in holders]
    if on_gpu:
        return on_gpu
    cuda = [t for t in targets if t.cuda]
    if cuda:
        return cuda
    pids = {t.pid for t in targets}
    launchers = set()
    for t in targets:
        if not _mp_helper(t.pid):
            launchers |= _ancestors(t.pid) & pids
    return [t for t in targets if t.frameworks and t.pid not in launchers]


def _ancestors(pid: int) -> set[int]:
    try:
        import psutil

        return {p.pid for p in psutil.Process(pid).parents()}
    except Exception:
        return set()


def _parent(pid: int) -> int | None:
    try:
        import psutil

        return psutil.Process(pid).ppid()
    except Exception:
        return None


def _mp_helper(pid: int) -> bool:
    """multiprocessing's resource tracker or fork server (``python -c 'from multiprocessing.X import main; ...'``)."""
    try:
        import psutil

        line = " ".join(psutil.Process(pid).cmdline())
    except Exception:
        return False
    return any(f"from {m} import main" in line for m in _MP_HELPERS)


def late_mates(chosen: list[PT.Target], targets: list[PT.Target]) -> list[int]:
    """The chosen processes' job-mates not chosen yet: processes of the command under the same parent (torchrun,
    mp.spawn's main process, a launcher, a shell script) that have imported torch or a CUDA library, not
    multiprocessing's helpers. A job's ranks make their CUDA contexts seconds apart (torchrun's two ranks on 2 H100s,
    2026-11-27: 1.0 s); asked before the last one holds its GPU, a window has one rank, profiled alone."""
    mine = {t.pid for t in chosen}
    parents = {_parent(t.pid) for t in chosen} - {None}
    return sorted(t.pid for t in targets if t.pid not in mine and t.frameworks and _parent(t.pid) in parents
                  and not _mp_helper(t.pid))


def job_of(pid: int, holders: set[int]) -> set[int]:
    """``pid`` and the GPU holders of its job (gputop/telemetry/process_job.py: Slurm's job, torchrun's run id, the
    rendezvous address, the launcher, the process group: what groups a node's processes into jobs everywhere), which
    a window asks together."""
    reader = JobReader(platform.node())
    mine = reader.of_process({"pid": pid})
    if mine is None:
        return {pid}
    return {pid} | {h for h in holders if h != pid and reader.of_process({"pid": h}) == mine}