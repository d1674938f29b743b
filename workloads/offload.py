"""offload: when does the GPU beat the CPU? matmul and a nested sine, with and without the copies.

The seed blog's experiment (seeds/001), size by size from 2^0 up:

  cpu           the op on host tensors (torch on the CPU's cores)
  gpu+copies    host tensors in, host tensor out: x.cuda(), the op, a copy back -- what a program that keeps
                its data on the host pays; the copies go from and to pageable memory, as in the seed, and
                the result goes into a host buffer allocated once (host_out.copy_(out))
  gpu           the data already on the GPU: the op alone, timed with CUDA events
  gpu naive     the same call timed with time.perf_counter() and no synchronize: the GPU is asynchronous,
                so this measures only the submission (the launch), and it is flat whatever the size --
                the seed's pitfall, kept as a curve of its own so it can be seen to be wrong

Each gpu+copies call is split by CUDA events into upload / compute / download (the seed 004 nvprof
breakdown, where [CUDA memcpy HtoD] was 32% of GPU time): the copy share of the GPU time. The first
call is reported apart: the CUDA context (the first CUDA call of the process), and the first call of
each op (kernel load, cuBLAS set-up), against the same call warm.

The seed's out.cpu() allocates fresh host memory on every call, and the download then also pays a page
fault on the first touch of every page: the H200 run of 2026-11-23 took 174 ms (1.5 GB/s) to bring back
256 MB that way, where the transfer workload's pageable download into a reused buffer ran at 15.5 GB/s.
That cost is real but it is the allocator's, not the link's: it is measured apart (gpu_copies_fresh_ms,
d2h_fresh_ms), and the gpu+copies curve does what a careful program does. (The CPU curve's torch.sin
allocates its outputs too, as the seed's code does.)

The crossover of each curve is the smallest size from which the GPU stays faster than the CPU. Small
sizes lose: a launch, a synchronize and two copies cost ~10-50 us however little work there is
(latency-bound). The matmul does n^3 work on n^2 data, so the GPU wins from a modest n; the nested
sine does 4 sines per element moved, so with the copies the link can eat the gain (transfer-bound).

Run it: ``python workloads/offload.py`` (or ``--device cpu --quick``: only the CPU side), or
``gputop --run offload``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.lessons.offload import OPS, crossovers  # the ops its lesson judges, and where the GPU wins
from gputop.workload import Param, ParamError, device_param, main, require_torch
from gputop.workload.util import torch_device

NAME = "offload"
DESCRIPTION = "CPU vs GPU crossover: matmul and nested sine, with and without copies; naive vs synchronised timing"
NEEDS = ["torch"]
TIMEOUT = 300

PARAMS = [
    device_param("cuda: CPU and GPU curves; cpu: the CPU curve only"),
    Param("ops", "str", ",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}"),
    Param("matmul_max_log2", "int", 12, lo=0, hi=15, help="matmul sizes n x n for n = 2^0 .. 2^this"),
    Param("sin_max_log2", "int", 26, lo=0, hi=31, help="nested-sine sizes 2^0 .. 2^this elements"),
    Param("step_log2", "int", 1, lo=1, hi=8, help="step of the size exponent (matmul; the sine uses twice this)"),
    Param("target_ms", "float", 40.0, lo=0.0, hi=10000.0, help="each timing repeats for about this long"),
    Param("max_reps", "int", 50, lo=3, hi=100000, help="and at most this many times (at least 3)"),
]
QUICK = {"matmul_max_log2": 10, "sin_max_log2": 22, "target_ms": 15.0, "max_reps": 20}
CPU = {"matmul_max_log2": 7, "sin_max_log2": 14, "step_log2": 2, "target_ms": 2.0, "max_reps": 5}


def parse_ops(text: str) -> list[str]:
    ops = [o.strip() for o in text.split(",") if o.strip()]
    if not ops or any(o not in OPS for o in ops):
        raise ParamError(f"bad value for parameter 'ops': {text!r} (allowed: comma-separated {', '.join(OPS)})")
    return ops


# -- the two ops of the seed --------------------------------------------------------------------------

def nested_sin(x):
    """The seed's nested sine: four elementwise kernels, one read and one write of x each."""
    import torch

    x = torch.sin(x)
    x = torch.sin(x)
    x = torch.sin(x)
    x = torch.sin(x)
    return x


