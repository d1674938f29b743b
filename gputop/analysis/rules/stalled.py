"""stalled (issue 25): NCCL's kernels wait for a peer that never comes. Kernels resident all the time (duty cycle
100%), a fixed few SMs busy (one a channel: 24 of an H100's 132 read 18.2%), no pipe, no DRAM, no NVLink, no PCIe
traffic, power low (and flat, once the first second's decay from the busy level is over). Subclass "collective":
the job's other GPUs wait in it too, left, or idle (gputop/analysis/collectives.py's ``judge_job``).

Its own class, not a comms-bound subclass: a stall is no bottleneck (nothing moves, the job makes no progress: a
fault), an alert fires on ``gputop_bottleneck{class="stalled"} == 1`` alone, the TUI strip shows it apart from slow
communication, and a run's time by class does not count a hang as communication time. It damps launch-bound in
the arbitration table. Its fingerprint's medians (``stall_*``) stay in a verdict's evidence only when it is the
verdict's class.
"""

from __future__ import annotations

from gputop.analysis.evidence import Key, declare, number
from gputop.analysis.rules.base import MULTI4, TRACES, Example, Rule, Score, has_gpm, ramp
from gputop.analysis.vocabulary import Cls, Sub
from gputop.format import si

# NCCL's kernels waiting for a peer that never comes, on the 4-H100 corpus (hang_exit, hang_idle): duty cycle
# 100% in every sample, SMs 18.18% (24 channels / 132 SMs) to the hundredth, INT pipe 0.16% and the others 0,
# DRAM 0.001%, NVLink 0, PCIe 0.2-1.4 MB/s (NVML's own reads), power 123-142 W of 700 flat to 0.1%. The
# nearest single-GPU window (wl_cudagraphs_h200's CUDA-graph replay of tiny kernels): duty cycle 95-97%, SMs
# 21%, INT pipe 1.38%, tensor and FP32 0.23%, DRAM 0: its pipes and duty cycle keep it latency-bound.
STALL_UTIL_PCT = (97.0, 99.5)
STALL_SM_ACTIVE_PCT = ((2.0, 5.0), (35.0, 50.0))  # (rises over, falls over): a few SMs, not none, not most
STALL_PIPE_PCT = (0.5, 1.0)  # the busiest pipe (the spinning warps' integer compares): about nothing
STALL_DRAM_PCT = (0.1, 0.5)
STALL_LINK_BYTES_PER_S = (1e8, 5e8)  # NVLink, the busier direction
STALL_PCIE_FRACTION = (0.01, 0.03)
STALL_POWER_FRACTION = (0.35, 0.5)  # a waiting kernel draws little over idle (130 W of 700 on an H100)
# ... or its power is on its way down there: the last sample at most this share of the window's highest (an H100
# falls from 580 W to 130 W over the 2 s after its last matmul, 45 W every 100 ms)
STALL_POWER_FALLING = 0.8

FINGERPRINT = declare(
    Key("stall_util_median_pct", "%", "the window's median kernel duty cycle"),
    Key("stall_sm_median_pct", "%", "the window's median SM activity"),
    Key("stall_pipe_median_pct", "%", "the window's median busiest pipe"),
    Key("stall_dram_median_pct", "%", "the window's median DRAM bandwidth"),
    Key("stall_nvlink_median_bps", "B/s", "the window's median NVLink traffic, busier direction"),
    Key("stall_pcie_median_fraction", "fraction", "the window's median PCIe traffic that reaches memory, of the link"),
    Key("stall_power_median_w", "W", "median board power of the window's second half (where it settled)"),
    Key("stall_power_falling", "0/1", "1: the last sample's power at most STALL_POWER_FALLING of the window's highest"),
)
EVIDENCE = FINGERPRINT + declare(
    Key("processes_on_gpu", "count", "processes in the GPU's last process list of the window"),
    Key("stalled_for_s", "s", "how long the GPU has been stalled (the regime's age, or the run's stalled time)"),
    Key("stalled_since_s", "s", "when the run's first stalled segment began (seconds since the run started)"),
    Key("job_gpus_waiting", "count", "GPUs of the job waiting in the stuck collective"),
    Key("job_gpus_left", "count", "GPUs of the job with no process any more"),
    Key("job_gpus_idle", "count", "GPUs of the job whose process runs nothing"),
)

