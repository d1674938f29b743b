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
from gputop.analysis.evidence import mean, number
from gputop.analysis.verdict import Verdict
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
}


def link_evidence(samples: list[dict], peaks: dict | None) -> dict:
    """A window's NVLink numbers: mean rx/tx (bytes/s), the link's peak per direction and the busier
    direction's share of it (None where n/a: no GPM, no NVLink, no peak)."""
    rx = mean(s.get("nvlink_rx_bps") for s in samples)
    tx = mean(s.get("nvlink_tx_bps") for s in samples)
    peak = number((peaks or {}).get("nvlink_bytes_per_s_per_dir"))
    flows = [v for v in (rx, tx) if v is not None]
    return {"nvlink_rx_bps": rx, "nvlink_tx_bps": tx, "nvlink_link_bytes_per_s": peak,
            "nvlink_link_fraction": max(flows) / peak if flows and peak else None}


def score_comms(ev: dict, s: dict, ramp) -> tuple[float, str | None]:
    """(score, subclass) of comms-bound: NVLink busy while the SMs wait (no pipe, no DRAM near a peak).
    The subclass is "link" when the link itself is near its peak."""
    link = ramp(ev.get("nvlink_link_fraction"), T.NVLINK_LINK_FRACTION)
    waiting = 1 - max(s.get("compute-bound", 0.0), s.get("memory-bound", 0.0))
    frac = ev.get("nvlink_link_fraction") or 0.0
    return link * waiting, ("link" if frac >= T.NVLINK_NEAR_LINK_FRACTION else None)


def describe_comms(sub: str | None, ev: dict) -> str:
    """The evidence sentence of a comms-bound window."""
    rx, tx = ev.get("nvlink_rx_bps") or 0, ev.get("nvlink_tx_bps") or 0
    text = (f"NVLink rx {si(rx, 'B/s')} / tx {si(tx, 'B/s')} = {100 * (ev.get('nvlink_link_fraction') or 0):.0f}% "
            f"of the {si(ev.get('nvlink_link_bytes_per_s'), 'B/s')} link, SMs {ev.get('sm_active_pct') or 0:.0f}% "
            "busy (waiting for the other GPUs)")
    return text + group_text(ev)


def group_text(ev: dict) -> str:
    """'; 2 GPUs of this process group, the least busy link at 31%' where ``ev`` has the group's numbers."""
    if not ev.get("group_gpus"):
        return ""
    low = ev.get("group_link_fraction_min")
    return (f"; {ev['group_gpus']:.0f} GPUs of this process group"
            + (f", the least busy link at {100 * low:.0f}%" if low is not None else ""))


def group_comms(verdicts: list) -> list:
    """The verdicts (:class:`Verdict` or their dicts) of the GPUs of one process group, looked at together:
    where at least two of them are comms-bound, each of those gets the group's numbers as evidence (how
    many, the least and most busy link) and says so: a collective moves at the pace of its slowest member."""
    def get(v, key):
        return getattr(v, {"class": "cls"}.get(key, key)) if isinstance(v, Verdict) else v.get(key)

    hit = [v for v in verdicts if v is not None and get(v, "class") == "comms-bound"]
    if len(hit) < 2:
        return verdicts
    fracs = [get(v, "evidence").get("nvlink_link_fraction") for v in hit]
    fracs = [f for f in fracs if f is not None]
    for v in hit:
        ev = get(v, "evidence")
        if ev.get("group_gpus"):
            continue  # judged together already
        ev.update({"group_gpus": len(hit), "group_link_fraction_min": min(fracs) if fracs else None,
                   "group_link_fraction_max": max(fracs) if fracs else None})
        if isinstance(v, Verdict):
            v.evidence_text += group_text(ev)
        else:
            v["evidence_text"] = (v.get("evidence_text") or "") + group_text(ev)
    return verdicts
