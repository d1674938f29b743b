"""Communication between GPUs: the comms-bound class.

Pure (no NVML, no torch). The classifier (:mod:`.classify`, :mod:`.scoring`): :func:`link_evidence` adds a
window's NVLink traffic and its share of the link's peak to the evidence; :func:`score_comms` scores
**comms-bound**: the NVLink counters (GPM's NVLink rx/tx) busy while the SMs wait, neither a pipe nor DRAM
near its peak. A GPU of a data-parallel job that waits for its gradients' all-reduce shows exactly that.
:func:`group_comms` looks at the GPUs of one process group together: a collective is only as fast as its
slowest link. :data:`ADVICE` is the advice of the comms-bound subclasses (the live classifier's, and the
``allreduce`` lesson's, :mod:`gputop.lessons.allreduce`).
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.collectives import judge_job, set_verdict, verdict_field
from gputop.analysis.evidence import mean, number
from gputop.analysis.vocabulary import LABELS
from gputop.format import si

ADVICE = {
    None: "GPUs wait for each other's data: overlap communication with compute (DDP buckets, "
          "FSDP prefetch), communicate less (gradient accumulation with no_sync, bf16 gradients, larger "
          "batches per step), keep the job on GPUs joined by NVLink",
    "link": "the link between the GPUs is near its peak: send fewer bytes (bf16/fp8 gradients, gradient "
            "compression, fewer all-reduces via accumulation) or use GPUs joined by a faster link",
    "exposed": "the gradient all-reduce is not hidden behind backward: keep DDP's bucketed overlap "
               "(bucket_cap_mb around 25, no manual all-reduce after backward), and use no_sync() for "
               "gradient-accumulation steps",
    "collective latency": "small all-reduces pay a fixed cost per call: fuse small tensors into one buffer "
                          "(DDP buckets do), all-reduce less often",
    "pcie": "the GPUs exchange data through host memory over PCIe, at a fraction of NVLink's rate: see whether NVLink "
            "joins them (`nvidia-smi topo -m`: NV# between them) and whether NCCL may use it (NCCL_P2P_DISABLE unset; "
            "NCCL_DEBUG=INFO says \"via P2P\" or \"via SHM\"); on GPUs joined by PCIe only, communicate less "
            "(gradient accumulation with no_sync, bf16 gradients) or keep the job on GPUs joined by NVLink",
    "collectives": "the GPU waits in collectives while the link carries little: the all-reduces are small or a peer "
               "is late. Overlap them with compute (DDP's buckets during backward, FSDP prefetch), all-reduce less "
               "often (gradient accumulation with no_sync), bigger buckets (bucket_cap_mb), and look for a straggler "
               "(one GPU slower than the others)",
}


def link_evidence(samples: list[dict], peaks: dict | None) -> dict:
    """A window's NVLink numbers: mean rx/tx (bytes/s), the link's peak per direction and the busier
    direction's share of it, the share of samples that carry traffic, and the DRAM bandwidth (% of its peak)
    NCCL's own kernels move for that traffic (None where n/a: no GPM, no NVLink, no peak)."""
    rx = mean(s.get("nvlink_rx_bps") for s in samples)
    tx = mean(s.get("nvlink_tx_bps") for s in samples)
    peak = number((peaks or {}).get("nvlink_bytes_per_s_per_dir"))
    flows = [v for v in (rx, tx) if v is not None]
    seen = [max(v for v in (s.get("nvlink_rx_bps"), s.get("nvlink_tx_bps")) if v is not None) for s in samples
            if s.get("nvlink_rx_bps") is not None or s.get("nvlink_tx_bps") is not None]
    dram_peak = number((peaks or {}).get("dram_bytes_per_s"))
    return {"nvlink_rx_bps": rx, "nvlink_tx_bps": tx, "nvlink_link_bytes_per_s": peak,
            "nvlink_link_fraction": max(flows) / peak if flows and peak else None,
            "nvlink_active_sample_fraction": (sum(v >= T.NVLINK_ACTIVE_BYTES_PER_S for v in seen) / len(seen)
                                              if seen else None),
            "nvlink_dram_pct": (100.0 * T.COMMS_DRAM_PER_LINK_BYTE * sum(flows) / dram_peak
                                if flows and dram_peak else None)}


