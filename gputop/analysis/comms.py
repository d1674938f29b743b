"""The GPUs of one process group looked at together, and a node's GPUs grouped into jobs.

Pure (no NVML, no torch). :func:`group_comms` looks at the verdicts of the GPUs of one process group together: a
collective is only as fast as its slowest link, GPUs that talk through host memory are comms-bound over PCIe, and
:func:`gputop.analysis.collectives.judge_job` finds a stalled collective or a straggler. :func:`node_jobs` groups
a node's GPUs into jobs by their processes' job (gputop/telemetry/process_job.py); :func:`judge_node` judges each job (the TUI's and
``--export``'s live verdicts). The comms-bound class itself (its thresholds, score and words) is
gputop/analysis/rules/comms_bound.py.
"""

from __future__ import annotations

from gputop.analysis.collectives import judge_job
from gputop.analysis.evidence import number
from gputop.analysis.rules.comms_bound import ADVICE, PCIE_COMMS_BALANCE, PCIE_COMMS_MIN_BPS, group_text
from gputop.analysis.vocabulary import Cls, Sub
from gputop.telemetry.process_job import recorded_job
from gputop.format import si


def group_comms(verdicts: list, gpus: list[int] | None = None, timelines: list | None = None,
                stacks: dict | None = None) -> list:
    """The :class:`Verdict`s of the GPUs of one process group (NVML indices ``gpus``, default their positions),
    looked at together: where at least two of them are comms-bound, each of those gets the group's numbers as
    evidence (how many, the least and most busy link) and says so: a collective moves at the pace of its slowest
    member. Then a stalled collective and a straggler (:func:`gputop.analysis.collectives.judge_job`, with each
    GPU's ``timelines`` where a run has them; ``stacks``: the job's culprit record by GPU, where the ranks' stacks
    were read). Annotates them in place, once; returns them."""
    judge_job(verdicts, gpus, timelines, stacks)
    _through_host(verdicts)

    hit = [v for v in verdicts if v is not None and v.cls == Cls.COMMS_BOUND]
    if len(hit) < 2:
        return verdicts
    fracs = [v.evidence.get("nvlink_link_fraction") for v in hit if v.subclass != Sub.PCIE]
    fracs = [f for f in fracs if f is not None]
    for v in hit:
        if v.evidence.get("group_gpus"):
            continue  # judged together already
        v.evidence.update({"group_gpus": len(hit), "group_link_fraction_min": min(fracs) if fracs else None,
                           "group_link_fraction_max": max(fracs) if fracs else None})
        v.evidence_text = (v.evidence_text or "") + group_text(v.evidence)
    return verdicts


def _through_host(verdicts: list) -> None:
    """GPUs of one job that talk through host memory: at least two of them PCIe-bound with traffic both ways at
    once (``PCIE_COMMS_BALANCE``, ``PCIE_COMMS_MIN_BPS``) and NVLink idle are NCCL's peers without a peer-to-peer
    path, not copies of their own: each becomes comms-bound "pcie" (PCIe-bound in ``mixed``)."""
    def flows(v):
        rx, tx = number(v.evidence.get("pcie_rx_bps")), number(v.evidence.get("pcie_tx_bps"))
        if v.cls != Cls.PCIE_BOUND or rx is None or tx is None or (v.evidence.get("nvlink_link_fraction") or 0) >= 0.01:
            return None
        lo, hi = min(rx, tx), max(rx, tx)
        return (rx, tx) if lo >= PCIE_COMMS_MIN_BPS and lo >= PCIE_COMMS_BALANCE * hi else None

    both = [(v, f) for v in verdicts if v is not None for f in [flows(v)] if f is not None]
    if len(both) < 2:
        return
    for v, (rx, tx) in both:
        v.evidence_text = (f"PCIe rx {si(rx, 'B/s')} / tx {si(tx, 'B/s')}, both ways at once on each of {len(both)} "
                           "GPUs of this job, NVLink idle: NCCL's traffic between them goes through host memory (no "
                           "peer-to-peer path)")
        v.mixed = [Cls.PCIE_BOUND] + [m for m in v.mixed if m not in (Cls.PCIE_BOUND, Cls.COMMS_BOUND)]
        v.cls, v.subclass, v.advice = Cls.COMMS_BOUND, Sub.PCIE, ADVICE[Sub.PCIE]


