"""pcie-bound (PCIe/transfer-bound): PCIe traffic high while the SMs wait. Subclass "link": the link itself near
its peak; "pageable": well below it while the feeding process is busy on the CPU (staging pageable memory).

Its own score (the link's share, before the arbitration table) damps launch-bound, input-starved, host-bound and
idle there: NVML's duty cycle counts copies too, and a copy is work. A pcie-bound pair of GPUs with traffic both
ways at once is NCCL through host memory: comms-bound "pcie" (gputop/analysis/comms.py).
References: [H200] measured on an H200 with gputop; [DECK] pin_memory and non_blocking copies.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.rules.base import MULTI2, TRACES, Example, Rule, Score, has_gpm, pct_text as _p, ramp
from gputop.analysis.rules.input_starved import feeder
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import si

# PCIe throughput (busier direction) as a fraction of the link's per-direction peak. Measured on an
# H200 (gen5 x16, 63 GB/s per direction) [H200]: pageable host-to-device copies run at ~9 GB/s (14%),
# because the CPU stages them through a pinned bounce buffer; the loops of the other cases move
# 0.01-0.14 GB/s (under 0.3%). A training loop copying one batch per step moves 1-2% of a gen5 link.
# So 4% is already unusual and 12% is transfer-dominated when the SMs wait.
PCIE_LINK_FRACTION = (0.04, 0.12)
# Subclass "link": the link itself is near its peak (pinned copies reach 80-90%); "pageable": well
# below it while the feeding process is busy on the CPU (staging pageable memory is the limit).
PCIE_NEAR_LINK_FRACTION = 0.5


def score(ev: dict, hints: dict) -> Score:
    link = ev.get("pcie_link_fraction") or 0.0
    sub = Sub.LINK if link >= PCIE_NEAR_LINK_FRACTION else (Sub.PAGEABLE if feeder(ev)[0] >= 0.5 else None)
    return Score(ramp(ev.get("pcie_link_fraction"), PCIE_LINK_FRACTION), sub)


def describe(sub, ev: dict) -> str:
    rx, tx = ev.get("pcie_rx_bps") or 0, ev.get("pcie_tx_bps") or 0
    way, v = ("host-to-device (rx)", rx) if rx >= tx else ("device-to-host (tx)", tx)
    busy = f"SMs {_p(ev.get('sm_active_pct'))} busy" if has_gpm(ev) else f"kernels active {_p(ev.get('util_gpu_pct'))}"
    text = (f"{way} {si(v, 'B/s')} = {_p(100 * (ev.get('pcie_link_fraction') or 0))} of the "
            f"{si(ev.get('pcie_link_bytes_per_s'), 'B/s')} link, {busy}")
    if sub == Sub.PAGEABLE:
        cpu = ev.get("feeder_cpu_pct")
        text += f", CPU {_p(cpu if cpu is not None else ev.get('host_busiest_core_pct'))} staging pageable memory"
    return text


ADVICE = {
    None:
        "host-device copies are the limit: pin host memory (pin_memory=True) and copy with non_blocking=True, "
        "overlap copies with compute, keep data on the GPU, send less (lower precision)",
    Sub.PAGEABLE:
        "copies from pageable host memory are staged by the CPU far below the link's speed: pin the host buffers "
        "(pin_memory=True, tensor.pin_memory()) and copy with non_blocking=True, overlap copies with compute, "
        "keep data on the GPU",
    Sub.LINK:
        "the PCIe link is near its peak: send less (keep data on the GPU, lower precision, compress), overlap "
        "copies with compute on separate streams",
}


def notes(ev: dict, board, main) -> list[str]:
    """PCIe busy under kernels at a unit's peak (the table damped it): said, not the verdict."""
    if board.own(Cls.PCIE_BOUND) >= T.MIXED_MIN_SCORE and board.value(Cls.PCIE_BOUND) < T.MIXED_MIN_SCORE:
        return [f"PCIe also busy ({_p(100 * ev['pcie_link_fraction'])} of the link), overlapped with GPU work"]
    return []


def missing(ev: dict, board) -> list[str]:
    return ["PCIe throughput or link peak"] if ev.get("pcie_link_fraction") is None else []


EXAMPLES = (
    Example(TRACES + "pageable_h2d.pcie-bound.jsonl.gz", 0, 4.0, 8.0, True,
            "pageable host-to-device copies staged by the CPU at 14% of the link", Sub.PAGEABLE),
    Example(MULTI2 + "comms_mlp_pcie.jsonl.gz", 1, 20.0, 24.0, True,
            "NCCL through host memory, one GPU alone: its link near its peak (the job together: comms-bound)",
            Sub.LINK),
    Example(TRACES + "elementwise.memory-bound.jsonl.gz", 0, 4.0, 8.0, False, "a device-to-device copy: DRAM"),
    Example(TRACES + "idle.idle.jsonl.gz", 0, 0.0, 4.0, False, "an idle GPU"),
)

RULE = Rule(Cls.PCIE_BOUND, score, describe, ADVICE, examples=EXAMPLES, notes=notes, missing=missing,
            per_sample=True)
