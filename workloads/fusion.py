"""fusion: four elementwise kernels, or one? eager vs torch.compile vs torch.jit.script.

Two functions from the seeds, each made only of elementwise operations:

  nested_sin   the blog's sin(sin(sin(sin(x)))) (seeds/001): four kernels in eager PyTorch
  gelu         the deck's x * 0.5 * (1 + erf(x / 1.41421)) (seeds/003): five kernels in eager PyTorch

Each runs three ways:

  eager        one kernel per operation: every kernel reads its input from DRAM and writes its output back
  compile      torch.compile (Inductor): the operations fused into one generated kernel (Triton on a GPU,
               C++ on the CPU -- that needs a C++ compiler; without one this variant is reported as skipped)
  jit          torch.jit.script, the seed's way: TorchScript's fuser (on the GPU; it does not fuse on the CPU)

Per variant and size: time per call (CUDA events on a GPU), kernels per call (counted with
torch.profiler), bytes moved (eager: what each operation reads and writes, counted by a dispatch mode;
fused: one read of x and one write of the result), achieved bandwidth, and the speed-up over eager.
The first call is reported apart: it includes the compilation.

The lesson: an elementwise op does a few FLOPs per 8 bytes moved, so it is memory-bound; fusing four of
them moves a quarter of the bytes, so it runs up to ~4x faster -- and is usually still memory-bound (the
verdict compares the achieved bandwidth with the DRAM roof of the run's GPU; if the fused kernel stays
well below it, the four precise sines' math sets the pace instead).

Run it: ``python workloads/fusion.py`` (or ``--device cpu --quick``), or ``gputop --run fusion``.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.workload import Param, ParamError, device_param, main, require_torch
from gputop.workload.util import torch_device

NAME = "fusion"
DESCRIPTION = "kernel fusion: nested sine and gelu, eager vs torch.compile vs torch.jit.script"
NEEDS = ["torch"]
TIMEOUT = 300

FUNCTIONS = ["nested_sin", "gelu"]
VARIANTS = ["eager", "compile", "jit"]
PARAMS = [
    device_param("where the functions run"),
    Param("functions", "str", ",".join(FUNCTIONS), help=f"comma-separated subset of {', '.join(FUNCTIONS)}"),
    Param("variants", "str", ",".join(VARIANTS), help=f"comma-separated subset of {', '.join(VARIANTS)} "
                                                      "(eager always runs: it is the baseline)"),
    Param("sizes_log2", "int_list", [16, 20, 24, 28], lo=0, hi=31, help="tensor sizes 2^k elements (float32)"),
    Param("target_ms", "float", 50.0, lo=0.0, hi=10000.0, help="each timing repeats for about this long"),
    Param("max_reps", "int", 100, lo=3, hi=100000, help="and at most this many times (at least 3)"),
]
QUICK = {"sizes_log2": [16, 20, 24], "target_ms": 20.0, "max_reps": 30}
CPU = {"sizes_log2": [10, 14], "target_ms": 5.0, "max_reps": 10}


def parse_list(name: str, text: str, allowed: list[str]) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items or any(x not in allowed for x in items):
        raise ParamError(f"bad value for parameter '{name}': {text!r} (allowed: comma-separated {', '.join(allowed)})")
    return items


# -- the two functions ---------------------------------------------------------------------------------

def make_functions(torch) -> dict:
    """The two functions, written as the seeds write them. They are made here, with ``torch`` passed in,
    because gputop lists this script without importing torch (TorchScript reads ``torch`` from the closure)."""

    def nested_sin(x):
        x = torch.sin(x)
        x = torch.sin(x)
        x = torch.sin(x)
        x = torch.sin(x)
        return x

    def gelu(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))

    return {"nested_sin": nested_sin, "gelu": gelu}


def build(torch, fn, variant: str):
    """The callable of one variant; raises when this torch cannot build it (then it is skipped)."""
    if variant == "eager":
        return fn
    if variant == "compile":
        return torch.compile(fn, dynamic=True)  # one compilation for every size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # recent torch deprecates TorchScript; it still runs
        return torch.jit.script(fn)


# -- measuring ------------------------------------------------------------------------------------------

def bytes_per_call(torch, fn, x) -> int:
    """Bytes the eager operations of ``fn(x)`` read and write: each op's tensor inputs and outputs, once."""
    from torch.utils._python_dispatch import TorchDispatchMode

    total = [0]

    def size(t):
        return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            flat = list(args) + list((kwargs or {}).values()) + (list(out) if isinstance(out, (list, tuple)) else [out])
            total[0] += sum(size(a) for a in flat)
            return out

    with Count():
        fn(x)
    return total[0]


