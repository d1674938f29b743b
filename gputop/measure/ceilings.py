"""The roofs of a roofline, measured on this GPU in the same run as the points drawn against them.

* DRAM: a read-only float4 stream over 1 GiB (20x an H100's L2), the fastest of a few grid sizes, and a
  float4 copy beside it (read + write bytes). The roof is the faster of the two. Why the read stream:
  HBM turns no bus around when it only reads, so a read stream gets ~2-3% more out of it than a copy;
  eight independent 16-byte loads per thread keep enough bytes in flight (Little's law) to cover the
  latency. On an H100 (2026-11-23) every other variant tried (1-16 loads in flight, L2::256B prefetch,
  L1::no_allocate, contiguous runs per block, 2-4 GiB buffers) landed within 0.3% of it: kept out.
  torch's own streaming ops (``dst.copy_(src)``, ``x.sum()``) are measured beside it as peers.
* L2: the same loads (``ld.global.cg``: L2 only) over a working set of a quarter of L2 or less.
* FP32 / FP64: 8 independent FMA chains per thread (kernels/ceilings.cu).
* Tensor cores: torch matmuls (cuBLAS) of several shapes per dtype, each a short burst from a cool start
  (~40 ms, before the power controller pulls the clock down); the roof is the best shape's median.
  The SM clock, board power and clock-event reasons are sampled during each burst (gputop's NVML
  layer), and one sustained 8192^3 bf16 run shows what the power cap does to it.
"""

from __future__ import annotations

import statistics
import threading
import time

from gputop import paths
from gputop.measure.probe import ClockProbe
from gputop.measure.timing import time_launches, time_torch, timing_stats

KERNEL_FILE = "ceilings.cu"
KERNELS = ["stream_read", "stream_copy", "l2_read", "fma_peak", "fma_peak_f64"]
DRAM_BUFFER = 1 << 30  # bytes per buffer
BLOCK = 256
READ_BLOCKS_PER_SM = (64, 128, 256)  # grid sizes tried for the read stream (more blocks: a shorter tail)
L2_FRACTION = 4  # the L2 working set: at most a quarter of L2, a power of two
# (M, N, K) per matmul: 8192^3 (the usual benchmark), shapes whose tile count fills whole waves of an
# H100's 132 SMs (8448 = 66 x 128), smaller and larger ones. The best is the roof. On an H100
# (2026-11-23) 8192x8448x8192 won in bf16 and fp16; 4224x8192x16384, 12288^3 and 16384^3 never did.
TENSOR_SHAPES = [(8192, 8192, 8192), (8192, 8448, 8192), (8448, 8192, 8192), (6144, 6144, 6144),
                 (10240, 10240, 10240), (16896, 8192, 8192)]
TENSOR_SHAPES_QUICK = TENSOR_SHAPES[:3]
TENSOR_BURST_S = 0.04  # timed matmul per shape
TENSOR_REST_S = 0.1  # idle before each shape, so that each burst starts below the power cap

_cache: dict = {}  # compiled kernels, the torch import


def kernels(cp) -> dict:
    """kernels/ceilings.cu compiled (once per process; CuPy also caches the binary on disk)."""
    if "kernels" not in _cache:
        t0 = time.perf_counter()
        module = cp.RawModule(code=(paths.kernels_dir() / KERNEL_FILE).read_text())
        _cache["kernels"] = {name: module.get_function(name) for name in KERNELS}
        _cache["compile_s"] = time.perf_counter() - t0
    return _cache["kernels"]


def prefetch_torch() -> None:
    """Start importing torch on a thread (it takes seconds), to overlap with CuPy's start and the kernel
    compilation (NVRTC runs without the GIL); :func:`wait_torch` before any timing."""
    if "torch_thread" not in _cache:
        def imp():
            try:
                import torch  # noqa: F401
            except Exception as exc:  # reported by torch_module()
                _cache["torch_error"] = exc
        _cache["torch_thread"] = threading.Thread(target=imp, daemon=True, name="torch-import")
        _cache["torch_thread"].start()