def make_inputs(torch, op: str, k: int):
    """Host tensors of size 2^k: two n x n matrices, or one vector of n elements."""
    n = 1 << k
    g = torch.Generator().manual_seed(k)
    if op == "matmul":
        return n, (torch.rand(n, n, generator=g), torch.rand(n, n, generator=g))
    return n, (torch.rand(n, generator=g),)


def apply(torch, op: str, args):
    return torch.matmul(*args) if op == "matmul" else nested_sin(args[0])


# -- timing -------------------------------------------------------------------------------------------

def repeat(fn, target_s: float, max_reps: int) -> list:
    """Call ``fn`` (which returns its own measurement) at least 3 times, until ``target_s`` or max_reps."""
    out = []
    start = time.perf_counter()
    while len(out) < 3 or (time.perf_counter() - start < target_s and len(out) < max_reps):
        out.append(fn())
    return out


def time_cpu(torch, op, args, p) -> float:
    apply(torch, op, args)  # warm-up (the thread pool, the allocator)

    def once():
        t0 = time.perf_counter()
        apply(torch, op, args)
        return time.perf_counter() - t0

    return 1e3 * statistics.median(repeat(once, p["target_ms"] / 1e3, p["max_reps"]))


def time_gpu(torch, op, host_args, p) -> dict:
    """gpu+copies (host wall clock, split by events), the same with x.cpu() into fresh memory, gpu (events),
    gpu naive (wall clock, no sync)."""
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    dev_args = [a.to(dev) for a in host_args]
    host_out = torch.zeros(apply(torch, op, dev_args).shape)  # allocated (and touched) once, like the inputs

    def with_copies(fresh=False):  # the seed's x.cuda() ... .cpu(): pageable memory, so both copies are synchronous
        sync()
        t0 = time.perf_counter()
        ev[0].record()
        args = [a.to(dev) for a in host_args]
        ev[1].record()
        out = apply(torch, op, args)
        ev[2].record()
        if fresh:
            out.cpu()  # new host memory on every call: the copy also pays a page fault on each page's first touch
        else:
            host_out.copy_(out)  # into the host buffer made once: only the copy
        ev[3].record()
        wall = time.perf_counter() - t0
        ev[3].synchronize()
        return wall, ev[0].elapsed_time(ev[1]), ev[1].elapsed_time(ev[2]), ev[2].elapsed_time(ev[3])

    def on_gpu():
        ev[0].record()
        apply(torch, op, dev_args)
        ev[1].record()
        ev[1].synchronize()
        return ev[0].elapsed_time(ev[1])

    def naive():  # the pitfall: the clock stops when the call returns, not when the GPU is done
        sync()
        t0 = time.perf_counter()
        apply(torch, op, dev_args)
        t = time.perf_counter() - t0
        sync()  # outside the timing, so that the queue does not fill up
        return t

    target, reps = p["target_ms"] / 1e3, p["max_reps"]
    with_copies()  # warm-up
    copies = repeat(with_copies, target, reps)
    fresh = repeat(lambda: with_copies(fresh=True), target, reps)
    gpu = repeat(on_gpu, target, reps)
    naive_s = repeat(naive, target, reps)
    h2d, comp, d2h = (statistics.median(c[i] for c in copies) for i in (1, 2, 3))
    return {"gpu_copies_ms": 1e3 * statistics.median(c[0] for c in copies), "gpu_ms": statistics.median(gpu),
            "gpu_naive_ms": 1e3 * statistics.median(naive_s), "h2d_ms": h2d, "compute_ms": comp, "d2h_ms": d2h,
            "copy_share": (h2d + d2h) / (h2d + comp + d2h) if h2d + comp + d2h > 0 else None,
            "gpu_copies_fresh_ms": 1e3 * statistics.median(c[0] for c in fresh),
            "d2h_fresh_ms": statistics.median(c[3] for c in fresh)}


