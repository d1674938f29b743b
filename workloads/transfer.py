"""transfer: host<->device copies over PCIe -- pageable vs pinned, small vs large, one stream vs three.

Part 1, bandwidth against size (4 kB .. 1 GB), each direction from two kinds of host memory:

  pageable   ordinary host memory (torch.empty): the driver cannot DMA from memory the OS may move, so it
             copies it through a pinned bounce buffer first -- a host memcpy on the way
  pinned     page-locked memory (pin_memory=True): the GPU's copy engine reads it directly

Small copies are latency-bound: ~10 us of fixed cost each, whatever their size. Large pinned copies
approach the link's peak (the run's PCIe generation and width, read through NVML; gen5 x16 is 63 GB/s
per direction). A host memcpy of the same sizes is measured too: the ceiling of the staging step.

Part 2, the seed's upload / compute (four sines) / download (seeds/001), on pinned buffers:

  serial     all on one stream: upload everything, compute, download everything
  seed       the seed's "three streams": one stream per stage, but it synchronizes after each stage, so the
             stages still run one after another -- nothing overlaps (the seed saw no gain, and this is why)
  chunked    the work split into chunks, each chunk's stages chained with events across three streams: while
             chunk i computes, chunk i+1 uploads and chunk i-1 downloads (H2D and D2H use separate copy engines)

Every span is recorded with CUDA events; the TUI draws them as a timeline, one row per stream.

On ``--device cpu`` there is no PCIe link: the run measures the host memcpy baseline alone (the staging
cost every pageable copy pays) and reports the GPU parts as skipped.

Run it: ``python workloads/transfer.py`` (or ``--device cpu --quick``), or ``gputop --run transfer``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.lessons.transfer import COPY_PHASES  # the copies its lesson judges
from gputop.measure.host import llc_bytes
from gputop.workload import Param, ParamError, device_param, main, require_torch
from gputop.workload.util import torch_device

NAME = "transfer"
DESCRIPTION = "PCIe copies: pageable vs pinned bandwidth from 4 kB to 1 GB; upload/compute/download on 1 vs 3 streams"
NEEDS = ["torch", "numpy"]
TIMEOUT = 300

STREAM_MODES = ["serial", "seed", "chunked"]
PARAMS = [
    device_param("cuda: copies and streams; cpu: host memcpy only"),
    Param("min_log2", "int", 12, lo=0, hi=34, help="smallest copy: 2^this bytes (4 kB)"),
    Param("max_log2", "int", 30, lo=0, hi=34, help="largest copy: 2^this bytes (1 GB)"),
    Param("step_log2", "int", 2, lo=1, hi=8, help="step of the size exponent"),
    Param("streams_mb", "int", 512, lo=1, hi=65536, help="MB of float32 data through upload/compute/download"),
    Param("chunks", "int", 8, lo=1, hi=1024, help="chunks of the chunked three-stream version"),
    Param("target_ms", "float", 40.0, lo=0.0, hi=10000.0, help="each timing repeats for about this long"),
    Param("max_reps", "int", 50, lo=3, hi=100000, help="and at most this many times (at least 3)"),
]
QUICK = {"max_log2": 26, "streams_mb": 128, "target_ms": 10.0, "max_reps": 20}
CPU = {"max_log2": 22, "target_ms": 2.0, "max_reps": 10}


def sizes(p: dict) -> list[int]:
    if p["min_log2"] > p["max_log2"]:
        raise ParamError(f"min_log2 ({p['min_log2']}) must not be above max_log2 ({p['max_log2']})")
    return [1 << k for k in range(p["min_log2"], p["max_log2"] + 1, p["step_log2"])]


def repeat_ms(fn, p) -> float:
    """Median of ``fn()`` (which returns ms): at least 3 calls, for about target_ms, at most max_reps."""
    out = []
    start = time.perf_counter()
    while len(out) < 3 or (time.perf_counter() - start < p["target_ms"] / 1e3 and len(out) < p["max_reps"]):
        out.append(fn())
    return statistics.median(out)


# -- part 1: bandwidth against size ---------------------------------------------------------------------

def host_memcpy(p, emit, nbytes: list[int]) -> list[dict]:
    """The staging step alone: one thread copying host memory to host memory (as the driver stages a
    pageable copy), the same sizes. NumPy's copyto is a plain memcpy."""
    import numpy as np

    emit.phase("host memcpy")
    src = np.ones(nbytes[-1], dtype=np.uint8)  # written, so every page is really there
    dst = np.zeros(nbytes[-1], dtype=np.uint8)
    out = []
    for b in nbytes:
        if emit.should_stop():
            break

        def once():
            t0 = time.perf_counter()
            np.copyto(dst[:b], src[:b])
            return 1e3 * (time.perf_counter() - t0)

        once()
        ms = repeat_ms(once, p)
        pt = {"phase": "host memcpy", "kind": "host memcpy", "bytes": b, "ms": ms, "gb_per_s": b / ms / 1e6}
        emit.point(pt)
        out.append(pt)
    return out


