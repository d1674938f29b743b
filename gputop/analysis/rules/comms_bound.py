"""comms-bound (communication-bound): the NVLink counters busy while the SMs wait, neither a pipe nor DRAM near its
peak: a GPU of a data-parallel job waiting for its gradients' all-reduce. Subclass "link": the link near its peak;
"collectives": steady light traffic with NCCL's kernels resident (small all-reduces, a late peer). The GPUs of a
job judged together add "pcie" (NCCL through host memory) and "straggler" (waiting for a slower GPU), and each
comms-bound GPU's group numbers (gputop/analysis/comms.py, collectives.py).

:func:`link_evidence` adds a window's NVLink numbers to its evidence. The score is damped by a pipe or DRAM near
its peak in the arbitration table, and damps launch-bound and input-starved there (NCCL's kernels keep a few SMs
busy while they wait, and the gaps are the exchange). :data:`ADVICE` is also the allreduce lesson's
(gputop/lessons/allreduce.py), with :data:`COMMS_LATENCY_SHARE` and :data:`COMMS_EXPOSED_SHARE`.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import Key, declare, mean, number
from gputop.analysis.rules.base import MULTI2, MULTI4, Example, Rule, Score, pct_text as _p, ramp
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import si

# NVLink traffic (busier direction, GPM's NVLink rx/tx) as a fraction of the link's per-direction peak.
# NCCL's large all-reduces reach 70-90% of an NVLink's peak; a data-parallel step that waits for its
# gradients averages less over a window (the link idles while backward computes). 15% of an H100's
# 450 GB/s is ~70 GB/s, more than a PCIe gen5 link carries: GPUs talking, not a stray copy. On the 4-H100
# corpus (2026-11-26) a 98%-NCCL all-reduce loop averages 47% of the 450 GB/s link.
NVLINK_LINK_FRACTION = (0.15, 0.45)
# Subclass "link": the link itself near its peak (as pcie-bound's PCIE_NEAR_LINK_FRACTION).
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
# An all-reduce message is latency-bound when the fixed cost of a call (the sweep's fitted latency) is at
# least half its time: the usual alpha-beta model's crossover, where the transfer time equals the latency.
COMMS_LATENCY_SHARE = 0.5
# A training step is comms-bound when the all-reduce the GPU waits for (step time less the compute-only
# step) is at least a fifth of the step: removing it would speed the step up by 25% or more.
COMMS_EXPOSED_SHARE = 0.2

EVIDENCE = declare(
    Key("nvlink_rx_bps", "B/s", "NVLink received, mean (GPM)"),
    Key("nvlink_tx_bps", "B/s", "NVLink sent, mean (GPM)"),
    Key("nvlink_link_bytes_per_s", "B/s", "the GPU's NVLinks' peak per direction (gputop.analysis.links)"),
    Key("nvlink_link_fraction", "fraction", "the busier NVLink direction's share of the peak"),
    Key("nvlink_active_sample_fraction", "fraction", "share of the samples carrying NVLink traffic"),
    Key("nvlink_dram_pct", "%", "DRAM bandwidth NCCL's kernels move for the NVLink traffic, % of DRAM's peak"),
    Key("group_gpus", "count", "comms-bound GPUs of this process group"),
    Key("group_link_fraction_min", "fraction", "the least busy NVLink of the group, share of its peak"),
    Key("group_link_fraction_max", "fraction", "the busiest NVLink of the group, share of its peak"),
)


def link_evidence(samples: list[dict], peaks: dict | None, hints: dict | None = None) -> dict:
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
            "nvlink_active_sample_fraction": (sum(v >= NVLINK_ACTIVE_BYTES_PER_S for v in seen) / len(seen)
                                              if seen else None),
            "nvlink_dram_pct": (100.0 * COMMS_DRAM_PER_LINK_BYTE * sum(flows) / dram_peak
                                if flows and dram_peak else None)}


def own_dram_pct(ev: dict) -> float | None:
    """DRAM bandwidth (% of peak) of the GPU's own kernels: the measured less what NCCL moves for the NVLink
    traffic of the window (``COMMS_DRAM_PER_LINK_BYTE``)."""
    dram = ev.get("dram_bw_pct")
    if dram is None:
        return None
    return max(0.0, dram - (ev.get("nvlink_dram_pct") or 0.0))


def link_busy(ev: dict) -> tuple[float, float]:
    """(link, steady): the NVLink's share of its peak on the ramp of ``NVLINK_LINK_FRACTION``, and steady light
    traffic with NCCL's kernels resident (at most ``COMMS_STEADY_SCORE``; 0 without NVLinks up). Communication is
    there when either is high, whatever else the GPU does."""
    link = ramp(ev.get("nvlink_link_fraction"), NVLINK_LINK_FRACTION)
    resident = max(ramp(ev.get("util_gpu_pct"), T.BUSY_NOTHING_PEAK_UTIL_PCT),
                   ramp(ev.get("sm_active_pct"), COMMS_SM_ACTIVE_PCT))
    steady = (ramp(ev.get("nvlink_active_sample_fraction"), NVLINK_STEADY_SAMPLE_FRACTION) * resident
              * COMMS_STEADY_SCORE) if ev.get("nvlink_link_bytes_per_s") else 0.0  # NVLinks up (a peak known)
    return link, steady


def score(ev: dict, hints: dict) -> Score:
    """NVLink busy (its share of the link's peak), or carrying steady light traffic with kernels resident (NCCL's
    kernels waiting in collectives); the SMs waiting is the table's row (a pipe or DRAM near its peak damps it)."""
    link, steady = link_busy(ev)
    frac = ev.get("nvlink_link_fraction") or 0.0
    sub = Sub.LINK if frac >= NVLINK_NEAR_LINK_FRACTION else (Sub.COLLECTIVES if steady > link else None)
    return Score(max(link, steady), sub)


