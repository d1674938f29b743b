"""``gputop --doctor``'s load on one GPU, run in a child process (one per GPU, all at once): the figures a healthy
card of its model should reach, measured with the roofline's own kernels, and a sustained load under which the
parent reads the clocks, the clock-event reasons, power and the PCIe link.

``python -m gputop.measure.health_load [--events] [--quick] [--sustained S] [--cpus 0-15,64-79] [--turn]`` on the
GPU the environment makes its ``cuda:0``. In order (each a phase event, ``t`` on the parent's clock):

1. ``dram``: the roofline's DRAM roof (:func:`gputop.measure.ceilings.dram_roof`: a float4 read stream and copy);
2. ``fp32``: its FP32 roof (8 independent FMA chains a thread, :func:`~gputop.measure.ceilings.fma_roof`);
3. ``bf16``: its bf16 tensor roof (torch.mm over the roofline's shapes, each a short burst from a cool start;
   ``--quick`` takes its 3 shapes twice: on 2 H100s at their power cap, 36 quick runs of one burst a shape read
   797-802 TFLOP/s in 4 runs and 810-833 in the rest, each low run one whose best shape's burst had landed low
   (another shape best), which a second burst of each shape catches);
4. ``pcie-wait`` (with ``--turn``): waits for a line on stdin. The parent lets one GPU at a time copy to and from
   the host: copies of several GPUs at once share the host's memory and its PCIe switches, and each GPU's figure
   would be the node's, not its own;
5. ``pcie``: 1 GiB pinned host->device and device->host copies (the transfer lesson's way: CUDA events around each
   copy), on the CPUs of the GPU's NUMA node (``--cpus``, from NVML), long enough for the parent to read the link's
   generation and width under load. The figure is the fastest copy (what the link and the host's memory can do:
   a narrower or slower link, or replays, slow every copy), the median beside it: on a lent 4-H100 node
   (2026-11-27, 9 runs of 2 GPUs) the medians of 6 of 18 fell 5-15% below 55 GB/s, each time with copies 20-30%
   apart (another tenant's traffic on the host), while every GPU's best copies held 55 GB/s;
6. ``sustained``: ``S`` seconds of 8192^3 bf16 matmuls back to back (timed 10 at a time): the figure is the median
   of the last half, after the clocks settled at the power cap or below it.

Each phase's figures are a ``result`` event; a failure is an ``error`` event (kind ``missing_dependency``, ``oom``,
``cuda`` or ``exception``) and a non-zero exit. SIGINT stops it between measurements (what it has is kept).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from gputop.workload.emit import Emitter

FULL = {"runs": 10, "tensor_shapes": "all", "copies": 25, "sustained_s": 30.0}
# --quick copies as many times as the full check: the fastest of 10 spread 3.3% over 10 quick runs of one quiet
# H100 (2026-11-27, 52.8-54.6 GB/s host to device), the fastest of 25 1.5% over 9 full runs; 15 more 1 GiB copies
# each way cost ~0.6 s a GPU
QUICK = {"runs": 10, "tensor_shapes": "quick", "copies": 25, "sustained_s": 8.0}
COPY_BYTES = 1 << 30
SUSTAINED_SHAPE = 8192
SUSTAINED_CHUNK = 10  # matmuls timed together


class NoCudaTorch(RuntimeError):
    """torch is installed but without CUDA: what is missing is a package, not the GPU's health."""


def cpu_list(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8]."""
    out = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def device_info(cp) -> dict:
    """What the roofline's kernels need of the device (cuda:0 here), and its name and bus id."""
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props.get("name", b"")
    return {"name": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
            "pci_bus_id": cp.cuda.runtime.deviceGetPCIBusId(0), "sm_count": props.get("multiProcessorCount"),
            "max_threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
            "max_blocks_per_sm": props.get("maxBlocksPerMultiProcessor"),
            "regs_per_sm": props.get("regsPerMultiprocessor"), "l2_bytes": props.get("l2CacheSize")}


def host_copies(torch, copies: int, emit) -> dict:
    """1 GiB pinned host->device and device->host: each copy between two CUDA events; of ``copies``, the fastest
    (the figure: module doc) and the median."""
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = {}
    for name, dst, src in (("h2d", dev, host), ("d2h", host, dev)):
        dst.copy_(src, non_blocking=True)  # warm-up
        torch.cuda.synchronize()
        ms = []
        for _ in range(copies):
            if emit.should_stop():
                break
            a.record()
            dst.copy_(src, non_blocking=True)
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b))
        if ms:
            out[f"{name}_bytes_per_s"] = COPY_BYTES / (min(ms) / 1e3)
            out[f"{name}_median_bytes_per_s"] = COPY_BYTES / (statistics.median(ms) / 1e3)
            out[f"{name}_rms_pct"] = 100 * statistics.pstdev(ms) / statistics.mean(ms)
    del host, dev
    torch.cuda.empty_cache()
    return out


