"""The job each exported GPU's work belongs to, for ``--export``'s ``hpc_job`` label and ``gputop_job`` series.

A process's job is read where every reader of processes reads it (gputop/telemetry/process_job.py: Slurm's job,
torchrun's run id, the rendezvous address, the Kubernetes pod, else its launcher or process group); here, a GPU's
jobs are the job mapping's where it names the GPU (``--job-map``, dcgm-exporter's files), else its processes', else
the exporter's own (``srun gputop --export`` in a job step). Where a process's environment could not be read, the
counts of why are exported (``gputop_job_unreadable_processes{reason}``) and said once on stderr, so a job label
that fell back to a process group is never silent.
"""

from __future__ import annotations

import os

from gputop.telemetry.process_job import Job, JobReader, environ_job

TREE_SOURCES = ("process-group", "launcher", "recorded")  # a job known by one node's process tree only


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
    the exporter's own (``SLURM_JOB_ID``: ``srun gputop --export`` in a job step), else its processes' launcher or
    process group."""

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
            named = [j for j in found if j.source not in TREE_SOURCES]
            if not named and self.own_job:
                named = [Job(self.own_job, "exporter-environment")]
            if named or found:
                out[key] = named or found
        return out

    def families(self, gpus, resolved: dict[str, list[Job]], base_names: list[str]):
        """``gputop_job`` (each GPU's jobs and where each came from) and ``gputop_job_unreadable_processes``."""
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily("gputop_job", "The job of the GPU's work, as its scheduler or launcher knows it, and "
                                "where gputop read it: 1 per job (source: job-map, slurm, torchelastic, rendezvous, "
                                "kubernetes, exporter-environment, launcher, process-group, recorded).", labels=base_names + ["hpc_job", "source"])
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