PIPES = ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "int_pct", "dfma_pct", "hmma_pct", "imma_pct")


def _median(xs: list) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def stall_evidence(samples: list[dict], peaks: dict | None = None, hints: dict | None = None) -> dict:
    """The window's numbers the stall fingerprint needs: the medians of its samples' duty cycle, SM activity,
    busiest pipe, DRAM, NVLink and PCIe traffic (PCIe bytes that land in memory: no more than DRAM moves; medians:
    the window where a stall begins still holds the last samples of the work before it), the power it settled at
    (the median of the window's second half) and whether it is falling (the first seconds of a stall decay from the
    busy level; then it is flat to 0.1%), and how many processes the GPU's last process list held (None: no list
    in the window)."""
    def med(key):
        return _median([number(s.get(key)) for s in samples])

    def flow(s, a, b):
        v = [x for x in (number(s.get(a)), number(s.get(b))) if x is not None]
        return max(v) if v else None

    watts = [p for s in samples if (p := number(s.get("power_w"))) is not None]
    power = watts[len(watts) // 2:]  # the level it settled at: the first seconds of a stall decay from busy
    lists = [s["processes"] for s in samples if isinstance(s.get("processes"), list)]
    pipes = [max((number(s.get(k)) for k in PIPES if number(s.get(k)) is not None), default=None) for s in samples]
    pcie_peak = number((peaks or {}).get("pcie_bytes_per_s_per_dir"))
    dram_peak = number((peaks or {}).get("dram_bytes_per_s"))

    def landed(s):  # PCIe bytes a second that reach the GPU's memory (or leave it): at most DRAM's traffic
        bps, dram = flow(s, "pcie_rx_bps", "pcie_tx_bps"), number(s.get("dram_bw_pct"))
        return min(bps, dram / 100.0 * dram_peak) if bps is not None and dram is not None and dram_peak else bps

    # a kernel that spins on a flag in host memory (NCCL's proxy, a point-to-point receive) reads it over PCIe
    # again and again, gigabytes a second that are never stored: polling, not a transfer
    pcie = _median([landed(s) for s in samples])

    return {"processes_on_gpu": len(lists[-1]) if lists else None,
            "stall_util_median_pct": med("util_gpu_pct"), "stall_sm_median_pct": med("sm_active_pct"),
            "stall_pipe_median_pct": _median(pipes), "stall_dram_median_pct": med("dram_bw_pct"),
            "stall_nvlink_median_bps": _median([flow(s, "nvlink_rx_bps", "nvlink_tx_bps") for s in samples]),
            "stall_pcie_median_fraction": pcie / pcie_peak if pcie is not None and pcie_peak else None,
            "stall_power_median_w": _median(power),
            "stall_power_falling": (1.0 if watts and watts[-1] <= STALL_POWER_FALLING * max(watts) else 0.0)
            if watts else None}


def score(ev: dict, hints: dict) -> Score:
    """0..1: the window looks like a kernel that waits and does nothing (module doc), on the medians of its
    samples (:func:`stall_evidence`). Needs GPM (SM activity and the pipes); a window with real work, memory or
    link traffic in most of its samples scores 0."""
    util, sm, pipe = ev.get("stall_util_median_pct"), ev.get("stall_sm_median_pct"), ev.get("stall_pipe_median_pct")
    if not has_gpm(ev) or sm is None or pipe is None or util is None:
        return Score(0.0)
    limit = ev.get("power_limit_w")
    power = ev["stall_power_median_w"] / limit if ev.get("stall_power_median_w") is not None and limit else None
    low = 1.0 if ev.get("stall_power_falling") else 1 - ramp(power, STALL_POWER_FRACTION)  # low, or on its way down
    return Score(ramp(util, STALL_UTIL_PCT)
                 * ramp(sm, STALL_SM_ACTIVE_PCT[0]) * (1 - ramp(sm, STALL_SM_ACTIVE_PCT[1]))
                 * (1 - ramp(pipe, STALL_PIPE_PCT))
                 * (1 - ramp(ev.get("stall_dram_median_pct"), STALL_DRAM_PCT))
                 * (1 - ramp(ev.get("stall_nvlink_median_bps"), STALL_LINK_BYTES_PER_S))
                 * (1 - ramp(ev.get("stall_pcie_median_fraction"), STALL_PCIE_FRACTION))
                 * low)


def describe(sub, ev: dict, job: dict | None = None) -> str:
    """The evidence sentence of a stalled GPU (with the job's story where ``judge_job`` added it)."""
    nvlink = max((v for v in (ev.get("nvlink_rx_bps"), ev.get("nvlink_tx_bps")) if v is not None), default=None)
    text = (f"kernels active {ev.get('util_gpu_pct') or 0:.0f}%, SMs {ev.get('sm_active_pct') or 0:.1f}% busy, "
            f"no pipe at work, DRAM {ev.get('dram_bw_pct') or 0:.2f}%, NVLink {si(nvlink or 0, 'B/s')}, "
            f"PCIe {si(max(ev.get('pcie_rx_bps') or 0, ev.get('pcie_tx_bps') or 0), 'B/s')}, power low "
            f"({ev.get('power_w') or 0:.0f} W): a kernel waits and nothing moves")
    if sub == Sub.COLLECTIVE:
        text = "a collective is stuck: " + text
    job = job or {}
    waiting, left, idle = job.get("waiting"), job.get("left"), job.get("idle")
    if waiting:
        text += f"; {gpu_names(waiting)} wait in it"
        if ev.get("stalled_for_s") is not None:
            text += f" for {ev['stalled_for_s']:.0f} s"
    node = job.get("basis") == "node"  # the node's GPUs, not a run's: an idle GPU may be another job's or none
    if left:
        one = len(left) == 1
        text += f"; {gpu_names(left)} " + (f"{'has' if one else 'have'} no process (left the job, or not of it)"
                                           if node else f"left (no process on {'it' if one else 'them'} any more)")
    if idle:
        text += (f"; {gpu_names(idle)} idle (" + ("if of this job: " if node else "")
                 + ("its process runs nothing)" if len(idle) == 1 else "their processes run nothing)"))
    return text


def gpu_names(xs) -> str:
    """'GPU0, GPU2' (as nvidia-smi topo names them; a GPU's index is a name, not a measured number)."""
    return ", ".join(f"GPU{x}" for x in xs)


ADVICE = {
    None: "a kernel has been resident doing nothing: it waits for something that does not come (a collective "
          "whose peers are gone or busy elsewhere, a spin on a flag). py-spy dump --pid PID shows where the "
          "process waits; see the collective advice if it is a distributed job",
    Sub.COLLECTIVE: "a collective is stuck: the GPUs that wait will wait until NCCL's timeout (30 min by default). "
                    "Find the rank that left or never came: PyTorch's flight recorder "
                    "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1, then "
                    "python -m torch.distributed.flight_recorder.fr_trace) lists each rank's last collectives; "
                    "NCCL_DEBUG=INFO logs them. Common causes: ranks that decide to stop on their own clock (a "
                    "time limit, an epoch end or early stopping judged per rank: decide on rank 0 and broadcast), a "
                    "rank that crashed or exits early, data-dependent branches that skip a collective on some ranks",
}

EXAMPLES = (
    Example(MULTI4 + "hang_idle.jsonl.gz", 0, 24.0, 28.0, True, "NCCL's kernels wait for a rank that runs nothing"),
    Example(TRACES + "heldout_multi_h100x4/held_pipeline_stall.jsonl.gz", 3, 28.0, 32.0, True,
            "a pipeline stage waiting on a point-to-point receive that never comes"),
    Example(TRACES + "wl_cudagraphs_h200.jsonl.gz", 0, 8.0, 12.0, False,
            "a CUDA graph of tiny kernels: duty cycle and pipes keep it latency-bound"),
    Example(MULTI4 + "hang_idle.jsonl.gz", 0, 16.0, 20.0, False, "the same GPU's work before the hang"),
)

RULE = Rule(Cls.STALLED, score, describe, ADVICE, EVIDENCE, EXAMPLES, measure=stall_evidence, needs_gpm=True,
            private=tuple(k.name for k in FINGERPRINT))