def cuda_context_ms(torch) -> float | None:
    """The first CUDA call of the process: it creates the CUDA context (and loads the first kernel)."""
    if not torch.cuda.is_available():
        return None
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0)


def first_calls(torch, ops, ctx_ms: float, emit) -> dict:
    """The CUDA context (measured before anything else touched CUDA), then each op's first call against
    the same call warm."""
    emit.phase("first call")
    emit.point({"phase": "first call", "what": "cuda context", "first_ms": ctx_ms})
    out = {"context_ms": ctx_ms}
    for op in ops:
        n, args = make_inputs(torch, op, 6)
        dev_args = [a.cuda() for a in args]
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            apply(torch, op, dev_args)
            torch.cuda.synchronize()
            times.append(1e3 * (time.perf_counter() - t0))
        pt = {"phase": "first call", "what": f"{op} first call", "op": op, "n": n, "first_ms": times[0],
              "warm_ms": min(times[1:])}
        emit.point(pt)
        out[op] = {"first_ms": times[0], "warm_ms": pt["warm_ms"]}
    return out


def run(p: dict, emit) -> None:
    torch = require_torch()
    ops = parse_ops(p["ops"])
    ctx_ms = cuda_context_ms(torch) if p["device"] == "cuda" else None
    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    emit.started(NAME, p, info)
    if not emit.events:
        emit.on_point = print_row
    results: dict = {"ops": ops, "matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                     "note": "gpu naive: perf_counter around the call with no synchronize -- only the launch"}
    if cuda:
        results["first_call"] = first_calls(torch, ops, ctx_ms, emit)
    else:
        emit.warning("the GPU curves need a CUDA device: only the CPU curve is measured", code="skipped")
    sizes = {"matmul": range(0, p["matmul_max_log2"] + 1, p["step_log2"]),
             "sin": range(0, p["sin_max_log2"] + 1, 2 * p["step_log2"])}
    total = sum(len(sizes[op]) for op in ops)
    done = 0
    measured: list[dict] = []
    for op in ops:
        emit.phase(op)
        for k in sizes[op]:
            if emit.should_stop():
                break
            emit.progress(done, total, f"{op} 2^{k}")
            done += 1
            n, args = make_inputs(torch, op, k)
            pt = {"phase": op, "op": op, "log2": k, "n": n,
                  "flops": 2 * n ** 3 if op == "matmul" else 4 * n,
                  "bytes_copied": 4 * (3 * n * n if op == "matmul" else 2 * n),
                  "cpu_ms": time_cpu(torch, op, args, p)}
            if cuda:
                pt.update(time_gpu(torch, op, args, p))
            measured.append(pt)
            emit.point(pt)
    emit.progress(done, total, "done")
    if cuda:
        results["crossover_n"] = {op: crossovers([q for q in measured if q["op"] == op]) for op in ops}
    emit.result(results)


def print_row(pt: dict) -> None:
    """One line per measurement when the script runs on its own."""
    if "cpu_ms" not in pt:
        warm = f" (warm: {pt['warm_ms']:.3f} ms)" if "warm_ms" in pt else ""
        print(f"  {pt['what']}: {pt['first_ms']:.2f} ms{warm}", flush=True)
        return
    row = f"  {pt['op']:<6} n={pt['n']:<10} cpu {pt['cpu_ms']:10.3f} ms"
    if "gpu_ms" in pt:
        row += (f"  gpu+copies {pt['gpu_copies_ms']:9.3f} ms (copies {100 * (pt['copy_share'] or 0):3.0f}%)"
                f"  gpu {pt['gpu_ms']:8.3f} ms  naive {pt['gpu_naive_ms']:6.3f} ms"
                f"  (fresh x.cpu(): download {pt['d2h_fresh_ms']:.3f} ms vs {pt['d2h_ms']:.3f} ms)")
    print(row, flush=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
