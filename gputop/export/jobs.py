"""The job a GPU's work belongs to, as the scheduler or launcher knows it, for ``--export``'s ``hpc_job`` label.

Read from the processes NVML lists on the GPU (a live exporter only: a replay's pids are another machine's), each
in this order, the first that names one:

1. ``SLURM_JOB_ID`` in the process's environment (``/proc/PID/environ``): the job as Slurm knows it, spelled as
   dcgm-exporter's job mapping spells it (``12345``), so one job's GPUs on both exporters' nodes are one job;
2. ``TORCHELASTIC_RUN_ID`` there (``torchrun``'s rendezvous id, the same on every node of a job;
   ``torchelastic:ID``); its default ``none`` names no job;
3. the Kubernetes pod the process runs in, from its cgroup (``/proc/PID/cgroup``: ``.../kubepods.../pod<UID>...``;
   ``pod:UID``): a pod is one node's share of a job (a multi-node PyTorchJob runs a pod a node; its torchrun's run
   id, 2., names the job whole);
4. its process group (``pgid:N@HOST``: torchrun's ranks, ``mp.spawn``'s children and a shell's job share theirs;
   the host's name keeps two nodes' groups apart, so a job known only by its group is one node's).

Where a process's environment cannot be read (it belongs to another user and the exporter is neither root nor holds
``CAP_SYS_PTRACE``; another PID namespace: a container without ``hostPID``; gone), the rest is read (the cgroup is
world-readable) and :class:`JobReader` counts why (``unreadable``): ``--export`` exports those counts
(``gputop_job_unreadable_processes{reason}``) and says it once on stderr, so a job label that fell back to a process
group is never silent. What each GPU's job came from is ``gputop_job{hpc_job, source}`` (its processes).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

ENV_JOBS = (("SLURM_JOB_ID", "slurm", "{}"), ("TORCHELASTIC_RUN_ID", "torchelastic", "torchelastic:{}"))
NOT_A_RUN_ID = {"", "none"}  # torchrun's default --rdzv-id: every job without one has it
POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
ENVIRON_MAX = 1 << 20  # a process's environment, read at most this much


@dataclass(frozen=True)
class Job:
    job: str
    source: str  # slurm, torchelastic, kubernetes, process-group


def environ_job(environ: bytes) -> Job | None:
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
    return None


def cgroup_pod(cgroup: str) -> str | None:
    """The Kubernetes pod UID a process's cgroup (``/proc/PID/cgroup``) places it in, if any."""
    m = POD.search(cgroup)
    return m.group(1).replace("_", "-") if m else None


@dataclass
class JobReader:
    """Each process's job, read once per process (by pid and start time: a pid used again is read again).
    ``unreadable``: {reason: processes} of the last :meth:`of_gpu` calls since :meth:`take_unreadable`."""

    hostname: str
    proc: str = "/proc"
    live: bool = True  # False (a replay): no /proc to read, the recorded process group only
    _known: dict = field(default_factory=dict)
    unreadable: dict = field(default_factory=dict)

    def of_process(self, p: dict) -> Job | None:
        pid, pgid = p.get("pid"), p.get("pgid")
        group = Job(f"pgid:{pgid}@{self.hostname}", "process-group") if pgid is not None else None
        if not self.live or pid is None:
            return group
        start = self._start_time(pid)
        cached = self._known.get(pid)
        if cached is not None and cached[0] == start:
            job, why = cached[1], cached[2]
        else:
            job, why = self._read(pid)
            if start is not None:
                self._known[pid] = (start, job, why)
        if why:
            self.unreadable[why] = self.unreadable.get(why, 0) + 1
        return job or group

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

    def _start_time(self, pid: int) -> int | None:
        try:
            with open(f"{self.proc}/{pid}/stat", "rb") as f:
                return int(f.read().rsplit(b")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            return None

    def _read(self, pid: int) -> tuple[Job | None, str | None]:
        """(the job its environment or cgroup names, why its environment could not be read)."""
        why = None
        try:
            with open(f"{self.proc}/{pid}/environ", "rb") as f:
                job = environ_job(f.read(ENVIRON_MAX))
            if job is not None:
                return job, None
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
        return (Job(f"pod:{pod}", "kubernetes") if pod else None), why


def jobs_text(unreadable: dict) -> str:
    """One line for processes whose environment could not be read."""
    parts = [f"{n} process{'es' * (n != 1)}: {why}" for why, n in sorted(unreadable.items())]
    return ("--export: the job of some GPU processes came from their cgroup or process group, their environment "
            "unread (" + "; ".join(parts) + ")")


def own_environment_job(env: dict | None = None) -> Job | None:
    """The job the exporter itself runs in (``srun gputop --export`` inside a job step): its own environment's."""
    env = os.environ if env is None else env
    return environ_job(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))


class GpuJobs:
    """Each exported GPU's jobs at a scrape (the collector's ``hpc_job`` labels): the job mapping's where it names
    the GPU (``--job-map``, dcgm-exporter's files), else the jobs its processes' environment or cgroup name, else
    the exporter's own (``SLURM_JOB_ID``: ``srun gputop --export`` in a job step), else its processes' groups."""

    def __init__(self, hostname: str, live: bool, own_job: str | None = None):
        self.reader = JobReader(hostname, live=live)
        self.own_job = own_job
        self.said = False  # the unreadable environments: said once on stderr

    def resolve(self, gpus, procs: dict[int, list[dict]], mapped: dict[str, list[str]]) -> dict[str, list[Job]]:
        """``{gpu label: [Job, ...]}`` of the collector's GPUs (``procs``: position -> its last process list)."""
        out = {}
        self.reader.forget_gone({p.get("pid") for ps in procs.values() for p in ps or []})
        for g in gpus:
            key = g.labels["gpu"]
            if key in mapped:
                out[key] = [Job(j, "job-map") for j in mapped[key]]
                continue
            found = self.reader.of_gpu(procs.get(g.pos))
            named = [j for j in found if j.source != "process-group"]
            if not named and self.own_job:
                named = [Job(self.own_job, "exporter-environment")]
            if named or found:
                out[key] = named or found
        return out

    def families(self, gpus, resolved: dict[str, list[Job]], base_names: list[str]):
        """``gputop_job`` (each GPU's jobs and where each came from) and ``gputop_job_unreadable_processes``."""
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily("gputop_job", "The job of the GPU's work, as its scheduler or launcher knows it, and "
                                "where gputop read it: 1 per job (source: job-map, slurm, torchelastic, kubernetes, "
                                "exporter-environment, process-group).", labels=base_names + ["hpc_job", "source"])
        for g in gpus:
            for job in resolved.get(g.labels["gpu"], []):
                fam.add_metric([g.labels[k] for k in base_names] + [job.job, job.source], 1.0)
        yield fam
        unread = self.reader.take_unreadable()
        bad = GaugeMetricFamily("gputop_job_unreadable_processes", "GPU processes whose environment gputop could not "
                                "read at this scrape (their job then came from their cgroup or process group), by "
                                "reason.", labels=["reason"])
        for why, n in sorted(unread.items()):
            bad.add_metric([why], float(n))
        yield bad
        if unread and not self.said:
            self.said = True
            from gputop.exitcodes import say

            say(jobs_text(unread))