def sustained(torch, seconds: float, emit) -> dict:
    """8192^3 bf16 matmuls back to back for ``seconds``: FLOP/s of each 10, the median of the last half."""
    from gputop.measure.timing import time_torch

    n = SUSTAINED_SHAPE
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    z = torch.empty_like(x)
    flop = 2.0 * n ** 3
    series = []  # (t, FLOP/s)
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end and not emit.should_stop():
        ms = time_torch(torch, lambda: torch.mm(x, y, out=z), 0, SUSTAINED_CHUNK)
        series.append((time.monotonic(), flop / (statistics.median(ms) / 1e3)))
    if not bool(torch.isfinite(z[:8, :8]).all()):
        raise RuntimeError("the sustained bf16 matmul produced non-finite values")
    del x, y, z
    torch.cuda.empty_cache()
    if not series:
        return {}
    half = [v for t, v in series if t >= series[0][0] + (series[-1][0] - series[0][0]) / 2] or [series[-1][1]]
    return {"bf16_sustained_flops": statistics.median(half), "bf16_first_flops": series[0][1],
            "sustained_s": round(series[-1][0] - series[0][0], 2), "sustained_chunks": len(series),
            "sustained_rms_pct": 100 * statistics.pstdev(half) / statistics.mean(half)}


def measure(p: dict, emit, turn: bool) -> None:
    """Every phase in order (module doc); raises on a failure (the caller turns it into an error event)."""
    from gputop.measure import ceilings
    from gputop.measure.probe import ClockProbe

    ceilings.prefetch_torch()
    import cupy as cp

    info = device_info(cp)
    emit.started("doctor", {k: v for k, v in p.items()}, {"kind": "cuda", **info})
    K = ceilings.kernels(cp)
    torch = ceilings.torch_module(emit)
    if torch is None:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise ModuleNotFoundError("torch is needed for the tensor and copy checks", name="torch")
        raise NoCudaTorch("this torch sees no CUDA device (a CPU-only build?): install a CUDA build of torch")
    probe = ClockProbe()  # the parent samples NVML; the child reads none
    shapes = ceilings.TENSOR_SHAPES_QUICK * 2 if p["tensor_shapes"] == "quick" else ceilings.TENSOR_SHAPES  # in order
    steps = (("dram", lambda: {"dram": ceilings.dram_roof(cp, K, info, probe, p["runs"], emit)}),
             ("fp32", lambda: {"fp32": ceilings.fma_roof(cp, K, info, probe, p["runs"], "fp32")}),
             ("bf16", lambda: ceilings.tensor_roofs(torch, probe, shapes, 0, emit, dtypes=("bf16",))))
    for name, fn in steps:
        if emit.should_stop():
            return
        emit.phase(name)
        got = fn()
        emit.result({name: _slim(got.get(name) or got.get("bf16") or {})})
        cp.get_default_memory_pool().free_all_blocks()
    if turn:
        emit.phase("pcie-wait")
        if not sys.stdin.readline():  # the parent closed the pipe: it is gone or stopping
            return
    if emit.should_stop():
        return
    emit.phase("pcie")
    emit.result({"pcie": host_copies(torch, p["copies"], emit)})
    if emit.should_stop():
        return
    emit.phase("sustained")
    emit.result({"sustained": sustained(torch, p["sustained_s"], emit)})


def _slim(d: dict) -> dict:
    """A roof's dict without its long lists: the figure, its timing spread, what gave it."""
    keep = ("bytes_per_s", "flops_per_s", "median_ms", "rms_pct", "runs", "kernel", "grid", "shape", "how")
    return {k: d[k] for k in keep if k in d}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gputop.measure.health_load", description=__doc__.splitlines()[0])
    ap.add_argument("--events", action="store_true", help="JSON-lines events on stdout (for gputop)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sustained", type=float, metavar="S", help="seconds of the sustained load")
    ap.add_argument("--cpus", metavar="LIST", help="run on these CPUs (the GPU's NUMA node)")
    ap.add_argument("--turn", action="store_true", help="wait for a line on stdin before the host copies")
    a = ap.parse_args(argv)
    p = dict(QUICK if a.quick else FULL)
    if a.sustained is not None:
        p["sustained_s"] = a.sustained
    emit = Emitter(events=a.events)
    if a.cpus:
        try:
            os.sched_setaffinity(0, cpu_list(a.cpus))
        except (OSError, ValueError) as exc:
            emit.warning(f"could not pin to CPUs {a.cpus}: {exc}", code="affinity")
    code = 0
    try:
        measure(p, emit, a.turn)
    except KeyboardInterrupt:
        emit.status = "interrupted"
        code = 130
    except ModuleNotFoundError as exc:
        emit.error(f"{exc.name or exc} is not installed: pip install 'gputop[torch,cuda12]'", kind="missing_dependency")
        code = 4
    except NoCudaTorch as exc:
        emit.error(str(exc), kind="missing_dependency")
        code = 4
    except Exception as exc:  # a CUDA error, out of memory, a kernel that did not compile: the GPU's finding
        text = f"{type(exc).__name__}: {exc}"
        kind = "oom" if "out of memory" in text.lower() else "cuda" if "cuda" in text.lower() else "exception"
        emit.error(text[:400], kind=kind)
        code = 1
    emit.done()
    return code


if __name__ == "__main__":
    sys.exit(main())