def own_dram_pct(ev: dict) -> float | None:
    """DRAM bandwidth (% of peak) of the GPU's own kernels: the measured less what NCCL moves for the NVLink
    traffic of the window (``COMMS_DRAM_PER_LINK_BYTE``)."""
    dram = ev.get("dram_bw_pct")
    if dram is None:
        return None
    return max(0.0, dram - (ev.get("nvlink_dram_pct") or 0.0))


def link_busy(ev: dict, ramp) -> tuple[float, float]:
    """(link, steady): the NVLink's share of its peak on the ramp of ``NVLINK_LINK_FRACTION``, and steady light
    traffic with NCCL's kernels resident (at most ``COMMS_STEADY_SCORE``; 0 without NVLinks up). Communication is
    there when either is high, whatever else the GPU does."""
    link = ramp(ev.get("nvlink_link_fraction"), T.NVLINK_LINK_FRACTION)
    resident = max(ramp(ev.get("util_gpu_pct"), T.BUSY_NOTHING_PEAK_UTIL_PCT),
                   ramp(ev.get("sm_active_pct"), T.COMMS_SM_ACTIVE_PCT))
    steady = (ramp(ev.get("nvlink_active_sample_fraction"), T.NVLINK_STEADY_SAMPLE_FRACTION) * resident
              * T.COMMS_STEADY_SCORE) if ev.get("nvlink_link_bytes_per_s") else 0.0  # NVLinks up (a peak known)
    return link, steady


def score_comms(ev: dict, s: dict, ramp) -> tuple[float, str | None]:
    """(score, subclass) of comms-bound: the SMs wait (no pipe, no DRAM of their own near a peak) while NVLink is
    busy (its share of the link's peak), or while it carries steady light traffic with kernels resident (NCCL's
    kernels waiting in collectives: small all-reduces, a late peer). Subclass "link" when the link itself is
    near its peak, "collectives" when the traffic is light (the GPU waits in collectives)."""
    link, steady = link_busy(ev, ramp)
    waiting = 1 - max(s.get("compute-bound", 0.0), s.get("memory-bound", 0.0))
    frac = ev.get("nvlink_link_fraction") or 0.0
    sub = "link" if frac >= T.NVLINK_NEAR_LINK_FRACTION else ("collectives" if steady > link else None)
    return max(link, steady) * waiting, sub


def describe_comms(sub: str | None, ev: dict) -> str:
    """The evidence sentence of a comms-bound window."""
    rx, tx = ev.get("nvlink_rx_bps") or 0, ev.get("nvlink_tx_bps") or 0
    text = (f"NVLink rx {si(rx, 'B/s')} / tx {si(tx, 'B/s')} = {100 * (ev.get('nvlink_link_fraction') or 0):.0f}% "
            f"of the {si(ev.get('nvlink_link_bytes_per_s'), 'B/s')} link")
    if sub == "collectives":
        text += (f" in {100 * (ev.get('nvlink_active_sample_fraction') or 0):.0f}% of the samples, kernels active "
                 f"{ev.get('util_gpu_pct') or 0:.0f}%, SMs {ev.get('sm_active_pct') or 0:.0f}% busy, no pipe near a "
                 "peak: the GPU waits in collectives (NCCL's kernels hold SMs while the link carries little)")
    else:
        text += f", SMs {ev.get('sm_active_pct') or 0:.0f}% busy (waiting for the other GPUs)"
        if ev.get("nvlink_dram_pct"):
            text += f"; DRAM {ev.get('dram_bw_pct') or 0:.0f}%, about {ev['nvlink_dram_pct']:.0f}% of it NCCL's own"
    return text + group_text(ev)


def group_text(ev: dict) -> str:
    """'; 2 GPUs of this process group, the least busy link at 31%' where ``ev`` has the group's numbers."""
    if not ev.get("group_gpus"):
        return ""
    low = ev.get("group_link_fraction_min")
    return (f"; {ev['group_gpus']:.0f} GPUs of this process group"
            + (f", the least busy link at {100 * low:.0f}%" if low is not None else ""))


