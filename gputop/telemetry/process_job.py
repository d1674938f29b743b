"""The job a GPU process belongs to: one home for what groups a node's processes into jobs.

Read from the process's own files under /proc, in this order, the first that names one:

1. ``SLURM_JOB_ID`` in its environment (``/proc/PID/environ``): the job as Slurm knows it, spelled as
   dcgm-exporter's job mapping spells it (``12345``), so one job's GPUs on both exporters' nodes are one job;
2. ``TORCHELASTIC_RUN_ID`` there (``torchrun``'s rendezvous id, the same on every node of a job, a fresh uuid for
   each ``--standalone`` run; ``torchelastic:ID``); its default ``none`` names no job;
3. ``MASTER_ADDR`` and ``MASTER_PORT`` there (``rendezvous:ADDR:PORT``): where a job's ranks meet, set by torchrun,
   accelerate and by hand before ``mp.spawn``; two jobs that run at once cannot share one. A loopback address is
   one node's (``@HOST`` added);
4. the Kubernetes pod it runs in, from its cgroup (``/proc/PID/cgroup``: ``.../kubepods.../pod<UID>...``;
   ``pod:UID``): a pod is one node's share of a job;
5. its place in the process tree (``/proc/PID/stat``, world-readable): a process that leads a session of its own
   was started apart by its launcher (torchrun's workers, each ``start_new_session``): its parent's job
   (``launcher:PPID@HOST``); otherwise its process group (``pgid:N@HOST``: ``mp.spawn``'s children, a shell script's
   ranks, one command of an interactive shell). The host's name keeps two nodes' groups apart.

Where a process's environment cannot be read (another user's process and gputop neither root nor holding
``CAP_SYS_PTRACE``; another PID namespace; gone), the rest is read and :class:`JobReader` counts why
(``unreadable``). A replay has no /proc to read: the job its trace recorded stands (``job`` beside each process),
else its recorded process group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ENV_JOBS = (("SLURM_JOB_ID", "slurm", "{}"), ("TORCHELASTIC_RUN_ID", "torchelastic", "torchelastic:{}"))
NOT_A_RUN_ID = {"", "none"}  # torchrun's default --rdzv-id: every job without one has it
LOOPBACK = ("127.", "localhost", "::1", "0.0.0.0")
POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
ENVIRON_MAX = 1 << 20  # a process's environment, read at most this much


@dataclass(frozen=True)
class Job:
    job: str
    source: str  # slurm, torchelastic, rendezvous, kubernetes, launcher, process-group


def environ_job(environ: bytes, hostname: str = "") -> Job | None:
    """The job a process's environment (``/proc/PID/environ``'s NUL-separated text) names, if any."""
    env = {}
    for item in environ.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            env[key.decode(errors="replace")] = value.decode(errors="replace").strip()
    for name, source, spelling in ENV_JOBS:
        value = env.get(name, "")
        if value and value.lower() not in NOT_A_RUN_ID:
            return Job(spelling.format(value), source)
    addr, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
    if addr and port:
        local = addr.startswith(LOOPBACK)
        return Job(f"rendezvous:{addr}:{port}" + (f"@{hostname}" if local else ""), "rendezvous")
    return None


def cgroup_pod(cgroup: str) -> str | None:
    """The Kubernetes pod UID a process's cgroup (``/proc/PID/cgroup``) places it in, if any."""
    m = POD.search(cgroup)
    return m.group(1).replace("_", "-") if m else None


def tree_job(pid: int, pgid: int | None, sid: int | None, ppid: int | None, hostname: str) -> Job | None:
    """The job a process's place in the process tree says (module doc, 5.)."""
    if sid is not None and sid == pid and ppid not in (None, 0, 1):
        return Job(f"launcher:{ppid}@{hostname}", "launcher")
    if pgid is not None:
        return Job(f"pgid:{pgid}@{hostname}", "process-group")
    return None