def latest_processes(window: list[dict], positions: list[int], nonempty: bool = False) -> dict[int, list[dict]]:
    """{position: the last process list NVML gave for it in ``window``} (``nonempty``: the last that listed a
    process), read from the newest tick back and no further than needed: the lists come once a second and the TUI
    asks at every frame."""
    want, last = set(positions), {}
    for tick in reversed(window):
        gpus = tick.get("gpus") or []
        for pos in want - last.keys():
            procs = gpus[pos].get("processes") if pos < len(gpus) and gpus[pos] else None
            if isinstance(procs, list) and (procs or not nonempty):
                last[pos] = procs
        if len(last) == len(want):
            break
    return last


def _jobs_of(procs: list[dict]) -> dict[int, str | None]:
    """{id(process): its job} of a node's listed processes: what the sampler read (gputop/telemetry/process_job.py),
    else (a trace from before jobs were read) its recorded process group where another GPU process shares it (a
    group of one says nothing: torchrun starts each rank as the leader of a group of its own)."""
    groups: dict = {}
    for p in procs:
        if not p.get("job") and p.get("pgid") is not None:
            groups[p["pgid"]] = groups.get(p["pgid"], 0) + 1
    out = {}
    for p in procs:
        job = recorded_job(p)
        out[id(p)] = (None if job is None or (not p.get("job") and groups.get(p.get("pgid"), 0) < 2)
                      else job.job)
    return out


def node_jobs(window: list[dict], positions: list[int]) -> list[list[int]]:
    """A node's GPUs (indices into ``positions``, the source's positions shown) grouped into jobs by the job of the
    processes NVML last listed on each in ``window`` (gputop/telemetry/process_job.py: Slurm's, torchrun's run id,
    the rendezvous address, else the launcher or process group; torchrun's ranks, mp.spawn's children, a shell
    script's ranks are one job; two jobs started apart are two). A GPU with no process joins every job (a rank that
    left its GPU is its job's). One job, or no job seen (a trace without them, another PID namespace): every GPU
    together, as one job."""
    last = latest_processes(window, positions)
    job_of = _jobs_of([p for ps in last.values() for p in ps or []])
    jobs: dict[str, list[int]] = {}
    free = []
    for i, pos in enumerate(positions):
        groups = {j for p in last.get(pos) or [] for j in [job_of[id(p)]] if j is not None}
        if not groups:
            free.append(i)
        for g in groups:
            jobs.setdefault(g, []).append(i)
    if len(jobs) <= 1:
        return [list(range(len(positions)))]
    return [sorted(set(members) | set(free)) for members in jobs.values()]


def job_pids(window: list[dict], positions: list[int]) -> list[dict[int, list[int]]]:
    """Each job of the node as its processes: [{index into ``positions``: the pids of that job NVML last listed on
    the GPU}], from each GPU's last list that named a process (a rank that exited keeps its pid). Grouped as
    :func:`node_jobs` groups; processes of no known job are a group of their own where the node has two jobs or
    more, else everyone's."""
    last = latest_processes(window, positions, nonempty=True)
    job_of = _jobs_of([p for ps in last.values() for p in ps or []])
    by_job: dict[str | None, dict[int, list[int]]] = {}
    for i, pos in enumerate(positions):
        for p in last.get(pos) or []:
            if p.get("pid") is not None:
                by_job.setdefault(job_of[id(p)], {}).setdefault(i, []).append(int(p["pid"]))
    if len([j for j in by_job if j is not None]) <= 1:
        merged: dict[int, list[int]] = {}
        for pids in by_job.values():
            for i, ps in pids.items():
                merged.setdefault(i, []).extend(ps)
        return [merged] if merged else []
    return list(by_job.values())


def judge_node(verdicts: list, window: list[dict], positions: list[int], gpus: list[int] | None = None,
               stacks: dict | None = None) -> list:
    """:func:`group_comms` for each job of the node (:func:`node_jobs`): the TUI's and ``--export``'s live
    :class:`Verdict`s of every GPU (None for a GPU without one), ``gpus`` their names (NVML indices; default their
    positions in ``verdicts``); ``stacks``: {GPU name: its job's culprit record} where the ranks' stacks were read
    (gputop/analysis/rank_stacks.py's ``job_records``). Annotates them in place, once; returns them."""
    names = list(range(len(verdicts))) if gpus is None else list(gpus)
    for job in node_jobs(window, positions):
        group_comms([verdicts[j] for j in job], [names[j] for j in job], stacks=stacks)
    return verdicts