def group_comms(verdicts: list, gpus: list[int] | None = None, timelines: list | None = None) -> list:
    """The verdicts (:class:`Verdict` or their dicts) of the GPUs of one process group (NVML indices ``gpus``,
    default their positions), looked at together: where at least two of them are comms-bound, each of those gets
    the group's numbers as evidence (how many, the least and most busy link) and says so: a collective moves at
    the pace of its slowest member. Then a stalled collective and a straggler
    (:func:`gputop.analysis.collectives.judge_job`, with each GPU's ``timelines`` where a run has them)."""
    judge_job(verdicts, gpus, timelines)
    _through_host(verdicts)

    hit = [v for v in verdicts if v is not None and verdict_field(v, "class") == "comms-bound"]
    if len(hit) < 2:
        return verdicts
    fracs = [verdict_field(v, "evidence").get("nvlink_link_fraction") for v in hit
             if verdict_field(v, "subclass") != "pcie"]
    fracs = [f for f in fracs if f is not None]
    for v in hit:
        ev = verdict_field(v, "evidence")
        if ev.get("group_gpus"):
            continue  # judged together already
        ev.update({"group_gpus": len(hit), "group_link_fraction_min": min(fracs) if fracs else None,
                   "group_link_fraction_max": max(fracs) if fracs else None})
        set_verdict(v, evidence_text=(verdict_field(v, "evidence_text") or "") + group_text(ev))
    return verdicts


def _through_host(verdicts: list) -> None:
    """GPUs of one job that talk through host memory: at least two of them PCIe-bound with traffic both ways at
    once (``PCIE_COMMS_BALANCE``, ``PCIE_COMMS_MIN_BPS``) and NVLink idle are NCCL's peers without a peer-to-peer
    path, not copies of their own: each becomes comms-bound "pcie" (PCIe-bound in ``mixed``)."""
    def flows(v):
        ev = verdict_field(v, "evidence") or {}
        rx, tx = number(ev.get("pcie_rx_bps")), number(ev.get("pcie_tx_bps"))
        if (verdict_field(v, "class") != "pcie-bound" or rx is None or tx is None
                or (ev.get("nvlink_link_fraction") or 0) >= 0.01):
            return None
        lo, hi = min(rx, tx), max(rx, tx)
        return (rx, tx) if lo >= T.PCIE_COMMS_MIN_BPS and lo >= T.PCIE_COMMS_BALANCE * hi else None

    both = [(v, f) for v in verdicts if v is not None for f in [flows(v)] if f is not None]
    if len(both) < 2:
        return
    for v, (rx, tx) in both:
        text = (f"PCIe rx {si(rx, 'B/s')} / tx {si(tx, 'B/s')}, both ways at once on each of {len(both)} GPUs of this "
                "job, NVLink idle: NCCL's traffic between them goes through host memory (no peer-to-peer path)")
        mixed = ["pcie-bound"] + [m for m in verdict_field(v, "mixed") or [] if m not in ("pcie-bound", "comms-bound")]
        set_verdict(v, **{"class": "comms-bound", "subclass": "pcie", "evidence_text": text, "advice": ADVICE["pcie"],
                   "mixed": mixed})
        if isinstance(v, dict):  # a document's verdict names its class for people too
            v["label"] = LABELS["comms-bound"]


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


def node_jobs(window: list[dict], positions: list[int]) -> list[list[int]]:
    """A node's GPUs (indices into ``positions``, the source's positions shown) grouped into jobs by the process
    group of the processes NVML last listed on each in ``window`` (``pgid``: torchrun's ranks, mp.spawn's children,
    a shell job share theirs; two jobs started apart have two). A GPU with no process joins every job (a rank that
    left its GPU is its job's). One job, or no process group seen (a trace without them, another PID namespace):
    every GPU together, as one job."""
    last = latest_processes(window, positions)
    jobs: dict[int, list[int]] = {}
    free = []
    for i, pos in enumerate(positions):
        groups = {p.get("pgid") for p in last.get(pos) or [] if p.get("pgid") is not None}
        if not groups:
            free.append(i)
        for g in groups:
            jobs.setdefault(g, []).append(i)
    if len(jobs) <= 1:
        return [list(range(len(positions)))]
    return [sorted(set(members) | set(free)) for members in jobs.values()]


def judge_node(verdicts: list, window: list[dict], positions: list[int], gpus: list[int] | None = None) -> list:
    """:func:`group_comms` for each job of the node (:func:`node_jobs`): the TUI's and ``--export``'s live verdicts
    of every GPU, ``gpus`` their names (NVML indices; default their positions in ``verdicts``)."""
    names = list(range(len(verdicts))) if gpus is None else list(gpus)
    for job in node_jobs(window, positions):
        group_comms([verdicts[j] for j in job], [names[j] for j in job])
    return verdicts