def describe(sub, ev: dict) -> str:
    rx, tx = ev.get("nvlink_rx_bps") or 0, ev.get("nvlink_tx_bps") or 0
    text = (f"NVLink rx {si(rx, 'B/s')} / tx {si(tx, 'B/s')} = {100 * (ev.get('nvlink_link_fraction') or 0):.0f}% "
            f"of the {si(ev.get('nvlink_link_bytes_per_s'), 'B/s')} link")
    if sub == Sub.COLLECTIVES:
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


ADVICE = {
    None: "GPUs wait for each other's data: overlap communication with compute (DDP buckets, "
          "FSDP prefetch), communicate less (gradient accumulation with no_sync, bf16 gradients, larger "
          "batches per step), keep the job on GPUs joined by NVLink",
    Sub.LINK: "the link between the GPUs is near its peak: send fewer bytes (bf16/fp8 gradients, gradient "
              "compression, fewer all-reduces via accumulation) or use GPUs joined by a faster link",
    Sub.EXPOSED: "the gradient all-reduce is not hidden behind backward: keep DDP's bucketed overlap "
                 "(bucket_cap_mb around 25, no manual all-reduce after backward), and use no_sync() for "
                 "gradient-accumulation steps",
    Sub.COLLECTIVE_LATENCY: "small all-reduces pay a fixed cost per call: fuse small tensors into one buffer "
                            "(DDP buckets do), all-reduce less often",
    Sub.PCIE: "the GPUs exchange data through host memory over PCIe, at a fraction of NVLink's rate: see whether "
              "NVLink joins them (`nvidia-smi topo -m`: NV# between them) and whether NCCL may use it "
              "(NCCL_P2P_DISABLE unset; NCCL_DEBUG=INFO says \"via P2P\" or \"via SHM\"); on GPUs joined by PCIe "
              "only, communicate less (gradient accumulation with no_sync, bf16 gradients) or keep the job on GPUs "
              "joined by NVLink",
    Sub.COLLECTIVES: "the GPU waits in collectives while the link carries little: the all-reduces are small or a "
                     "peer is late. Overlap them with compute (DDP's buckets during backward, FSDP prefetch), "
                     "all-reduce less often (gradient accumulation with no_sync), bigger buckets (bucket_cap_mb), "
                     "and look for a straggler (one GPU slower than the others)",
    Sub.STRAGGLER: "this GPU waits for a slower one (the straggler) in every collective: balance the work across "
                   "ranks (equal batch and sequence lengths, the same model shard sizes), and check the "
                   "straggler's clocks, temperature and power limit",
}
# A waiter whose straggler is slowed by its host (gputop/analysis/collectives.py): subclass "straggler" still.
STRAGGLER_HOST_ADVICE = (
    "this GPU waits in every collective for a GPU whose own process is slower (its data pipeline or Python loop "
    "keeps it idle): give that rank's input pipeline more DataLoader workers, move its preprocessing to the GPU or "
    "cache it, and look for work only that rank does (logging, evaluation, checkpointing on rank 0)")


def _overlapped(ev: dict, board, main) -> bool:
    """NVLink busy under the GPU's own work (DDP's all-reduce overlapped with backward): a pipe or DRAM near its
    peak damped comms-bound under MIXED_MIN_SCORE (not said of a stall: NCCL's kernels wait there)."""
    return (main not in (Cls.COMMS_BOUND, Cls.STALLED) and max(link_busy(ev)) >= T.MIXED_MIN_SCORE
            and board.value(Cls.COMMS_BOUND) < T.MIXED_MIN_SCORE)


def notes(ev: dict, board, main) -> list[str]:
    if not _overlapped(ev, board, main):
        return []
    return [f"NVLink also busy (rx {si(ev.get('nvlink_rx_bps') or 0, 'B/s')} / tx "
            f"{si(ev.get('nvlink_tx_bps') or 0, 'B/s')}, {_p(100 * (ev.get('nvlink_link_fraction') or 0))} of "
            "the link), overlapped with the GPU's own work: communication hidden behind it"]


def also_mixed(ev: dict, board, main) -> list:
    return [Cls.COMMS_BOUND] if _overlapped(ev, board, main) else []


EXAMPLES = (
    Example(MULTI4 + "comms_mlp.jsonl.gz", 3, 20.0, 24.0, True, "an all-reduce loop: NVLink at 47% of its peak"),
    Example(MULTI4 + "ddp_resnet50_overlap.jsonl.gz", 3, 24.0, 28.0, True,
            "DDP ResNet-50: NCCL's kernels resident, light steady NVLink traffic", Sub.COLLECTIVES),
    Example(MULTI2 + "fsdp_gpt2.jsonl.gz", 1, 36.0, 40.0, False,
            "FSDP's gathers under the step's own kernels: hidden behind them (the table damps comms-bound)"),
    Example(MULTI4 + "hang_idle.jsonl.gz", 0, 24.0, 28.0, False, "a stuck collective: nothing moves, stalled"),
)

RULE = Rule(Cls.COMMS_BOUND, score, describe, ADVICE, EVIDENCE, EXAMPLES, measure=link_evidence, notes=notes,
            also_mixed=also_mixed)