def copies(torch, p, emit, nbytes: list[int]) -> dict:
    """H2D and D2H from pageable and pinned host memory, timed with CUDA events around each copy."""
    top = nbytes[-1]
    dev = torch.empty(top, dtype=torch.uint8, device="cuda")
    host = {"pageable": torch.ones(top, dtype=torch.uint8),
            "pinned": torch.ones(top, dtype=torch.uint8).pin_memory()}
    a, b_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = {}
    for label in COPY_PHASES:
        direction, memory = label.split()
        emit.phase(label)
        for b in nbytes:
            if emit.should_stop():
                return best
            h, d = host[memory][:b], dev[:b]
            src, dst = (h, d) if direction == "h2d" else (d, h)

            def once():
                a.record()
                dst.copy_(src, non_blocking=True)  # from pageable memory it is synchronous all the same
                b_.record()
                b_.synchronize()
                return a.elapsed_time(b_)

            once()
            ms = repeat_ms(once, p)
            pt = {"phase": label, "kind": label, "direction": direction, "memory": memory, "bytes": b, "ms": ms,
                  "gb_per_s": b / ms / 1e6}
            emit.point(pt)
            best[label] = pt
    del dev, host
    return {k: v["gb_per_s"] for k, v in best.items()}


# -- part 2: upload / compute / download on one stream or three ----------------------------------------

def nested_sin_(torch, x):
    for _ in range(4):
        torch.sin(x, out=x)  # in place: the same four kernels as the seed, no extra buffers
    return x