def wait_torch() -> None:
    """Wait for :func:`prefetch_torch`'s import to finish. Call it before timing anything: while a thread
    imports torch (loading its CUDA libraries holds the GIL for long stretches), the host can stall
    between a start event and its launch, and a timed kernel looks slower than it is."""
    if "torch_thread" in _cache:
        _cache["torch_thread"].join()


def torch_module(emit):
    """torch with a usable CUDA device, or None (and one log line saying why)."""
    prefetch_torch()
    wait_torch()
    try:
        import torch
    except Exception as exc:
        emit.log(f"torch is not importable ({type(exc).__name__}: {exc}): no tensor roof, no torch peers "
                 "(pip install 'gputop[torch]')")
        return None
    if not torch.cuda.is_available():
        emit.log(f"torch {torch.__version__} sees no CUDA device (a CPU-only build?): no tensor roof")
        return None
    return torch


def blocks_per_sm(func, block: int, info: dict) -> int:
    """Resident blocks per SM for ``func`` (threads, registers and the block limit)."""
    limit = (info.get("max_threads_per_sm") or 2048) // block
    if info.get("max_blocks_per_sm"):
        limit = min(limit, info["max_blocks_per_sm"])
    try:
        regs = max(1, int(func.num_regs))
        per_warp = -(-regs * 32 // 256) * 256  # registers are allocated per warp in units of 256
        limit = min(limit, (info.get("regs_per_sm") or 65536) // (per_warp * (block // 32)))
    except Exception:
        pass
    return max(1, limit)


def _summary(times: list[float], probe: ClockProbe) -> dict:
    return {**timing_stats(times), **probe.summary()}


def dram_roof(cp, K: dict, info: dict, probe: ClockProbe, runs: int, emit) -> dict:
    """The read stream at a few grid sizes and the copy; the roof is the fastest (bytes per second)."""
    import numpy as np

    free, _total = cp.cuda.runtime.memGetInfo()
    l2 = info.get("l2_bytes") or (50 << 20)
    side = DRAM_BUFFER
    while side > (16 << 20) and 2 * side > 0.6 * free:
        side //= 2
    if side < 8 * l2:
        emit.warning(f"DRAM roof: only {side >> 20} MiB per buffer free ({side / l2:.1f}x L2): the roof may "
                     "include L2 hits", code="small_buffer")
    n4 = side // 16
    src = cp.full(n4 * 4, 1.0, dtype=cp.float32)
    dst = cp.zeros(n4 * 4, dtype=cp.float32)
    sm = info.get("sm_count") or 1
    sink = cp.zeros(sm * max(READ_BLOCKS_PER_SM) * BLOCK, dtype=cp.float32)
    never = np.float32(-1.0)  # a sum of 1.0s is never negative
    tried = []
    for per_sm in READ_BLOCKS_PER_SM:
        g = sm * per_sm
        launch = lambda g=g: K["stream_read"]((g,), (BLOCK,), (src, sink, np.int64(n4), never))  # noqa: E731
        with probe:
            times = time_launches(cp, launch, 2, runs)
        tried.append({"kernel": "stream_read", "grid": g, "bytes_per_run": side, **_summary(times, probe)})
    for g in (-(-n4 // BLOCK), sm * blocks_per_sm(K["stream_copy"], BLOCK, info) * 4):
        launch = lambda g=g: K["stream_copy"]((g,), (BLOCK,), (src, dst, np.int64(n4)))  # noqa: E731
        with probe:
            times = time_launches(cp, launch, 2, runs)
        tried.append({"kernel": "stream_copy", "grid": g, "bytes_per_run": 2 * side, **_summary(times, probe)})
    if not (bool((dst[:1024] == 1.0).all()) and bool((dst[-1024:] == 1.0).all())):
        emit.warning("DRAM roof: the copy kernel did not copy: its bandwidth is meaningless", code="wrong_result")
    src = dst = sink = None  # 2 GiB back to the pool, and the pool back to the device
    cp.get_default_memory_pool().free_all_blocks()
    for t in tried:
        t["bytes_per_s"] = t["bytes_per_run"] / (t["median_ms"] / 1e3)
    best = max(tried, key=lambda t: t["bytes_per_s"])
    best_of = lambda k: max(t["bytes_per_s"] for t in tried if t["kernel"] == k)  # noqa: E731
    return {**best, "buffer_bytes": side, "l2_bytes": l2, "block": BLOCK, "read_bytes_per_s": best_of("stream_read"),
            "copy_bytes_per_s": best_of("stream_copy"),
            "tried": [{k: t[k] for k in ("kernel", "grid", "bytes_per_s", "rms_pct")} for t in tried],
            "how": "fastest of a float4 read stream (read bytes) and a float4 copy (read + write bytes), "
                   f"2 x {side >> 20} MiB buffers, median of {runs} launches"}


def l2_roof(cp, K: dict, info: dict, probe: ClockProbe, runs: int) -> dict:
    """Reads over a working set of at most a quarter of L2 (ld.global.cg), ~0.2 ms per launch."""
    import numpy as np

    l2 = info.get("l2_bytes") or (4 << 20)
    ws = 1 << 16
    while ws * 2 <= l2 // L2_FRACTION:
        ws *= 2
    n4 = ws // 16
    grid = (info.get("sm_count") or 1) * blocks_per_sm(K["l2_read"], BLOCK, info) * 2
    src = cp.full(n4 * 4, 1.0, dtype=cp.float32)
    sink = cp.zeros(grid * BLOCK, dtype=cp.float32)
    never = np.float32(-1.0)

    def launcher(iters):
        return lambda: K["l2_read"]((grid,), (BLOCK,), (src, sink, np.int64(n4 - 1), np.int32(iters), never))

    iters = 64
    for _ in range(3):  # calibrate: one launch of about 0.2 ms
        ms = statistics.median(time_launches(cp, launcher(iters), 1, 3))
        if ms >= 0.15:
            break
        iters = int(min(1 << 16, max(iters * 2, iters * 0.2 / max(ms, 1e-4)))) // 8 * 8
    with probe:
        times = time_launches(cp, launcher(iters), 2, runs)
    nbytes = 16.0 * iters * grid * BLOCK
    st = _summary(times, probe)
    src = sink = None
    return {"bytes_per_s": nbytes / (st["median_ms"] / 1e3), "working_set_bytes": ws, "l2_bytes": l2,
            "grid": grid, "block": BLOCK, "iters": iters, "bytes_per_run": nbytes,
            "how": f"float4 ld.global.cg over a {ws / 2**20:g} MiB working set (L2 {l2 / 2**20:g} MiB)", **st}


def fma_roof(cp, K: dict, info: dict, probe: ClockProbe, runs: int, precision: str = "fp32") -> dict:
    """FMA throughput: 8 independent chains per thread, full SMs, ~10 ms per launch."""
    import numpy as np

    chains, depth = 8, 16  # FMA_CHAINS, FMA_DEPTH in kernels/ceilings.cu
    name, dtype, scalar = (("fma_peak", cp.float32, np.float32) if precision == "fp32"
                           else ("fma_peak_f64", cp.float64, np.float64))
    func = K[name]
    grid = (info.get("sm_count") or 1) * blocks_per_sm(func, BLOCK, info) * (16 if precision == "fp32" else 4)
    out = cp.empty(grid * BLOCK, dtype=dtype)
    x, y = scalar(0.9999), scalar(1e-4)

    def launcher(iters):
        return lambda: func((grid,), (BLOCK,), (out, x, y, np.int32(iters)))

    iters = 64
    for _ in range(5):  # calibrate: one launch of about 10 ms
        ms = statistics.median(time_launches(cp, launcher(iters), 1, 1))
        if ms >= 7:
            break
        iters = int(min(1 << 22, max(iters * 2, iters * 10.0 / max(ms, 1e-3))))
    with probe:
        times = time_launches(cp, launcher(iters), 1, runs)
    flops = 2.0 * chains * depth * iters * grid * BLOCK
    st = _summary(times, probe)
    if not bool(cp.isfinite(out[:1024]).all()):
        raise RuntimeError(f"{name} produced non-finite values")
    return {"flops_per_s": flops / (st["median_ms"] / 1e3), "flops_per_run": flops, "grid": grid, "block": BLOCK,
            "iters": iters, "how": f"{chains} independent {precision} FMA chains per thread, 2 FLOP per FMA", **st}


def torch_stream_peers(torch, runs: int, sizes=(1 << 30, 2 << 30)) -> dict:
    """torch's own streaming ops, timed like our kernels: ``dst.copy_(src)`` (read + write bytes) and
    ``x.sum()`` (read bytes), at each buffer size; the best of each."""
    out: dict = {}
    free = torch.cuda.mem_get_info()[0]
    for side in sizes:
        if 2 * side > 0.6 * free:
            continue
        x = torch.ones(side // 4, device="cuda")
        y = torch.empty_like(x)
        for op, fn, nbytes in (("copy_", lambda: y.copy_(x), 2 * side), ("sum", lambda: x.sum(), side)):
            ms = statistics.median(time_torch(torch, fn, 2, runs))
            bw = nbytes / (ms / 1e3)
            if op not in out or bw > out[op]["bytes_per_s"]:
                out[op] = {"bytes_per_s": bw, "buffer_bytes": side, "median_ms": ms}
        x = y = None
        torch.cuda.empty_cache()
    return out


def _matmul(torch, dtype, shape, probe: ClockProbe, runs_max: int = 40) -> dict:
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
    c = torch.empty(m, n, device="cuda", dtype=dtype)
    flops = 2.0 * m * n * k
    mm = lambda: torch.mm(a, b, out=c)  # noqa: E731
    first = time_torch(torch, mm, 1, 1)[0]  # cuBLAS picks its kernel on the first call
    runs = max(5, min(runs_max, int(TENSOR_BURST_S * 1e3 / max(first, 1e-3))))
    with probe:
        times = time_torch(torch, mm, 2, runs)
    if not bool(torch.isfinite(c[:8, :8]).all()):
        raise RuntimeError(f"{dtype} matmul {m}x{n}x{k} produced non-finite values")
    st = _summary(times, probe)
    return {"shape": [m, n, k], "flops_per_s": flops / (st["median_ms"] / 1e3), "flops_per_run": flops, **st}


def _bursts(tried: list[dict]) -> str:
    """``tried``'s count in words: "3 torch.mm shapes", or "6 bursts of 3 torch.mm shapes" where a shape came twice."""
    shapes = len({tuple(t["shape"]) for t in tried})
    return f"{shapes} torch.mm shapes" if shapes == len(tried) else f"{len(tried)} bursts of {shapes} torch.mm shapes"


def tensor_roofs(torch, probe: ClockProbe, shapes, sustained_s: float, emit, dtypes=("bf16", "fp16")) -> dict:
    """Per dtype (``dtypes``: bf16, fp16): every shape as a short burst from a cool start; the roof is the best
    shape's median. Then ``sustained_s`` seconds of 8192^3 bf16, to show the power cap at work."""
    out: dict = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        if name not in dtypes:
            continue
        tried = []
        for shape in shapes:
            if emit.should_stop():
                break
            torch.cuda.synchronize()
            time.sleep(TENSOR_REST_S)
            tried.append(_matmul(torch, dtype, shape, probe))
            torch.cuda.empty_cache()
        if not tried:
            break
        best = max(tried, key=lambda t: t["flops_per_s"])
        ref = next((t for t in tried if t["shape"] == [8192, 8192, 8192]), None)
        out[name] = {**best, "torch_version": torch.__version__,
                     "mm_8192_flops_per_s": ref["flops_per_s"] if ref else None,
                     "tried": [{k: t[k] for k in ("shape", "flops_per_s", "rms_pct", "sm_clock_mhz", "power_w",
                                                  "clock_reasons")} for t in tried],
                     "how": f"best of {_bursts(tried)}, median of a ~{TENSOR_BURST_S * 1e3:.0f} ms burst "
                            "each from a cool start"}
    if sustained_s > 0 and "bf16" in out and not emit.should_stop():
        n = 8192
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty_like(a)
        times: list[float] = []
        with probe:
            t_end = time.monotonic() + sustained_s
            while time.monotonic() < t_end and not emit.should_stop():
                times += time_torch(torch, lambda: torch.mm(a, b, out=c), 0, 10)
        st = _summary(times, probe)
        out["bf16"]["sustained"] = {"seconds": sustained_s, "shape": [n, n, n],
                                    "flops_per_s": 2.0 * n ** 3 / (st["median_ms"] / 1e3), **st}
        a = b = c = None
        torch.cuda.empty_cache()
    return out


def _t(v, scale: float, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(v / scale, fmt)


def measure(cp, info: dict, probe: ClockProbe, runs: int, emit) -> dict:
    """DRAM, L2, FP32 and FP64 roofs with CuPy kernels, in the keys of gputop.analysis.peaks (+ details)."""
    K = kernels(cp)
    roofs: dict = {"details": {}}
    d = roofs["details"]["dram"] = dram_roof(cp, K, info, probe, max(runs, 10), emit)
    roofs["dram_bytes_per_s"] = d["bytes_per_s"]
    emit.log(f"DRAM roof {_t(d['bytes_per_s'], 1e12)} TB/s ({d['kernel']}, grid {d['grid']}); read "
             f"{_t(d['read_bytes_per_s'], 1e12)}, copy {_t(d['copy_bytes_per_s'], 1e12)} TB/s")
    steps = (("l2", lambda: l2_roof(cp, K, info, probe, runs), "l2_bytes_per_s", "bytes_per_s"),
             ("fp32", lambda: fma_roof(cp, K, info, probe, runs, "fp32"), "fp32_flops", "flops_per_s"),
             ("fp64", lambda: fma_roof(cp, K, info, probe, runs, "fp64"), "fp64_flops", "flops_per_s"))
    for name, fn, key, field in steps:
        if emit.should_stop():
            break
        r = roofs["details"][name] = fn()
        roofs[key] = r[field]
        emit.log(f"{name.upper()} roof {_t(r[field], 1e12)} {'TB/s' if 'bytes' in key else 'TFLOP/s'} at SM "
                 f"{_t(r.get('sm_clock_mhz'), 1, '.0f')} MHz, {_t(r.get('power_w'), 1, '.0f')} W")
    return roofs


def measure_with_torch(probe: ClockProbe, runs: int, quick: bool, sustained_s: float, emit, roofs: dict) -> None:
    """torch's streaming ops beside the DRAM roof, and the bf16/fp16 tensor roofs, added to ``roofs``."""
    torch = torch_module(emit)
    if torch is None or emit.should_stop():
        return
    try:  # a torch/CUDA mismatch, or no memory left, must not cost the sweep
        _with_torch(torch, probe, runs, quick, sustained_s, emit, roofs)
    except Exception as exc:
        emit.warning(f"torch roofs skipped: {type(exc).__name__}: {exc}", code="tensor_roof")


def _with_torch(torch, probe: ClockProbe, runs: int, quick: bool, sustained_s: float, emit, roofs: dict) -> None:
    peers = torch_stream_peers(torch, max(runs, 10))
    if peers:
        best = max(v["bytes_per_s"] for v in peers.values())
        roofs["details"]["dram_peers"] = peers
        roofs["dram_peers"] = {f"torch {op}": v["bytes_per_s"] for op, v in peers.items()}
        if roofs.get("dram_bytes_per_s"):
            roofs["dram_vs_best_peer"] = roofs["dram_bytes_per_s"] / best
        emit.log("torch peers: " + ", ".join(f"{op} {_t(v['bytes_per_s'], 1e12)} TB/s" for op, v in peers.items())
                 + f"; DRAM roof / best = {roofs.get('dram_vs_best_peer') or 0:.3f}")
    if emit.should_stop():
        return
    tensor = tensor_roofs(torch, probe, TENSOR_SHAPES_QUICK if quick else TENSOR_SHAPES, sustained_s, emit)
    if tensor:
        roofs["tensor_dense_flops"] = {k: v["flops_per_s"] for k, v in tensor.items()}
        roofs["details"]["tensor"] = tensor
        for k, v in tensor.items():
            ref = v.get("mm_8192_flops_per_s")
            emit.log(f"{k} tensor roof {_t(v['flops_per_s'], 1e12, '.0f')} TFLOP/s ({'x'.join(map(str, v['shape']))}"
                     f"; 8192^3 {_t(ref, 1e12, '.0f')}) at SM {_t(v.get('sm_clock_mhz'), 1, '.0f')} MHz, "
                     f"{_t(v.get('power_w'), 1, '.0f')} W {v.get('clock_reasons') or ''}")
