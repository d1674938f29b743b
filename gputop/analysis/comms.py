"""Communication between GPUs: the comms-bound class, and the numbers of an all-reduce run.

Pure (no NVML, no torch). Two users:

* the classifier (:mod:`.classify`, :mod:`.scoring`): :func:`link_evidence` adds a window's NVLink traffic and
  its share of the link's peak to the evidence; :func:`score_comms` scores **comms-bound**: the NVLink
  counters (GPM's NVLink rx/tx) busy while the SMs wait, neither a pipe nor DRAM near its peak. A GPU of a
  data-parallel job that waits for its gradients' all-reduce shows exactly that. :func:`group_comms` looks at
  the GPUs of one process group together: a collective is only as fast as its slowest link;
* the ``allreduce`` workload (``workloads/allreduce.py``): :func:`fit_latency_bandwidth` (the fixed cost of one
  call and the best bus bandwidth of a sweep), :func:`link_peak` (the peak of the link NVML says joins the
  GPUs), :func:`sweep_verdicts` (latency- vs bandwidth-bound message sizes) and :func:`step_verdict` (a DDP
  step's exposed communication).
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.collectives import judge_job
from gputop.analysis.evidence import mean, number
from gputop.analysis.links import nvlink_peak
from gputop.analysis.peaks import PCIE_ENCODING, PCIE_GT_PER_S
from gputop.analysis.verdict import Verdict
from gputop.format import si

LATENCY_SHARE = T.COMMS_LATENCY_SHARE

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
    "collectives": "the GPU waits in collectives while the link carries little: the all-reduces are small or a peer "
               "is late. Overlap them with compute (DDP's buckets during backward, FSDP prefetch), all-reduce less "
               "often (gradient accumulation with no_sync), bigger buckets (bucket_cap_mb), and look for a straggler "
               "(one GPU slower than the others)",
}


# -- the classifier ------------------------------------------------------------------------------------------

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


# -- the allreduce workload ----------------------------------------------------------------------------------

def link_peak(facts: dict | None) -> dict | None:
    """The peak per direction of the link NVML says joins two GPUs (``static.read_link``'s facts):
    NVLink = active links x a link's speed (:func:`gputop.analysis.links.nvlink_peak`: NVML's common speed, else
    each link's speed field, else the NVLink version's rate); PCIe = generation x width, less line encoding."""
    if not facts:
        return None
    out = {"kind": facts.get("kind"), "gpus": facts.get("gpus"), "peak_gbps": None, "source": None}
    peak, source = nvlink_peak(facts)
    if facts.get("kind") == "nvlink" and peak:
        out["peak_gbps"], out["source"] = peak / 1e9, source
    elif facts.get("kind") == "pcie":
        gen = facts.get("pcie_max_gen") or facts.get("pcie_cur_gen")
        width = facts.get("pcie_cur_width") or facts.get("pcie_max_width")
        if gen in PCIE_GT_PER_S and width:
            out["peak_gbps"] = PCIE_GT_PER_S[gen] * PCIE_ENCODING[gen] / 8 * width
            out["source"] = f"PCIe gen {gen} x{width} (NVML)"
    return out


def fit_latency_bandwidth(points: list[dict]) -> dict:
    """The two numbers of the usual model t(S) = latency + S / algbw_best of a size sweep: the best measured
    algorithm and bus bandwidths, the fixed cost per call (the least, over the smaller half of the
    sizes, of a message's time less its transfer time at the best bandwidth), and the size at which the two
    are equal."""
    pts = sorted((q for q in points if q.get("time_us") and q.get("size_bytes")), key=lambda q: q["size_bytes"])
    if not pts:
        return {}
    algbw = max(q["algbw_gbps"] for q in pts) * 1e9
    small = pts[:max(1, (len(pts) + 1) // 2)]  # the smaller half of the sizes: their time is mostly the fixed cost
    latency = max(0.0, min(q["time_us"] * 1e-6 - q["size_bytes"] / algbw for q in small))
    return {"latency_us": latency * 1e6, "algbw_gbps": algbw / 1e9,
            "busbw_gbps": max(q["busbw_gbps"] for q in pts), "half_bytes": latency * algbw}


def sweep_verdicts(points: list[dict], fit: dict, link: dict | None) -> list[Verdict]:
    """One verdict per message size: latency-bound where the fixed cost per call is at least
    ``LATENCY_SHARE`` of its time, else comms-bound (the link's bandwidth), with busbw's share of the link's
    peak where NVML gave one (else of the sweep's best)."""
    out = []
    peak = (link or {}).get("peak_gbps")
    for q in points:
        t = q["time_us"]
        share = min(1.0, (fit.get("latency_us") or 0.0) / t) if t else None
        ev = {"size_bytes": q["size_bytes"], "time_us": t, "busbw_gbps": q["busbw_gbps"],
              "latency_us": fit.get("latency_us"), "latency_share": share}
        size = si(q["size_bytes"], "B")
        if share is not None and share >= LATENCY_SHARE:
            text = (f"{size}: {t:.1f} us per all-reduce, {100 * share:.0f}% of it the fixed cost of a call "
                    f"({fit['latency_us']:.1f} us); busbw only {q['busbw_gbps']:.2f} GB/s")
            out.append(Verdict("latency-bound", "collective latency", None, ev, text, ADVICE["collective latency"]))
            continue
        if peak:
            ev["link_peak_gbps"], ev["link_pct"] = peak, 100.0 * q["busbw_gbps"] / peak
            ref = f"{ev['link_pct']:.0f}% of the {link['kind']} peak {peak:.0f} GB/s ({link['source']})"
        else:
            best = fit.get("busbw_gbps") or q["busbw_gbps"]
            ev["best_busbw_pct"] = 100.0 * q["busbw_gbps"] / best if best else None
            ref = f"{ev['best_busbw_pct']:.0f}% of the best measured busbw (no link peak from NVML)"
        text = f"{size}: bandwidth-bound, busbw {q['busbw_gbps']:.2f} GB/s = {ref}"
        sub = "link" if peak and ev["link_pct"] >= 100 * T.NVLINK_NEAR_LINK_FRACTION else None
        out.append(Verdict("comms-bound", sub, None, ev, text, ADVICE[sub]))
    return out


def step_verdict(points: list[dict]) -> Verdict | None:
    """The DDP step: comms-bound ("exposed") when, with overlap off, the exposed all-reduce is at least
    ``COMMS_EXPOSED_SHARE`` of the step; the evidence says how much DDP's overlap hid."""
    by = {q.get("mode"): q for q in points}
    base, off, on = by.get("compute only"), by.get("no overlap"), by.get("overlap")
    if not base or not off:
        return None
    ev = {"compute_step_ms": base["step_ms"], "no_overlap_step_ms": off["step_ms"],
          "no_overlap_exposed_ms": off["exposed_comm_ms"], "no_overlap_exposed_share": off["exposed_share"],
          "comm_ms": off["comm_ms"], "grad_bytes": off["grad_bytes"]}
    text = (f"all-reduce of {si(off['grad_bytes'], 'B')} of gradients takes {off['comm_ms']:.2f} ms; with "
            f"overlap off {off['exposed_comm_ms']:.2f} ms of the {off['step_ms']:.2f} ms step "
            f"({100 * off['exposed_share']:.0f}%) waits for it")
    if on:
        ev.update({"overlap_step_ms": on["step_ms"], "overlap_exposed_ms": on["exposed_comm_ms"],
                   "overlap_hidden_pct": on.get("hidden_pct")})
        text += f"; DDP's overlap: {on['step_ms']:.2f} ms, {on['exposed_comm_ms']:.2f} ms exposed"
    if off["exposed_share"] >= T.COMMS_EXPOSED_SHARE:
        return Verdict("comms-bound", "exposed", None, ev, text, ADVICE["exposed"])
    text += "; communication is a small part of this step"
    return Verdict("compute-bound", "comms hidden", None, ev, text,
                   "communication is not what limits this step: see the single-GPU verdicts for what does")