def recorded_job(p: dict, hostname: str = "") -> Job | None:
    """A listed process's job without /proc (a replay): the job its trace recorded, else its recorded process group
    (a group only one GPU process holds says little: torchrun's workers each lead one; the node's grouping,
    gputop/analysis/comms.py, sets those aside)."""
    if p.get("job"):
        return Job(str(p["job"]), str(p.get("job_source") or "recorded"))
    pgid = p.get("pgid")
    return Job(f"pgid:{pgid}@{hostname}", "process-group") if pgid is not None else None


@dataclass
class JobReader:
    """Each process's job, read once per process (by pid and start time: a pid used again is read again).
    ``unreadable``: {reason: processes} of the :meth:`of_process` calls since :meth:`take_unreadable`."""

    hostname: str
    proc: str = "/proc"
    live: bool = True  # False (a replay): no /proc to read, what was recorded only (recorded_job)
    _known: dict = field(default_factory=dict)
    unreadable: dict = field(default_factory=dict)

    def of_process(self, p: dict) -> Job | None:
        pid = p.get("pid")
        if not self.live or pid is None:
            return recorded_job(p, self.hostname)
        stat = self._stat(pid)
        start = stat[3] if stat else None
        cached = self._known.get(pid)
        if cached is not None and cached[0] == start:
            job, why = cached[1], cached[2]
        else:
            job, why, settled = self._read(pid, p.get("pgid"), stat)
            if start is not None and settled:
                self._known[pid] = (start, job, why)
        if why:
            self.unreadable[why] = self.unreadable.get(why, 0) + 1
        return job or recorded_job(p, self.hostname)

    def of_gpu(self, procs: list[dict] | None) -> list[Job]:
        """The jobs of a GPU's processes, each once, in the order of the processes."""
        out = []
        for p in procs or []:
            job = self.of_process(p)
            if job is not None and job not in out:
                out.append(job)
        return out

    def take_unreadable(self) -> dict:
        got, self.unreadable = self.unreadable, {}
        return got

    def forget_gone(self, pids: set[int]) -> None:
        """Drop what was read of processes no longer listed."""
        for pid in [p for p in self._known if p not in pids]:
            del self._known[pid]

    def _stat(self, pid: int) -> tuple[int, int, int, int] | None:
        """(ppid, pgid, sid, start time) from /proc/PID/stat."""
        try:
            with open(f"{self.proc}/{pid}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
            return int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19])
        except (OSError, ValueError, IndexError):
            return None

    def _read(self, pid: int, pgid: int | None, stat) -> tuple[Job | None, str | None, bool]:
        """(the job its environment, cgroup or place in the tree names, why its environment could not be read,
        whether that is settled). An empty environment is not: a process read in the midst of its exec (the kernel
        closes its close-on-exec files, which ends its parent's wait, before it places the new environment) reads
        empty for a moment; it is read again next time."""
        why, settled = None, True
        try:
            with open(f"{self.proc}/{pid}/environ", "rb") as f:
                environ = f.read(ENVIRON_MAX)
            job = environ_job(environ, self.hostname)
            if job is not None:
                return job, None, True
            settled = bool(environ)
        except PermissionError:
            why = "environ not readable (another user's process: run the exporter as root or with CAP_SYS_PTRACE)"
        except FileNotFoundError:
            why = ("no such process here (another PID namespace: a container needs the host's, hostPID) or it "
                   "ended")
        except OSError as exc:
            why = f"environ not readable ({exc.strerror or exc})"
        try:
            with open(f"{self.proc}/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
                pod = cgroup_pod(f.read())
        except OSError:
            pod = None
        if pod:
            return Job(f"pod:{pod}", "kubernetes"), why, settled
        if stat is None:
            return None, why, settled
        ppid, spgid, sid, _ = stat
        return tree_job(pid, spgid if pgid is None else pgid, sid, ppid, self.hostname), why, settled
