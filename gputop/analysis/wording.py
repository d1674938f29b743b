"""The words of a verdict: its evidence sentence, its advice, and what was missing or worth noting.

:func:`describe` builds the one-line evidence from a window's numbers (the numbers it quotes are those of
the evidence dict, rounded); :func:`advise` gives the advice for a class and subclass.
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.comms import ADVICE as COMMS_ADVICE
from gputop.analysis.comms import describe_comms
from gputop.analysis.collectives import ADVICE as STALL_ADVICE
from gputop.analysis.collectives import describe_stall
from gputop.analysis.evidence import thermal_reasons_seen
from gputop.analysis.scoring import ramp
from gputop.analysis.vocabulary import BASE_CLASSES, PIPE_NAMES
from gputop.format import pct, si


def pct_text(v, digits=0):
    """A percentage for a sentence: two decimals below 1% ('0.03%'), whole numbers above."""
    if v is not None and 0.01 <= v < 1 and digits == 0:
        return pct(v, 2)
    return pct(v, digits)


_p = pct_text  # short, for the dense sentences below


def describe(cls: str, sub: str | None, ev: dict) -> str:
    """The one-line evidence of a verdict, from its numbers. It does not repeat the verdict's name: a
    reader shows ``display_name(verdict)`` first, then this."""
    gpm = ev.get("sm_active_pct") is not None
    dram = (f"DRAM {_p(ev.get('dram_bw_pct'))} of {si(ev.get('dram_peak_bytes_per_s'), 'B/s')}"
            if ev.get("dram_peak_bytes_per_s") else f"DRAM {_p(ev.get('dram_bw_pct'))}")
    clock = ""
    if ev.get("sm_clock_mhz") is not None:
        top = f"/{ev['max_sm_clock_mhz']:.0f}" if ev.get("max_sm_clock_mhz") else ""
        clock = f", SM clock {ev['sm_clock_mhz']:.0f}{top} MHz"
    if cls == "compute-bound":
        if not gpm:
            return (f"kernels active {_p(ev.get('util_gpu_pct'))}, memory controller "
                    f"{_p(ev.get('util_mem_pct'))}, power {_p(_pf(ev))} of the limit (no GPM: which pipe is unknown)")
        pipe_pct = {"tensor": ev.get("tensor_pct") if not ev.get("hmma_pct") and not ev.get("imma_pct")
                    else max(ev.get("hmma_pct") or 0, ev.get("imma_pct") or 0),
                    "fp64": max(ev.get("fp64_pct") or 0, ev.get("dfma_pct") or 0),
                    "fp32": ev.get("fp32_pct"), "fp16": ev.get("fp16_pct"), "int": ev.get("int_pct")}.get(sub)
        dmma = sub == "fp64" and (ev.get("dfma_pct") or 0) > (ev.get("fp64_pct") or 0)
        which = "FP64 tensor (DMMA)" if dmma else PIPE_NAMES.get(sub, sub)
        return (f"{which} {_p(pipe_pct)} busy, {dram}, "
                f"SMs {_p(ev.get('sm_active_pct'))} active{clock}")
    if cls == "memory-bound":
        if not gpm:
            return (f"memory controller busy {_p(ev.get('util_mem_pct'))}, kernels active "
                    f"{_p(ev.get('util_gpu_pct'))} (no GPM: DRAM bandwidth not measured)")
        if sub == "cache":
            pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "int_pct"))
            return (f"SMs {_p(ev.get('sm_active_pct'))} active at "
                    f"{_p(ev.get('sm_occupancy_pct'))} occupancy, yet no pipe (best {_p(pipe_best)}) and {dram}: "
                    "warps wait on L2/L1 traffic or memory latency (GPM has no cache counters)")
        got = f" ({si(ev['dram_bytes_per_s'], 'B/s')})" if ev.get("dram_bytes_per_s") else ""
        if sub == "kernel mix":
            return (f"kernels active {_p(ev.get('util_gpu_pct'))}, {dram}{got} the busiest unit (tensor "
                    f"{_p(ev.get('tensor_pct'))}, FP32 {_p(ev.get('fp32_pct'))}), SMs {_p(ev.get('sm_active_pct'))} "
                    "active: a mix of memory-bound kernels")
        return (f"{dram}{got}, tensor {_p(ev.get('tensor_pct'))}, FP32 {_p(ev.get('fp32_pct'))}, "
                f"SMs {_p(ev.get('sm_active_pct'))} active")
    if cls == "latency-bound":
        if not gpm:
            return (f"kernels active {_p(ev.get('util_gpu_pct'))} but power only "
                    f"{_p(_pf(ev))} of the limit (no GPM: SM activity not measured)")
        if sub == "launch":
            return (f"kernels active {_p(ev.get('util_gpu_pct'))} of the time but SMs only "
                    f"{_p(ev.get('sm_active_pct'), 2)} busy (tiny kernels, launches and syncs)")
        pipe_best = max((ev.get(k) or 0) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct"))
        if sub == "stalls":
            return (f"SMs {_p(ev.get('sm_active_pct'))} active, yet no pipe (best "
                    f"{_p(pipe_best)}) nor DRAM ({_p(ev.get('dram_bw_pct'))}) near its peak")
        return (f"kernels active {_p(ev.get('util_gpu_pct'))}, SMs "
                f"{_p(ev.get('sm_active_pct'))} busy, best pipe {_p(pipe_best)}, DRAM {_p(ev.get('dram_bw_pct'))}")
    if cls == "input-starved":
        sm = f" (SMs {_p(ev.get('sm_active_pct'))})" if gpm else ""
        cpu = (f"the process tree used {_p(ev['feeder_cpu_pct'])} CPU" if ev.get("feeder_cpu_pct") is not None
               else f"the busiest CPU core was {_p(ev.get('host_busiest_core_pct'))} busy")
        text = (f"kernels active {_p(ev.get('util_gpu_pct'))}{sm}, GPU busy in "
                f"{_p(ev.get('busy_sample_pct'))} of samples ({ev.get('bursts', 0):.0f} bursts), while {cpu}")
        if ev.get("data_wait_fraction") is not None:
            text += f"; the workload waited for data {_p(100 * ev['data_wait_fraction'])} of the step"
        return text
    if cls == "comms-bound":
        return describe_comms(sub, ev)
    if cls == "stalled":
        return describe_stall(sub, ev)
    if cls == "host-bound":
        sm = f", SMs {_p(ev.get('sm_active_pct'))} busy" if gpm else ""
        frac = ev.get("feeder_on_gpu_fraction")  # under half: a launcher, whose child (a rank) holds the GPU
        who = ("the watched process tree, whose child holds its CUDA context," if frac is not None
               and frac < T.HOST_CONTEXT_FRACTION else "the process holding its CUDA context")
        return (f"the GPU idle {_p(ev.get('gpu_idle_pct'))} of the time (kernels active "
                f"{_p(ev.get('util_gpu_pct'))}{sm}) while {who} used {_p(ev.get('feeder_cpu_pct'))} CPU")
    if cls == "pcie-bound":
        rx, tx = ev.get("pcie_rx_bps") or 0, ev.get("pcie_tx_bps") or 0
        way, v = ("host-to-device (rx)", rx) if rx >= tx else ("device-to-host (tx)", tx)
        busy = f"SMs {_p(ev.get('sm_active_pct'))} busy" if gpm else f"kernels active {_p(ev.get('util_gpu_pct'))}"
        text = (f"{way} {si(v, 'B/s')} = {_p(100 * (ev.get('pcie_link_fraction') or 0))} of the "
                f"{si(ev.get('pcie_link_bytes_per_s'), 'B/s')} link, {busy}")
        if sub == "pageable":
            cpu = ev.get("feeder_cpu_pct")
            text += f", CPU {_p(cpu if cpu is not None else ev.get('host_busiest_core_pct'))} staging pageable memory"
        return text
    if cls == "throttled":
        if sub == "power":
            share = _p(100 * (ev.get("power_cap_sample_fraction") or 0))
            return (f"power cap in {share} of busy "
                    f"samples at {_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W, SM clock "
                    f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max{clock}")
        reasons = ", ".join(thermal_reasons_seen(ev)) or "thermal slowdown"
        return (f"{reasons} in "
                f"{_p(100 * (ev.get('thermal_sample_fraction') or 0))} of busy samples{clock}")
    if cls == "memory-capacity":
        text = (f"{_p(100 * (ev.get('mem_used_fraction') or 0))} of "
                f"{si(ev.get('mem_total_bytes'), 'B')} used (max {_p(100 * (ev.get('mem_used_max_fraction') or 0))})")
        if sub == "oom":
            text += "; the command reported an out-of-memory error"
        return text
    if sub == "startup":
        return "the command had not created a CUDA context on this GPU yet"
    text = f"kernels active {_p(ev.get('util_gpu_pct'))}"
    if gpm:
        text += f", SMs {_p(ev.get('sm_active_pct'))} busy"
    if ev.get("feeder_cpu_pct") is not None:
        text += f", process tree CPU {_p(ev['feeder_cpu_pct'])}"
    if sub == "waiting":
        text += " while it holds a CUDA context: it waits (sleep, I/O, a lock), not computing on the CPU"
    return text


def _pf(ev):
    return 100 * ev["power_fraction"] if ev.get("power_fraction") is not None else None


def _w(v):
    return "n/a" if v is None else f"{v:.0f}"


ADVICE = {
    ("compute-bound", "tensor"):
        "tensor cores are the limit, which is the GPU doing useful work: to go faster use lower precision "
        "(FP8/INT8 where accuracy allows) or do fewer FLOPs (smaller model, fused ops)",
    ("compute-bound", "fp32"):
        "FP32 pipes are the limit: move the math onto tensor cores (bf16/fp16 autocast, "
        "torch.backends.cuda.matmul.allow_tf32=True) or lower precision, reduce instruction count",
    ("compute-bound", "fp64"):
        "FP64 is the limit: use FP32/TF32 or mixed precision where the numerics allow",
    ("compute-bound", "fp16"):
        "FP16 pipes are the limit: use tensor cores (matmul-shaped work) or fewer instructions",
    ("compute-bound", "int"):
        "integer pipes are the limit (indexing, hashing, bit ops): simplify index math, use vector loads, move "
        "work to tensor cores or lookup tables",
    ("memory-bound", "cache"):
        "on-chip memory traffic is the limit (data that fits in L2, or latency of scattered accesses): fuse ops "
        "so data is reused in registers/shared memory, coalesce accesses",
    ("memory-bound", "kernel mix"):
        "a mix of small memory-bound kernels (elementwise, normalisation, optimizer) takes most of the time and "
        "DRAM is the busiest unit: fuse them (torch.compile, fused optimizers such as AdamW(fused=True), fused "
        "LayerNorm/attention kernels), use bf16 activations",
    ("compute-bound", None):
        "compute is the limit: use tensor cores and lower precision (AMP), reduce instruction count",
    ("memory-bound", None):
        "DRAM bandwidth is the limit: fuse elementwise ops (torch.compile), use lower-precision data (bf16/fp8), "
        "fix access patterns (contiguous, coalesced), reuse data in cache",
    ("latency-bound", "launch"):
        "kernels are too small and launches/syncs dominate: batch more work per kernel, remove per-step syncs "
        "(.item(), .cpu(), synchronize), use CUDA graphs or torch.compile(mode='reduce-overhead')",
    ("latency-bound", "stalls"):
        "SMs wait on latency: increase parallelism and memory accesses in flight (occupancy, more independent "
        "work per thread); profile with Nsight Compute",
    ("latency-bound", "underfilled"):
        "kernels do not fill the GPU: increase the batch size or parallelism, fuse small ops, use CUDA graphs to "
        "cut launch gaps",
    ("latency-bound", None):
        "the GPU is busy but not near a peak: more parallelism (bigger batches), fewer syncs, CUDA graphs",
    ("input-starved", None):
        "the GPU waits for its input: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
        "prefetch_factor), move preprocessing to the GPU, cache decoded data; if the busy CPU time is the "
        "training loop itself (Python and kernel launches, no data work), use a larger batch, CUDA graphs or "
        "torch.compile instead",
    ("host-bound", None):
        "the GPU waits on the host: if the busy CPU time is input preparation (decoding, augmenting, "
        "tokenising), move it off the training loop (DataLoader(num_workers>0, pin_memory=True), GPU-side "
        "transforms, cached pre-processed data); if it is the loop itself (Python, launches, .item() syncs), "
        "do more per step (larger batch, torch.compile, CUDA graphs); profile the CPU side (py-spy, "
        "torch.profiler) to see which",
    ("host-bound", "workers"):
        "the GPU waits on the input pipeline's worker processes: cheaper transforms, GPU-side augmentation "
        "(torchvision.transforms.v2 on tensors, DALI), cached pre-processed data, more workers if cores are free",
    ("host-bound", "one thread"):
        "one thread of the process is at a full core while the GPU waits: profile it (py-spy top) to see "
        "whether it is preparing data (move it to DataLoader workers) or the loop's own overhead (larger "
        "batch, torch.compile, CUDA graphs, fewer .item() syncs)",
    ("idle", "waiting"):
        "the process holds the GPU but waits (sleep, I/O, a lock, another process): check what it waits on "
        "(py-spy dump, strace); the GPU itself is not the problem",
    ("pcie-bound", None):
        "host-device copies are the limit: pin host memory (pin_memory=True) and copy with non_blocking=True, "
        "overlap copies with compute, keep data on the GPU, send less (lower precision)",
    ("pcie-bound", "pageable"):
        "copies from pageable host memory are staged by the CPU far below the link's speed: pin the host buffers "
        "(pin_memory=True, tensor.pin_memory()) and copy with non_blocking=True, overlap copies with compute, "
        "keep data on the GPU",
    ("pcie-bound", "link"):
        "the PCIe link is near its peak: send less (keep data on the GPU, lower precision, compress), overlap "
        "copies with compute on separate streams",
    ("comms-bound", None): COMMS_ADVICE[None],
    ("comms-bound", "straggler"): STALL_ADVICE["straggler"],
    ("stalled", None): STALL_ADVICE[None],
    ("stalled", "collective"): STALL_ADVICE["collective"],
    ("comms-bound", "link"): COMMS_ADVICE["link"],
    ("comms-bound", "exposed"): COMMS_ADVICE["exposed"],
    ("comms-bound", "collectives"): COMMS_ADVICE["collectives"],
    ("throttled", "power"):
        "the power limit holds the clocks far below max: check `nvidia-smi -q -d POWER` for a lowered limit; "
        "numbers from this window are not representative",
    ("throttled", None):
        "clocks are lowered by heat or a hardware slowdown: check cooling, airflow and power delivery; numbers "
        "from this window are not representative",
    ("memory-capacity", None):
        "GPU memory is near full: smaller batch, activation checkpointing, lower-precision weights, free cached "
        "tensors, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
    ("idle", None):
        "the GPU did no work: if it should, check the code runs on cuda (tensor.device) and on this GPU "
        "(CUDA_VISIBLE_DEVICES)",
    ("idle", "startup"):
        "nothing to do: the command was starting (imports, CUDA initialisation)",
}


def advise(cls: str, sub: str | None) -> str:
    """The advice for a class and subclass (the class's own when the subclass has none)."""
    return ADVICE.get((cls, sub)) or ADVICE[(cls, None)]


def missing(ev: dict, facts: dict, static: dict) -> list[str]:
    """The evidence the verdict had to do without, and what that costs it."""
    out = []
    if not facts["gpm"]:
        why = ("not supported on this GPU (needs Hopper or newer)" if not static.get("gpm_supported")
               else "no GPM values in this window")
        out.append(f"GPM counters (SM activity, tensor/FP pipes, DRAM bandwidth): {why}; judged from NVML duty "
                   "cycles, clocks and power, so compute vs memory vs launch-bound is less certain")
        if ev.get("power_fraction") is None:
            out.append("board power or power limit (the no-GPM fallback uses it to tell real work from tiny kernels)")
    if facts.get("feeder") != "process" and (1 - ramp(ev.get("util_gpu_pct"), T.STARVED_UTIL_PCT)) >= 0.5 \
            and not facts.get("hinted_input"):
        out.append("CPU% of the command's process tree (no process watched): input starvation judged "
                   + ("from the busiest host core" if facts.get("feeder") == "host" else "without CPU evidence"))
    if ev.get("pcie_link_fraction") is None:
        out.append("PCIe throughput or link peak")
    if ev.get("max_sm_clock_mhz") is None or ev.get("sm_clock_mhz") is None:
        out.append("SM clock vs max (throttling check)")
    if ev.get("mem_used_fraction") is None:
        out.append("device memory use")
    return out


def notes(ev: dict, s: dict, facts: dict, main: str) -> list[str]:
    """What else is worth saying about a window besides its class."""
    out = []
    if facts.get("power_cap_normal") and main != "throttled":
        out.append(f"power cap reached in {_p(100 * ev['power_cap_sample_fraction'])} of busy samples "
                   f"({_w(ev.get('power_w'))}/{_w(ev.get('power_limit_w'))} W) with the SM clock at "
                   f"{_p(100 * (ev.get('sm_clock_ratio') or 0))} of max: normal under a heavy load")
    if facts.get("comms_overlapped") and main not in ("comms-bound", "stalled"):
        out.append(f"NVLink also busy (rx {si(ev.get('nvlink_rx_bps') or 0, 'B/s')} / tx "
                   f"{si(ev.get('nvlink_tx_bps') or 0, 'B/s')}, {_p(100 * (ev.get('nvlink_link_fraction') or 0))} of "
                   "the link), overlapped with the GPU's own work: communication hidden behind it")
    if facts.get("pcie_overlapped"):
        out.append(f"PCIe also busy ({_p(100 * ev['pcie_link_fraction'])} of the link), overlapped with GPU work")
    if main == "idle" and facts.get("cpu_busy", 0) >= 0.5 and facts.get("feeder") == "process":
        out.append(f"the process tree was busy on the CPU ({_p(ev['feeder_cpu_pct'])}) while the GPU did nothing: "
                   "if it was preparing GPU input, the GPU is starved")
    out += decided(ev, s, main)
    best = max(s[c] for c in BASE_CLASSES)
    if best < T.WEAK_SCORE and main in BASE_CLASSES:
        out.append("no class fits this window well; the verdict is a best guess")
    if ev["samples"] < T.MIN_SAMPLES:
        out.append(f"only {ev['samples']} samples in this window")
    return out


def decided(ev: dict, s: dict, main: str) -> list[str]:
    """Which evidence decided, as one note: for launch-bound, input-starved and host-bound (they share a GPU
    that is not busy) what told them apart; for memory- and compute-bound which unit is the busiest relative
    to its peak; empty for the other classes."""
    rivals = ("latency-bound", "input-starved", "host-bound")
    if main in ("memory-bound", "compute-bound") and ev.get("sm_active_pct") is not None:
        pipes = {PIPE_NAMES.get(k[:-4], k): ev.get(k) for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct")
                 if ev.get(k) is not None}
        best = max(pipes, key=pipes.get) if pipes else None
        if best is None or ev.get("dram_bw_pct") is None:
            return []
        if main == "memory-bound" and ev["dram_bw_pct"] >= pipes[best]:
            return [f"decided by: DRAM at {_p(ev['dram_bw_pct'])} of its peak is the busiest unit relative to its "
                    f"peak (the busiest pipe, {best}, at {_p(pipes[best])})"]
        if main == "compute-bound" and pipes[best] >= ev["dram_bw_pct"]:
            return [f"decided by: the {best} pipe at {_p(pipes[best])} is the busiest unit relative to its peak "
                    f"(DRAM at {_p(ev['dram_bw_pct'])})"]
        return []
    if main not in rivals:
        return []
    ratio, busy = ev.get("sm_active_per_util"), ev.get("busy_sample_pct")
    if main == "latency-bound" and ratio is not None and ratio < T.LAUNCH_SM_PER_UTIL[1]:
        return [f"decided by: the SMs were busy {_p(100 * ratio)} of the kernels' time (tiny kernels) with kernels "
                f"in {_p(busy)} of the samples{host_detail(ev)}: launch-bound, not input-starved "
                f"(input-starved scored {s.get('input-starved', 0):.2f})"]
    if main == "latency-bound" and ratio is not None:
        return [f"decided by: kernels ran {_p(ev.get('util_gpu_pct'))} of the time and kept the SMs busy "
                f"{_p(100 * ratio)} of it, yet no unit was near its peak: the kernels wait on latency, the GPU does "
                f"not wait for input (input-starved scored {s.get('input-starved', 0):.2f})"]
    if main == "input-starved":
        fill = f", the kernels filled the SMs ({_p(100 * ratio)} of their time)" if ratio is not None else ""
        return [f"decided by: the GPU idled between {ev.get('bursts', 0):.0f} bursts (busy in {_p(busy)} of the "
                f"samples){fill}{host_detail(ev)}: it waits for input, not on launches (launch-bound scored "
                f"{s.get('latency-bound', 0):.2f})"]
    if main == "host-bound":
        return [f"decided by: kernels active only {_p(ev.get('util_gpu_pct'))} while the process holding the GPU "
                f"kept {_p(ev.get('feeder_cpu_pct'))} CPU busy{host_detail(ev)}: the host is the bottleneck (a "
                "process that only waits would use little CPU)"]
    return []


def host_detail(ev: dict) -> str:
    """The host evidence beyond the tree's CPU%, for a "decided by" note: the feeder's busiest thread, its
    workers, and NVML's per-process SM samples (empty where not measured)."""
    parts = []
    if ev.get("feeder_thread_pct") is not None:
        parts.append(f"its busiest thread at {_p(ev['feeder_thread_pct'])} of a core")
    if (ev.get("feeder_children_cpu_pct") or 0) >= 1:
        parts.append(f"its child processes at {_p(ev['feeder_children_cpu_pct'])}")
    if ev.get("feeder_sm_pct") is not None:
        parts.append(f"its own kernels {_p(ev['feeder_sm_pct'])} of the SMs (NVML's per-process samples)")
    return " (" + ", ".join(parts) + ")" if parts else ""