def streams_part(torch, p, emit) -> dict:
    n = p["streams_mb"] * (1 << 20) // 4
    x_h = torch.rand(n).pin_memory()
    ref_h = torch.empty(n).pin_memory()
    y_h = torch.empty(n).pin_memory()
    x_d = torch.empty(n, device="cuda")
    main_s = torch.cuda.current_stream()
    up, comp, down = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    spans: list = []

    def span(stream, name, op, chunk, body):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        body()
        e.record(stream)
        spans.append((name, op, chunk, s, e))
        return e

    def serial(out):
        span(main_s, "stream 0", "upload", 0, lambda: x_d.copy_(x_h, non_blocking=True))
        span(main_s, "stream 0", "compute", 0, lambda: nested_sin_(torch, x_d))
        span(main_s, "stream 0", "download", 0, lambda: out.copy_(x_d, non_blocking=True))

    def seed(out):  # the seed's code: a stream per stage, and a synchronize after each stage
        with torch.cuda.stream(up):
            span(up, "upload", "upload", 0, lambda: x_d.copy_(x_h, non_blocking=True))
        up.synchronize()
        with torch.cuda.stream(comp):
            span(comp, "compute", "compute", 0, lambda: nested_sin_(torch, x_d))
        comp.synchronize()
        with torch.cuda.stream(down):
            span(down, "download", "download", 0, lambda: out.copy_(x_d, non_blocking=True))
        down.synchronize()

    def chunked(out):  # chunk i: upload -> (event) -> compute -> (event) -> download, streams overlap
        bounds = [(i * n // p["chunks"], (i + 1) * n // p["chunks"]) for i in range(p["chunks"])]
        for i, (lo, hi) in enumerate(bounds):
            with torch.cuda.stream(up):
                e_up = span(up, "upload", "upload", i, lambda: x_d[lo:hi].copy_(x_h[lo:hi], non_blocking=True))
            comp.wait_event(e_up)
            with torch.cuda.stream(comp):
                e_c = span(comp, "compute", "compute", i, lambda: nested_sin_(torch, x_d[lo:hi]))
            down.wait_event(e_c)
            with torch.cuda.stream(down):
                span(down, "download", "download", i, lambda: out[lo:hi].copy_(x_d[lo:hi], non_blocking=True))

    fns = {"serial": serial, "seed": seed, "chunked": chunked}
    out: dict = {"bytes": 4 * n, "chunks": p["chunks"], "modes": {}}
    for mode in STREAM_MODES:
        if emit.should_stop():
            break
        emit.phase(f"streams {mode}")
        target = ref_h if mode == "serial" else y_h
        walls = []
        for rep in range(4):  # the first is a warm-up (streams, kernels); the spans of the last are kept
            spans.clear()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start = torch.cuda.Event(enable_timing=True)
            start.record(main_s)
            fns[mode](target)
            torch.cuda.synchronize()
            if rep:
                walls.append(1e3 * (time.perf_counter() - t0))
        timeline = [{"stream": name, "op": op, "chunk": c, "start_ms": start.elapsed_time(s),
                     "end_ms": start.elapsed_time(e)} for name, op, c, s, e in spans]
        busy = {op: sum(t["end_ms"] - t["start_ms"] for t in timeline if t["op"] == op)
                for op in ("upload", "compute", "download")}
        pt = {"phase": f"streams {mode}", "kind": "streams", "mode": mode, "bytes": 4 * n, "total_ms": min(walls),
              "span_ms": max(t["end_ms"] for t in timeline), "upload_ms": busy["upload"],
              "compute_ms": busy["compute"], "download_ms": busy["download"],
              "chunks": p["chunks"] if mode == "chunked" else 1}
        if mode != "serial":
            pt["matches_serial"] = bool(torch.allclose(target, ref_h, rtol=1e-5, atol=1e-6))
            if not pt["matches_serial"]:
                emit.warning(f"streams {mode}: the result differs from the serial version's", code="wrong_result")
        if "serial" in out["modes"]:
            pt["speedup_vs_serial"] = out["modes"]["serial"]["total_ms"] / pt["total_ms"]
        emit.point(pt)
        out["modes"][mode] = {k: pt[k] for k in ("total_ms", "span_ms", "upload_ms", "compute_ms", "download_ms")}
        out["modes"][mode]["timeline"] = timeline
    return out


def run(p: dict, emit) -> None:
    torch = require_torch()
    nbytes = sizes(p)
    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    emit.started(NAME, p, info)
    if not emit.events:
        emit.on_point = print_row
    results: dict = {"sizes_bytes": nbytes, "llc_bytes": llc_bytes()}  # (a copy that fits it is not DRAM's speed)
    memcpy = host_memcpy(p, emit, nbytes)
    if memcpy:
        results["host_memcpy_gb_per_s"] = memcpy[-1]["gb_per_s"]
    if not cuda:
        emit.warning("no PCIe link on the CPU device: the host->device copies and the streams need a CUDA GPU; "
                     "measured the host memcpy baseline only", code="skipped")
        for label in COPY_PHASES + [f"streams {m}" for m in STREAM_MODES]:
            emit.point({"phase": label, "kind": label.split()[0] if "streams" in label else label, "skipped": True,
                        "reason": "needs a CUDA GPU"})
        emit.result(results)
        return
    if not emit.should_stop():
        results["largest_copy_gb_per_s"] = copies(torch, p, emit, nbytes)
    if not emit.should_stop():
        results["streams"] = streams_part(torch, p, emit)
    emit.result(results)


def print_row(pt: dict) -> None:
    """One line per measurement when the script runs on its own."""
    if pt.get("skipped"):
        print(f"  {pt['phase']}: skipped ({pt['reason']})", flush=True)
    elif pt["kind"] == "streams":
        gain = f"  {pt['speedup_vs_serial']:.2f}x serial" if pt.get("speedup_vs_serial") else ""
        print(f"  {pt['mode']:<8} {pt['total_ms']:8.2f} ms  (GPU time: upload {pt['upload_ms']:.2f}, compute "
              f"{pt['compute_ms']:.2f}, download {pt['download_ms']:.2f} ms){gain}", flush=True)
    else:
        print(f"  {pt['kind']:<13} {pt['bytes']:>11} B  {1e3 * pt['ms']:10.1f} us  {pt['gb_per_s']:7.2f} GB/s", flush=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