def kernels_per_call(torch, f, x, cuda: bool) -> int:
    """Kernels one call launches, from torch.profiler: GPU kernels on a GPU; on the CPU, the compute
    operators run (aten ops that are not allocation or dtype conversion) plus each compiled graph called."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        f(x)
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    if cuda:
        return sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                   and not any(w in e.name.lower() for w in ("memcpy", "memset")))
    skip = ("aten::empty", "aten::empty_strided", "aten::to", "aten::_to_copy", "aten::copy_")
    return (sum(1 for e in events if e.name.startswith("aten::") and e.name not in skip)
            + sum(1 for e in events if "CompiledFxGraph" in e.name))


def time_call(torch, f, x, cuda: bool, p) -> float:
    """Median ms per call: CUDA events on a GPU, perf_counter on the CPU."""
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < p["target_ms"] / 1e3 and len(times) < p["max_reps"]):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            f(x)
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def run(p: dict, emit) -> None:
    torch = require_torch()
    fns = parse_list("functions", p["functions"], FUNCTIONS)
    variants = ["eager"] + [v for v in parse_list("variants", p["variants"], VARIANTS) if v != "eager"]
    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    emit.started(NAME, p, info)
    if not emit.events:
        emit.on_point = print_row
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    results: dict = {"speedup_vs_eager": {}, "kernels_per_call": {}, "first_call_s": {},
                     "kernel_count_method": "torch.profiler: CUDA kernels" if cuda else
                     "torch.profiler: aten compute ops + compiled graphs called (the CPU has no kernels)"}
    sizes = sorted(set(p["sizes_log2"]))
    g = torch.Generator(device=dev).manual_seed(0)
    total, done = len(fns) * len(variants), 0
    for name in fns:
        fn = make_functions(torch)[name]
        eager_ms, eager_kernels = {}, None
        for variant in variants:
            if emit.should_stop():
                break
            label = f"{name} {variant}"
            emit.progress(done, total, label)
            done += 1
            emit.phase(label)  # before the first call: its compilation is part of this phase
            try:
                f = build(torch, fn, variant)
                x0 = torch.rand(1 << sizes[0], device=dev, generator=g)
                t0 = time.perf_counter()
                f(x0)  # the first call: compilation (compile), profiling runs (jit), kernel load
                sync()
                first_s = time.perf_counter() - t0
                for _ in range(2):  # TorchScript fuses after two profiling runs
                    f(x0)
            except Exception as exc:  # no C++ compiler, no Triton, a TorchScript gap: say so, keep the rest
                reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
                emit.warning(f"{label} skipped: {reason}", code="skipped")
                emit.point({"phase": label, "fn": name, "variant": variant, "skipped": True, "reason": reason})
                continue
            results["first_call_s"][label] = first_s
            pt, kernels = {}, None
            for k in sizes:
                if emit.should_stop():
                    break
                n = 1 << k
                x = torch.rand(n, device=dev, generator=g)
                for _ in range(3 if variant == "jit" else 1):  # TorchScript re-profiles a new shape
                    f(x)
                sync()
                if kernels is None:  # counted once per variant (at the smallest size): it does not change
                    kernels = kernels_per_call(torch, f, x, cuda)
                if variant == "eager":
                    eager_kernels = kernels
                ms = time_call(torch, f, x, cuda, p)
                fused_bytes = 2 * n * x.element_size()  # read x once, write the result once
                moved = (bytes_per_call(torch, fn, x) if kernels == eager_kernels else
                         fused_bytes if kernels == 1 else None)
                pt = {"phase": label, "fn": name, "variant": variant, "log2": k, "n": n, "ms": ms,
                      "kernels_per_call": kernels, "bytes_moved": moved, "min_bytes": fused_bytes,
                      "gb_per_s": moved / ms / 1e6 if moved and ms > 0 else None, "first_call_s": first_s}
                if variant == "eager":
                    eager_ms[k] = ms
                elif eager_ms.get(k):
                    pt["speedup_vs_eager"] = eager_ms[k] / ms
                emit.point(pt)
                del x
            results["kernels_per_call"][label] = kernels
            if variant != "eager" and pt.get("speedup_vs_eager"):
                results["speedup_vs_eager"][label] = pt["speedup_vs_eager"]  # at the largest size
    emit.progress(total, total, "done")
    emit.result(results)


def print_row(pt: dict) -> None:
    """One line per measurement when the script runs on its own."""
    if pt.get("skipped"):
        print(f"  {pt['phase']}: skipped ({pt['reason']})", flush=True)
        return
    bw = f"{pt['gb_per_s']:8.1f} GB/s" if pt.get("gb_per_s") else "       ? GB/s"
    gain = f"  {pt['speedup_vs_eager']:.2f}x eager" if pt.get("speedup_vs_eager") else ""
    print(f"  {pt['phase']:<20} n=2^{pt['log2']:<3} {pt['ms']:9.4f} ms  {pt['kernels_per_call']} kernel(s)  {bw}{gain}",
          flush=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
