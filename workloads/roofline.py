"""Roofline sweep: where does a kernel stop waiting on memory and start waiting on arithmetic?

The kernel (from the seed deck "GPU workload design") computes ``b[i] = a[i] + a[i]^2 + ... + a[i]^k``:
2k FLOPs per element for 8 bytes of memory traffic (one float read, one float written), so its
arithmetic intensity is AI = k/4 FLOP/byte. Sweeping k from 1 to 1000 walks the kernel from deep in
the memory-bound region (k = 1: 0.25 FLOP/byte) to deep in the compute-bound one (k = 1000: 250).

Two versions of the same polynomial run on the GPU (kernels/roofline.cu):

* ``mul+add``: the seed kernel as published, a separate add and multiply per term. FP32 peaks count
  a fused multiply-add as 2 FLOPs, so a kernel made of separate multiplies and adds can reach at most
  half the FP32 roof, however long it runs.
* ``fma``: Horner's rule, ``r = fma(r, x, x)`` k times: the same 2k FLOPs as k fused multiply-adds.

Each point is compared with roofs measured in the same run (a float4 streaming copy for DRAM
bandwidth, an 8-chain FMA kernel for FP32, bf16/fp16 matmul for the tensor cores when torch is
installed) and with the theoretical peaks (gputop.analysis.peaks). The SM clock and board power are
read at every point: a GPU at its power cap runs slower than its datasheet clock.

Timing follows the seed: 3 warm-up launches, then 10 timed launches with CUDA events, mean and median,
a warning when the RMS spread exceeds 5%. One difference: the timed launches are queued back to back
behind one more untimed launch, so the host's launch latency never sits between a start event and
its kernel (the seed synchronised after every launch, which adds that latency to every time).

``--device cpu`` runs the same sweep with NumPy on the host against measured host roofs (NumPy copy
bandwidth, float32 BLAS matmul): the seed blog's CPU-vs-GPU comparison.

    python workloads/roofline.py                    # the GPU sweep (needs cupy; torch for the tensor roof)
    python workloads/roofline.py --device cpu       # the same sweep on the host with NumPy
    python workloads/roofline.py --quick --param k=1,10,100,1000 --param csv=roofline.csv
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop import workload_util as wu
from gputop.analysis import roofline as rl
from gputop.analysis.verdict import Verdict, display_name
from gputop.workload_api import Emitter, Param, ParamError, main, require_cupy

NAME = "roofline"
DESCRIPTION = ("roofline sweep of b = a + a^2 + ... + a^k (AI = k/4 FLOP/byte): the seed mul+add kernel and "
               "an FMA version against DRAM, FP32 and tensor roofs measured in the same run")
SEED_K = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
VARIANTS = {  # variant -> (kernel name, phase name)
    "mul+add": ("compute_k_terms", "sweep: seed kernel (mul+add)"),
    "fma": ("compute_k_terms_fma", "sweep: FMA (Horner)"),
}
PARAMS = [
    Param("n", "int", 1 << 26, lo=1024, hi=1 << 30, help="elements per array (float32)"),
    Param("k", "int_list", SEED_K, lo=1, hi=100_000, help="polynomial degrees to sweep (AI = k/4)"),
    Param("warmup", "int", 3, lo=0, hi=1000, help="untimed launches before each point"),
    Param("runs", "int", 10, lo=1, hi=10_000, help="timed launches per point"),
    Param("block", "int", 256, lo=32, hi=1024, help="threads per block (a multiple of 32)"),
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="cuda: CuPy kernels; cpu: NumPy on the host"),
    Param("variants", "choice", "both", choices=["both", "mul+add", "fma"], help="which kernels to sweep"),
    Param("ceilings", "bool", True, help="measure the DRAM/FP32/tensor roofs first"),
    Param("tensor_s", "float", 1.0, lo=0, hi=60, help="seconds of sustained matmul per dtype for the tensor "
                                                       "roof (0: skip; needs torch)"),
    Param("csv", "str", "", help="also write the seed's CSV (k, ai, gflops, bandwidth, percent_peak) here"),
]
QUICK = {"warmup": 1, "runs": 3, "tensor_s": 0.25}
CPU = {"n": 1 << 22, "k": [1, 2, 5, 10, 20, 50, 100], "variants": "mul+add"}
NEEDS = ["cupy"]
TIMEOUT = 300.0

INPUT_VALUE = 1.01  # the seed's input: x^k stays finite in float32 up to k = 1000
BYTES_PER_ELEMENT = 8.0  # one float read + one float written
CPU_CHUNK = 1 << 15  # NumPy works on 128 KiB slices so that the k passes per slice stay in L2
TENSOR_SIZE = 8192  # matmul size for the tensor roof
KERNEL_FILE = "roofline.cu"
# The DRAM-roof copy kernels of kernels/roofline.cu: U float4s in flight per thread, cache hint, and
# grid-stride tiles or one contiguous run of tiles per block ("_blk").
COPY_KERNELS = [f"stream_copy_u{u}{hint}{blk}" for u in (1, 2, 4, 8) for hint in ("", "_cs", "_l2")
                for blk in ("", "_blk")]
READ_KERNELS = ["stream_read_u4", "stream_read_u8"]  # read-only streams: the DRAM roof is the faster kind

_module_cache: dict = {}  # one compiled RawModule per process


# -- shared ------------------------------------------------------------------------------------------
def run(p: dict, emit: Emitter) -> None:
    if p["block"] % 32:
        raise ParamError(f"bad value for parameter 'block': {p['block']} (allowed: a multiple of 32 in [32, 1024])")
    variants = list(VARIANTS) if p["variants"] == "both" else [p["variants"]]
    ks = list(p["k"])
    if not emit.events:
        emit.on_point = _print_row
    if p["device"] == "cpu":
        _run_cpu(p, emit, variants, ks)
    else:
        _run_gpu(p, emit, variants, ks)


def expected_value(k: int, x: float = INPUT_VALUE) -> float:
    """x + x^2 + ... + x^k in double precision (the correct answer for every element)."""
    return x * (x ** k - 1.0) / (x - 1.0) if x != 1.0 else float(k)


def timing_stats(times_ms: list[float]) -> dict:
    """The seed's statistics of timed runs: mean, RMS deviation in % of the mean; plus the median."""
    st = wu.stats(times_ms)
    return {"mean_ms": st["mean"], "median_ms": statistics.median(times_ms), "rms_pct": st["rms_pct"] or 0.0,
            "runs": st["n"]}


def point_data(variant: str, k: int, n: int, times_ms: list[float], probe: dict | None = None) -> dict:
    """One sweep point: 2k FLOPs and 8 bytes per element; GFLOP/s and GB/s from the mean time (as the seed)."""
    st = timing_stats(times_ms)
    flops = 2.0 * k * n
    nbytes = BYTES_PER_ELEMENT * n
    probe = probe or {}
    return {
        "variant": variant, "k": k, "ai": k / 4.0,
        "mean_ms": st["mean_ms"], "median_ms": st["median_ms"], "rms_pct": st["rms_pct"],
        "gflops": flops / 1e9 / (st["mean_ms"] / 1e3), "gbs": nbytes / 1e9 / (st["mean_ms"] / 1e3),
        "gflops_median": flops / 1e9 / (st["median_ms"] / 1e3),
        "sm_clock_mhz": probe.get("sm_clock_mhz"), "power_w": probe.get("power_w"),
        "clock_reasons": probe.get("clock_reasons"),
        "n": n, "flops": flops, "bytes": nbytes, "runs": st["runs"],
    }


def _check_point(emit: Emitter, pt: dict, got: float, times_ms: list[float]) -> None:
    """The seed's RMS > 5% warning, and a check that b[0] holds the right polynomial value."""
    want = expected_value(pt["k"])
    if not (abs(got - want) <= 1e-3 * abs(want)):
        emit.warning(f"{pt['variant']} k={pt['k']}: b[0] = {got!r}, expected {want:.6g}: the kernel computes "
                     f"the wrong polynomial", code="wrong_result")
    wu.noise_check(emit, f"{pt['variant']} k={pt['k']}", times_ms)


def _print_row(pt: dict) -> None:
    clock = f"{pt['sm_clock_mhz']:.0f}" if pt.get("sm_clock_mhz") else "n/a"
    power = f"{pt['power_w']:.0f}" if pt.get("power_w") else "n/a"
    print(f"  {pt['variant']:<8} k={pt['k']:<5} AI={pt['ai']:<7.2f} mean {pt['mean_ms']:9.3f} ms  median "
          f"{pt['median_ms']:9.3f} ms  {pt['gflops']:10.1f} GFLOP/s  {pt['gbs']:8.1f} GB/s  "
          f"RMS {pt['rms_pct']:4.1f}%  SM {clock} MHz  {power} W", flush=True)


def _finish_standalone(p: dict, emit: Emitter, device: dict, points: list[dict], results: dict) -> None:
    """Without gputop: classify the points here and print the table (and the seed's CSV if asked)."""
    if emit.events and not p.get("csv"):
        return  # gputop runs analyze() itself on the run document
    doc = {"device": device, "points": [dict(pt) for pt in points], "results": dict(results)}
    analyze(doc)
    if p.get("csv"):
        _write_seed_csv(p["csv"], doc["points"])
    if emit.events:
        return
    roofs = results.get("measured_roofs") or {}
    print("\n== measured roofs")
    if roofs.get("dram_bytes_per_s"):
        print(f"  memory  {roofs['dram_bytes_per_s'] / 1e9:10.1f} GB/s")
    if roofs.get("fp32_flops"):
        print(f"  FP32    {roofs['fp32_flops'] / 1e9:10.1f} GFLOP/s")
    for name, v in (roofs.get("tensor_dense_flops") or {}).items():
        print(f"  {name:<7} {v / 1e9:10.1f} GFLOP/s (tensor cores)")
    print("\n== roofline (% of the binding roof: measured / theoretical)")
    for pt in doc["points"]:
        pcts = "/".join("  n/a" if pt.get(f"pct_roof_{b}") is None else f"{pt[f'pct_roof_{b}']:5.1f}"
                        for b in ("measured", "theoretical"))
        flags = "  !! " + "; ".join(pt["flags"]) if pt.get("flags") else ""
        print(f"  {pt['variant']:<8} k={pt['k']:<5} AI={pt['ai']:<7.2f} {pt['gflops']:10.1f} GFLOP/s  {pcts} %  "
              f"{pt.get('bound') or 'n/a'}{flags}")
    v = doc.get("verdict")
    if v:
        print(f"\nverdict: {display_name(v)}")
        for line in [v["evidence_text"]] + v["notes"]:
            print(f"  - {line}")
        print(f"  > {v['advice']}")


def csv_rows(doc: dict) -> list[dict]:
    """``gputop --run roofline --csv FILE``: the seed's columns first (k, ai, gflops, bandwidth, percent_peak),
    then every other field of the point."""
    rows = []
    for pt in doc.get("points") or []:
        pct = pt.get("pct_fp32_theoretical")
        if pct is None:
            pct = pt.get("pct_fp32_measured")
        lead = {"k": pt.get("k"), "ai": pt.get("ai"), "gflops": pt.get("gflops"), "bandwidth": pt.get("gbs"),
                "percent_peak": pct}
        rows.append({**lead, **{k: v for k, v in pt.items() if k not in lead}})
    return rows


def _write_seed_csv(path: str, points: list[dict]) -> None:
    """The seed's CSV (k, ai, gflops, bandwidth, percent_peak) with the variant in front."""
    with open(path, "w") as f:
        f.write("variant,k,ai,gflops,bandwidth,percent_peak\n")
        for pt in points:
            pct = pt.get("pct_fp32_theoretical")
            if pct is None:
                pct = pt.get("pct_fp32_measured")
            f.write(f"{pt['variant']},{pt['k']},{pt['ai']:.6f},{pt['gflops']:.2f},{pt['gbs']:.2f},"
                    f"{'' if pct is None else f'{pct:.2f}'}\n")


# -- GPU ---------------------------------------------------------------------------------------------
def kernel_source() -> str:
    """kernels/roofline.cu, beside workloads/ in a checkout and inside the package in a wheel."""
    return (Path(__file__).resolve().parent.parent / "kernels" / KERNEL_FILE).read_text()


def kernels(cp) -> dict:
    """The compiled kernels (NVRTC compiles once per process; CuPy also caches the binary on disk)."""
    if "kernels" not in _module_cache:
        t0 = time.perf_counter()
        module = cp.RawModule(code=kernel_source())
        names = ["compute_k_terms", "compute_k_terms_fma", "fma_peak", *COPY_KERNELS, *READ_KERNELS]
        funcs = {name: module.get_function(name) for name in names}
        _module_cache["kernels"] = funcs
        _module_cache["compile_s"] = time.perf_counter() - t0
    return _module_cache["kernels"]


def time_launches(cp, launch, warmup: int, runs: int) -> list[float]:
    """Milliseconds of ``runs`` launches, timed with CUDA events on the current stream.

    The timed launches are queued back to back behind one more untimed launch, so the GPU is still
    busy while the host queues them: no host launch latency lands between a start event and its kernel.
    """
    for _ in range(warmup):
        launch()
    cp.cuda.get_current_stream().synchronize()
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(runs)]
    launch()
    for start, stop in events:
        start.record()
        launch()
        stop.record()
    events[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(start, stop) for start, stop in events]


class ClockProbe:
    """SM clock, board power and clock-event reasons of one GPU, sampled on a thread during a measurement.

    ``with probe: ...`` samples every ``period_s``; ``summary()`` gives the means (one reading taken at
    the end when the measurement was too short for a sample). All values are None without NVML.
    """

    def __init__(self, nvml=None, handle=None, period_s: float = 0.01):
        self.nvml, self.handle, self.period_s = nvml, handle, period_s
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if nvml is not None:
            self._c_sm = nvml.const("NVML_CLOCK_SM", 1)

    @property
    def available(self) -> bool:
        return self.nvml is not None and self.handle is not None

    def read(self) -> tuple:
        from gputop.telemetry.sample import decode_clock_reasons

        g = self.nvml.get
        clock = g("sm_clock", "nvmlDeviceGetClockInfo", self.handle, self._c_sm)
        mw = g("power", "nvmlDeviceGetPowerUsage", self.handle)
        reasons = decode_clock_reasons(g("clock_reasons", "nvmlDeviceGetCurrentClocksEventReasons", self.handle))
        return clock, (mw / 1000.0 if mw is not None else None), reasons

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.samples.append(self.read())

    def __enter__(self) -> "ClockProbe":
        self.samples = []
        if self.available:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, daemon=True, name="roofline-clock-probe")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.available and not self.samples:
            self.samples.append(self.read())

    def summary(self) -> dict:
        clocks = [s[0] for s in self.samples if s[0] is not None]
        powers = [s[1] for s in self.samples if s[1] is not None]
        reasons = sorted({r for s in self.samples for r in (s[2] or [])})
        return {
            "sm_clock_mhz": sum(clocks) / len(clocks) if clocks else None,
            "sm_clock_min_mhz": min(clocks) if clocks else None,
            "sm_clock_max_mhz": max(clocks) if clocks else None,
            "power_w": sum(powers) / len(powers) if powers else None,
            "power_max_w": max(powers) if powers else None,
            "clock_reasons": reasons if self.samples else None,
            "samples": len(self.samples),
        }


def gpu_context(cp, nvml=None) -> tuple[dict, ClockProbe]:
    """The device this process runs on (cuda:0 after CUDA_VISIBLE_DEVICES) and an NVML probe for it.

    The NVML device is found by PCI bus id; failing that, through CUDA_VISIBLE_DEVICES and the UUIDs.
    """
    from gputop.telemetry.nvml import Nvml, text

    dev_id = cp.cuda.runtime.getDevice()
    props = cp.cuda.runtime.getDeviceProperties(dev_id)
    name = props.get("name", b"")
    info = {
        "kind": "cuda",
        "name": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
        "cuda_device": dev_id,
        "pci_bus_id": cp.cuda.runtime.deviceGetPCIBusId(dev_id),
        "cc": f"{props.get('major')}.{props.get('minor')}",
        "compute_capability": [props.get("major"), props.get("minor")],
        "sm_count": props.get("multiProcessorCount"),
        "max_threads_per_sm": props.get("maxThreadsPerMultiProcessor"),
        "max_blocks_per_sm": props.get("maxBlocksPerMultiProcessor"),
        "regs_per_sm": props.get("regsPerMultiprocessor"),
        "l2_bytes": props.get("l2CacheSize"),
        "memory_total_bytes": props.get("totalGlobalMem"),
        "cupy_version": cp.__version__,
        "cuda_runtime_version": cp.cuda.runtime.runtimeGetVersion(),
        "nvml_index": None, "uuid": None, "static": None, "peaks": None,
    }
    nvml = Nvml() if nvml is None else nvml
    handle = idx = None
    if nvml.available():
        handle = nvml.get("handle_by_pci", "nvmlDeviceGetHandleByPciBusId", info["pci_bus_id"])
        if handle is not None:
            idx = nvml.get("nvml_index", "nvmlDeviceGetIndex", handle)
        else:  # fall back to CUDA_VISIBLE_DEVICES -> NVML index through the UUIDs
            from gputop.telemetry.devices import nvml_index_for_cuda
            from gputop.telemetry.static import device_count
            from gputop.telemetry.static import handle as nvml_handle

            uuids = [text(nvml.get("uuid", "nvmlDeviceGetUUID", nvml_handle(nvml, i))) for i in range(device_count(nvml))]
            idx = nvml_index_for_cuda(dev_id, uuids)
            handle = nvml_handle(nvml, idx) if idx is not None else None
    if handle is not None and idx is not None:
        from gputop.analysis.peaks import compute_peaks
        from gputop.telemetry.static import read_static

        static = read_static(nvml, idx)
        info.update(nvml_index=idx, static=static, uuid=static.get("uuid"),
                    max_sm_clock_mhz=static.get("max_sm_clock_mhz"))
        info["peaks"] = compute_peaks(static)
    return info, ClockProbe(nvml if handle is not None else None, handle)


def _blocks_per_sm(func, block: int, info: dict) -> int:
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


def memory_roof(cp, K: dict, info: dict, probe: ClockProbe, warmup: int, runs: int, emit: Emitter) -> dict:
    """DRAM bandwidth: the fastest of float4 copy shapes (read + write bytes) and read-only streams
    (read bytes), on buffers far larger than L2."""
    import numpy as np

    free, _total = cp.cuda.runtime.memGetInfo()
    l2 = info.get("l2_bytes") or (50 << 20)
    side = 1 << 30  # bytes per buffer: 1 GiB each side on an H100/H200 (20x its 50 MiB L2)
    while side > (16 << 20) and 2 * side > 0.6 * free:
        side //= 2
    if side < 8 * l2:
        emit.warning(f"memory roof: only {side >> 20} MiB per buffer free ({side / l2:.1f}x L2): the roof may "
                     f"include L2 hits", code="small_buffer")
    n4 = side // 16
    src = cp.full(n4 * 4, 1.0, dtype=cp.float32)
    dst = cp.zeros(n4 * 4, dtype=cp.float32)
    block = 256
    sm = info.get("sm_count") or 1
    shapes = []  # (kernel, grid): one tile per block, or one / four full waves of resident blocks
    for name in COPY_KERNELS:
        u = int(name.split("_")[2][1:])
        tiles = -(-n4 // (u * block))
        waves = sm * _blocks_per_sm(K[name], block, info)
        grids = {min(tiles, waves), min(tiles, 4 * waves)}
        if not name.endswith("_blk"):  # with one tile per block a contiguous run is the same kernel
            grids.add(tiles)
        shapes += [(name, g) for g in sorted(grids)]
    for name in READ_KERNELS:  # grid-stride: 1, 2 and 4 waves of resident blocks
        waves = sm * _blocks_per_sm(K[name], block, info)
        shapes += [(name, g) for g in (waves, 2 * waves, 4 * waves)]
    sink = cp.zeros(max(g for _, g in shapes) * block, dtype=cp.float32)
    never = np.float32(-1.0)  # a sum of 1.0s is never negative

    def launcher(name: str, grid: int):
        if name in READ_KERNELS:
            return lambda: K[name]((grid,), (block,), (src, sink, np.int64(n4), never))
        return lambda: K[name]((grid,), (block,), (src, dst, np.int64(n4)))

    def moved(name: str) -> int:  # bytes through DRAM per launch
        return side if name in READ_KERNELS else 2 * side

    tried = []
    best = None
    for name, grid in shapes:
        if tried and emit.should_stop():
            break
        ms = statistics.median(time_launches(cp, launcher(name, grid), 1, 3))
        tried.append({"kernel": name, "grid": grid, "gbs": moved(name) / ms / 1e6})
        if best is None or tried[-1]["gbs"] > best[2]:
            best = (name, grid, tried[-1]["gbs"])
    name, grid, _ = best
    with probe:
        times = time_launches(cp, launcher(name, grid), warmup, runs)
    copy_ok = bool((dst[:1024] == 1.0).all()) and bool((dst[-1024:] == 1.0).all())
    if not copy_ok and name not in READ_KERNELS:
        emit.warning("memory roof: the copy kernel did not copy: its bandwidth is meaningless", code="wrong_result")
    src = dst = sink = None  # 2 GiB back to the pool, and the pool back to the device
    cp.get_default_memory_pool().free_all_blocks()
    st = timing_stats(times)
    best_of = lambda kind: max((t["gbs"] for t in tried if (t["kernel"] in READ_KERNELS) == (kind == "read")),  # noqa: E731
                               default=None)
    return {"bytes_per_s": moved(name) / (st["median_ms"] / 1e3), "kernel": name, "grid": grid, "block": block,
            "buffer_bytes": side, "bytes_per_run": moved(name), "l2_bytes": l2, "shapes_tried": tried,
            "best_copy_gbs": best_of("copy"), "best_read_gbs": best_of("read"),
            "how": "fastest of float4 copy shapes (read + write bytes counted) and read-only streams "
                   "(read bytes counted)", **st, **probe.summary()}


def fp32_roof(cp, K: dict, info: dict, probe: ClockProbe, warmup: int, runs: int) -> dict:
    """FP32 FMA throughput: 8 independent chains per thread, 16 waves of full SMs, ~20 ms per launch."""
    import numpy as np

    block = 256
    func = K["fma_peak"]
    grid = (info.get("sm_count") or 1) * _blocks_per_sm(func, block, info) * 16
    out = cp.empty(grid * block, dtype=cp.float32)
    x, y = np.float32(0.9999), np.float32(1e-4)
    chains, depth = 8, 16  # FMA_CHAINS, FMA_DEPTH in kernels/roofline.cu

    def launcher(iters):
        return lambda: func((grid,), (block,), (out, x, y, np.int32(iters)))

    iters = 64
    for _ in range(4):  # calibrate: one launch of about 20 ms
        ms = statistics.median(time_launches(cp, launcher(iters), 1, 1))
        if ms >= 15:
            break
        iters = int(min(1 << 22, max(iters * 2, iters * 20.0 / max(ms, 1e-3))))
    with probe:
        times = time_launches(cp, launcher(iters), warmup, runs)
    flops = 2.0 * chains * depth * iters * grid * block
    st = timing_stats(times)
    if not bool(cp.isfinite(out[:1024]).all()):
        raise RuntimeError("fma_peak produced non-finite values")
    out = None
    return {"flops_per_s": flops / (st["median_ms"] / 1e3), "flops_per_run": flops, "grid": grid, "block": block,
            "iters": iters, "how": f"{chains} independent FMA chains per thread, 2 FLOP per FMA", **st,
            **probe.summary()}


def time_torch(torch, fn, warmup: int, runs: int) -> list[float]:
    """:func:`time_launches` for torch work: CUDA events around each call, queued back to back."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    fn()  # keeps the GPU busy while the timed calls are queued
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    events[-1][1].synchronize()
    return [start.elapsed_time(stop) for start, stop in events]


def tensor_roofs(probe: ClockProbe, warmup: int, runs: int, seconds: float, emit: Emitter) -> dict:
    """bf16 and fp16 matmul (8192^3) with torch, sustained for ``seconds`` each; {} without torch."""
    try:
        import torch
    except ImportError:
        emit.log("torch is not installed: no measured tensor roof (pip install 'gputop[torch]')")
        return {}
    if not torch.cuda.is_available():
        emit.log(f"torch {torch.__version__} sees no CUDA device (a CPU-only build?): no measured tensor roof")
        return {}
    out = {}
    n = TENSOR_SIZE
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        if emit.should_stop():
            break
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        for _ in range(max(1, warmup)):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        times: list[float] = []
        with probe:  # sustained: long enough for the clocks to settle at the power cap
            t_end = time.monotonic() + seconds
            while not emit.should_stop():
                times += time_torch(torch, lambda: torch.mm(a, b, out=c), 0, runs)
                if time.monotonic() >= t_end:
                    break
        if not times:
            break
        if not bool(torch.isfinite(c[:8, :8]).all()):
            raise RuntimeError(f"{name} matmul produced non-finite values")
        flops = 2.0 * n ** 3
        st = timing_stats(times)
        out[name] = {"flops_per_s": flops / (st["median_ms"] / 1e3), "flops_per_run": flops, "size": n,
                     "torch_version": torch.__version__, **st, **probe.summary()}
        a = b = c = None
    torch.cuda.empty_cache()
    return out


def measure_gpu_roofs(cp, K, info, probe, p, emit) -> dict:
    """The DRAM and FP32 ceilings, in the keys of gputop.analysis.peaks (plus the details)."""
    roofs: dict = {"details": {}}
    mem = memory_roof(cp, K, info, probe, p["warmup"], p["runs"], emit)
    roofs["dram_bytes_per_s"] = mem["bytes_per_s"]
    roofs["details"]["dram"] = mem
    emit.log(f"DRAM roof: {mem['bytes_per_s'] / 1e9:.0f} GB/s ({mem['kernel']}, grid {mem['grid']}, "
             f"2 x {mem['buffer_bytes'] >> 20} MiB), SM {_fmt(mem['sm_clock_mhz'])} MHz")
    if emit.should_stop():
        return roofs
    fp = fp32_roof(cp, K, info, probe, p["warmup"], p["runs"])
    roofs["fp32_flops"] = fp["flops_per_s"]
    roofs["details"]["fp32"] = fp
    emit.log(f"FP32 roof: {fp['flops_per_s'] / 1e12:.1f} TFLOP/s at SM {_fmt(fp['sm_clock_mhz'])} MHz, "
             f"{_fmt(fp['power_w'])} W")
    return roofs


def measure_tensor_roof(probe, p, emit, roofs: dict) -> None:
    """bf16/fp16 matmul ceilings (torch), added to ``roofs``. Run after the sweep: a matmul at the power
    cap leaves the SM clock low for a while, which would slow the sweep's first points."""
    if emit.should_stop() or p["tensor_s"] <= 0:
        return
    try:
        tensor = tensor_roofs(probe, p["warmup"], p["runs"], p["tensor_s"], emit)
    except Exception as exc:  # a torch/CUDA mismatch must not cost the sweep
        emit.warning(f"tensor roof skipped: {type(exc).__name__}: {exc}", code="tensor_roof")
        tensor = {}
    if tensor:
        roofs["tensor_dense_flops"] = {k: v["flops_per_s"] for k, v in tensor.items()}
        roofs["details"]["tensor"] = tensor
        for k, v in tensor.items():
            emit.log(f"tensor roof {k}: {v['flops_per_s'] / 1e12:.0f} TFLOP/s at SM {_fmt(v['sm_clock_mhz'])} MHz "
                     f"(min {_fmt(v['sm_clock_min_mhz'])}), {_fmt(v['power_w'])} W")


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.0f}"


def _run_gpu(p: dict, emit: Emitter, variants: list[str], ks: list[int]) -> None:
    cp = require_cupy()
    import numpy as np

    info, probe = gpu_context(cp)
    emit.started(NAME, p, info)
    K = kernels(cp)
    emit.log(f"kernels/{KERNEL_FILE} compiled in {_module_cache['compile_s']:.2f} s")
    points: list[dict] = []
    results: dict = {}
    total = len(variants) * len(ks)
    try:
        if p["ceilings"]:
            emit.phase("ceilings")
            results["measured_roofs"] = measure_gpu_roofs(cp, K, info, probe, p, emit)
            if emit.events:  # the measured roofs now, so a live plot can draw them before the sweep
                emit.result({"measured_roofs": results["measured_roofs"]})
        n, block = p["n"], p["block"]
        a = cp.full(n, INPUT_VALUE, dtype=cp.float32)
        b = cp.zeros(n, dtype=cp.float32)
        grid = (n + block - 1) // block
        for variant in variants:
            if emit.should_stop():
                break
            func = K[VARIANTS[variant][0]]
            emit.phase(VARIANTS[variant][1])
            for k in ks:
                if emit.should_stop():
                    break
                launch = lambda f=func, kk=k: f((grid,), (block,), (a, b, np.int32(n), np.int32(kk)))  # noqa: E731
                with probe:
                    times = time_launches(cp, launch, p["warmup"], p["runs"])
                pt = point_data(variant, k, n, times, probe.summary())
                _check_point(emit, pt, float(b[0]), times)
                points.append(pt)
                emit.point(pt)
                emit.progress(len(points), total, f"{variant} k={k}")
        if p["ceilings"] and "measured_roofs" in results and not emit.should_stop() and p["tensor_s"] > 0:
            emit.phase("ceilings: tensor (torch matmul)")
            measure_tensor_roof(probe, p, emit, results["measured_roofs"])
    finally:
        if results or points:
            results["compile_s"] = _module_cache.get("compile_s")
            if emit.events:
                emit.result(results)
            _finish_standalone(p, emit, info, points, results)


# -- CPU (NumPy) -------------------------------------------------------------------------------------
def _llc_bytes() -> int | None:
    try:
        v = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        if v > 0:
            return int(v)
    except (ValueError, OSError, AttributeError):
        pass
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for idx in base.glob("index*"):
        try:
            s = (idx / "size").read_text().strip()
            sizes.append(int(s[:-1]) * 1024 if s.endswith("K") else int(s[:-1]) << 20 if s.endswith("M") else int(s))
        except (OSError, ValueError):
            continue
    return max(sizes) if sizes else None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def time_host(fn, warmup: int, runs: int) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def poly_numpy(np, a, b, k: int, variant: str, scratch) -> None:
    """b = a + a^2 + ... + a^k with NumPy, one cache-sized slice at a time (each ufunc is one pass)."""
    n = a.shape[0]
    for s in range(0, n, CPU_CHUNK):
        x = a[s:s + CPU_CHUNK]
        r = b[s:s + CPU_CHUNK]
        if variant == "fma":  # Horner: r = r*x + x; NumPy has no fused multiply-add, so 2 passes per term
            r[...] = x
            for _ in range(k - 1):
                np.multiply(r, x, out=r)
                np.add(r, x, out=r)
        else:  # the seed loop: result += power; power *= x
            pw = scratch[:x.shape[0]]
            pw[...] = x
            r[...] = 0.0
            for _ in range(k):
                np.add(r, pw, out=r)
                np.multiply(pw, x, out=pw)


def host_memory_roof(np, warmup: int, runs: int) -> dict:
    """Copy bandwidth (read + write) of one NumPy copy on buffers at least twice the last-level cache."""
    llc = _llc_bytes() or (32 << 20)
    side = 64 << 20
    while side < 2 * llc and side < (512 << 20):
        side *= 2
    try:
        import psutil

        while side > (16 << 20) and 2 * side > psutil.virtual_memory().available / 4:
            side //= 2
    except ImportError:
        pass
    src = np.ones(side // 4, dtype=np.float32)
    dst = np.zeros_like(src)  # first touch before timing
    times = time_host(lambda: np.copyto(dst, src), max(1, warmup), runs)
    st = timing_stats(times)
    return {"bytes_per_s": 2 * side / (st["median_ms"] / 1e3), "buffer_bytes": side, "llc_bytes": llc,
            "threads": 1, "how": "numpy.copyto, read + write bytes counted", **st}


def host_fp32_roof(np, warmup: int, runs: int) -> dict:
    """float32 matmul through NumPy's BLAS (all cores), the size grown until one call takes >= 25 ms."""
    rng = np.random.default_rng(0)
    m = 256
    while True:
        a = rng.random((m, m), dtype=np.float32)
        b = rng.random((m, m), dtype=np.float32)
        np.dot(a, b)
        t0 = time.perf_counter()
        np.dot(a, b)
        if time.perf_counter() - t0 >= 0.025 or m >= 4096:
            break
        m *= 2
    times = time_host(lambda: np.dot(a, b), warmup, runs)
    st = timing_stats(times)
    flops = 2.0 * m ** 3
    return {"flops_per_s": flops / (st["median_ms"] / 1e3), "size": m, "flops_per_run": flops,
            "threads": os.cpu_count(), "how": "numpy.dot float32 (BLAS), 2 m^3 FLOPs", **st}


def _run_cpu(p: dict, emit: Emitter, variants: list[str], ks: list[int]) -> None:
    import numpy as np

    info = {"kind": "cpu", "name": _cpu_name(), "cores": os.cpu_count(), "llc_bytes": _llc_bytes(),
            "numpy_version": np.__version__, "peaks": None}
    emit.started(NAME, p, info)
    points: list[dict] = []
    results: dict = {}
    total = len(variants) * len(ks)
    try:
        if p["ceilings"]:
            emit.phase("ceilings")
            mem = host_memory_roof(np, p["warmup"], p["runs"])
            emit.log(f"host memory roof: {mem['bytes_per_s'] / 1e9:.1f} GB/s (numpy copy, 2 x {mem['buffer_bytes'] >> 20} MiB)")
            results["measured_roofs"] = {"dram_bytes_per_s": mem["bytes_per_s"], "details": {"dram": mem}}
            if not emit.should_stop():
                fp = host_fp32_roof(np, p["warmup"], p["runs"])
                emit.log(f"host FP32 roof: {fp['flops_per_s'] / 1e9:.1f} GFLOP/s (float32 matmul {fp['size']}^3, "
                         f"{fp['threads']} threads)")
                results["measured_roofs"]["fp32_flops"] = fp["flops_per_s"]
                results["measured_roofs"]["details"]["fp32"] = fp
        n = p["n"]
        a = np.full(n, INPUT_VALUE, dtype=np.float32)
        b = np.zeros(n, dtype=np.float32)
        scratch = np.empty(CPU_CHUNK, dtype=np.float32)
        for variant in variants:
            if emit.should_stop():
                break
            emit.phase(VARIANTS[variant][1])
            for k in ks:
                if emit.should_stop():
                    break
                times = time_host(lambda kk=k, v=variant: poly_numpy(np, a, b, kk, v, scratch), p["warmup"], p["runs"])
                pt = point_data(variant, k, n, times)
                _check_point(emit, pt, float(b[0]), times)
                points.append(pt)
                emit.point(pt)
                emit.progress(len(points), total, f"{variant} k={k}")
    finally:
        if results or points:
            if emit.events:
                emit.result(results)
            _finish_standalone(p, emit, info, points, results)


# -- analysis (runs in the gputop process on the run document, or here when standalone) ---------------
def analyze(doc: dict) -> None:
    """Classify every point against the measured and theoretical roofs; fill the ridge and the verdict."""
    device = doc.get("device") or {}
    reported = device.get("reported") or {}
    kind = device.get("kind") or reported.get("kind") or "cuda"
    peaks = device.get("peaks") or reported.get("peaks") or {}
    static = device.get("static") or reported.get("static") or {}
    results = doc.setdefault("results", {})
    measured = results.get("measured_roofs") or {}
    points = doc.get("points") or []

    meas = rl.Roofs(measured.get("fp32_flops"), measured.get("dram_bytes_per_s"))
    theo = rl.Roofs(peaks.get("fp32_flops"), peaks.get("dram_bytes_per_s")) if kind == "cuda" else rl.Roofs(None, None)
    roofs = {"measured": meas, "theoretical": theo}
    max_clock = static.get("max_sm_clock_mhz")

    flagged = []
    for pt in points:
        if not isinstance(pt, dict) or not all(isinstance(pt.get(f), (int, float)) for f in ("ai", "gflops", "gbs")):
            continue
        flops, bw = pt["gflops"] * 1e9, pt["gbs"] * 1e9
        c = rl.classify_point(pt["ai"], flops, bw, roofs, ceiling_fraction=0.5 if pt.get("variant") == "mul+add" else 1.0)
        if kind == "cpu" and c["bound"] == rl.BELOW_BOTH:
            c["hint"] += " " + CPU_BELOW_BOTH
        pt.update({k: v for k, v in c.items() if k != "basis"})
        pt["roof_basis"] = c["basis"]
        pt["pct_fp32_measured"] = _pct(flops, meas.flops)
        pt["pct_fp32_theoretical"] = _pct(flops, theo.flops)
        at_clk = rl.at_clock(theo.flops, pt.get("sm_clock_mhz"), max_clock)
        pt["pct_fp32_theoretical_at_clock"] = _pct(flops, at_clk)
        if c["flags"]:
            flagged.append(pt)

    ridge = {
        "fp32": {"theoretical": _r(theo.ridge), "measured": _r(meas.ridge)},
        "basis": "measured" if meas.complete else ("theoretical" if theo.complete else None),
        "unit": "FLOP/byte",
    }
    tensor_m = measured.get("tensor_dense_flops") or {}
    tensor_t = peaks.get("tensor_dense_flops") or {}
    for name in ("bf16", "fp16"):
        if tensor_m.get(name) or tensor_t.get(name):
            ridge[f"tensor_{name}"] = {"theoretical": _r(rl.ridge(tensor_t.get(name), theo.bw)),
                                       "measured": _r(rl.ridge(tensor_m.get(name), meas.bw))}
    results["ridge"] = ridge
    results["points_above_roof"] = len(flagged)
    doc["verdict"] = _verdict(kind, points, measured, peaks, static, meas, theo, ridge, flagged)


CPU_BELOW_BOTH = ("on the host, NumPy runs each term as two separate ufunc passes on one core with no fused "
                  "multiply-add, while the FP32 roof is BLAS on every core with FMA and register blocking: "
                  "a compiled, fused loop (or the GPU) is what closes that gap")


def _pct(x, ref) -> float | None:
    return round(100.0 * x / ref, 2) if isinstance(ref, (int, float)) and ref > 0 else None


def _r(v) -> float | None:
    return round(v, 3) if isinstance(v, float) else None


def _verdict(kind, points, measured, peaks, static, meas, theo, ridge, flagged) -> dict | None:
    """The sweep's verdict: memory-bound left of the ridge point, compute-bound right of it. The sentence
    gives the roofs and the ridge; the best point of each variant and anything odd go in the notes."""
    pts = [p for p in points if isinstance(p, dict) and p.get("bound")]
    basis = meas if meas.complete else theo
    rd = basis.ridge
    if not rd or (not pts and not measured):
        return None  # no complete roofs: nothing to classify against
    ev: dict = {}
    said: list[str] = []
    if theo.complete:
        ev.update(fp32_theoretical_flops=theo.flops, dram_theoretical_bytes_per_s=theo.bw,
                  ridge_theoretical=theo.ridge)
        said.append(f"theoretical roofs: FP32 {theo.flops / 1e12:.1f} TFLOP/s, DRAM {theo.bw / 1e12:.2f} TB/s, "
                    f"ridge {theo.ridge:.1f} FLOP/byte")
    elif kind == "cpu":
        said.append("theoretical host roofs are n/a: the classes use the measured host roofs (NumPy copy "
                    "bandwidth, float32 BLAS matmul)")
    if meas.bw:
        ev["dram_measured_bytes_per_s"] = meas.bw
        unit, scale = ("TB/s", 1e12) if meas.bw > 1e12 else ("GB/s", 1e9)
        line = f"measured DRAM roof {meas.bw / scale:.2f} {unit}"
        if theo.bw:
            ev["dram_measured_pct_of_theoretical"] = 100 * meas.bw / theo.bw
            line += f" = {ev['dram_measured_pct_of_theoretical']:.0f}% of theoretical"
        said.append(line)
    if meas.flops:
        ev["fp32_measured_flops"] = meas.flops
        fp = (measured.get("details") or {}).get("fp32") or {}
        unit, scale = ("TFLOP/s", 1e12) if meas.flops > 1e12 else ("GFLOP/s", 1e9)
        line = f"measured FP32 roof {meas.flops / scale:.1f} {unit}"
        if theo.flops:
            ev["fp32_measured_pct_of_theoretical"] = 100 * meas.flops / theo.flops
            line += f" = {ev['fp32_measured_pct_of_theoretical']:.0f}% of theoretical"
            at_clk = rl.at_clock(theo.flops, fp.get("sm_clock_mhz"), static.get("max_sm_clock_mhz"))
            if at_clk:
                ev["fp32_measured_sm_clock_mhz"] = fp["sm_clock_mhz"]
                ev["fp32_measured_pct_at_clock"] = 100 * meas.flops / at_clk
                line += f" ({ev['fp32_measured_pct_at_clock']:.0f}% at the measured {fp['sm_clock_mhz']:.0f} MHz)"
        said.append(line)
    ev.update(ridge_flop_per_byte=rd, ridge_k=4 * rd)
    said.append(f"ridge point: {rd:.1f} FLOP/byte ({'measured' if basis is meas else 'theoretical'} roofs), "
                f"k = {4 * rd:.0f} in this sweep")

    notes: list[str] = []
    for name, v in ((measured.get("details") or {}).get("tensor") or {}).items():
        ev[f"{name}_tensor_measured_flops"] = v["flops_per_s"]
        line = f"measured {name} tensor roof {v['flops_per_s'] / 1e12:.0f} TFLOP/s"
        t = (peaks.get("tensor_dense_flops") or {}).get(name)
        if t:
            line += f" = {100 * v['flops_per_s'] / t:.0f}% of theoretical"
        if v.get("sm_clock_mhz"):
            line += f", SM clock {v['sm_clock_mhz']:.0f} MHz (min {v['sm_clock_min_mhz']:.0f})"
        if v.get("power_w"):
            line += f" at {v['power_w']:.0f} W"
        if v.get("clock_reasons"):
            line += f" [{', '.join(v['clock_reasons'])}]"
        notes.append(line)
    best = {}
    for p in pts:
        v = p["variant"]
        if v not in best or p["gflops"] > best[v]["gflops"]:
            best[v] = p
    for v, p in best.items():
        ev[f"{v}_best_gflops"], ev[f"{v}_best_k"] = p["gflops"], p["k"]
        pct = p.get("pct_roof_measured") if p.get("pct_roof_measured") is not None else p.get("pct_roof_theoretical")
        line = f"{v}: best {p['gflops']:.4g} GFLOP/s at k={p['k']}"
        if pct is not None:
            line += f" = {pct:.0f}% of the roof there"
        if p.get("pct_ceiling") is not None:
            line += f" ({p['pct_ceiling']:.0f}% of its half-roof ceiling)"
        notes.append(line)
    k_min = min(pts, key=lambda p: p["k"]) if pts else None
    if k_min is not None:
        notes.append(f"k={k_min['k']} ({k_min['variant']}): {k_min['gbs']:.4g} GB/s, {k_min['bound']}")
    below = [p for p in pts if p["bound"] == rl.BELOW_BOTH]
    ev.update(points=len(pts), points_below_both_roofs=len(below), points_above_a_roof=len(flagged))
    if below:
        notes.append(f"{len(below)} of {len(pts)} points below both roofs")
    if flagged:
        notes.append(f"{len(flagged)} point(s) above a roof (a bug): " +
                     "; ".join(f"{p['variant']} k={p['k']}: {p['flags'][0]}" for p in flagged[:3]))

    advice: list[str] = []
    if "mul+add" in best and "fma" in best and best["fma"]["gflops"] > 1.3 * best["mul+add"]["gflops"]:
        advice.append(f"the seed's separate multiply and add reach at most half the FP32 roof; the same polynomial "
                      f"in Horner form (fused multiply-adds) is {best['fma']['gflops'] / best['mul+add']['gflops']:.1f}x "
                      f"faster at k={best['fma']['k']}")
    elif "mul+add" in best and kind == "cuda":
        advice.append("a separate multiply and add can reach only half the FP32 roof: write polynomials in Horner "
                      "form so the compiler emits fused multiply-adds")
    advice.append("left of the ridge only bytes matter: fuse kernels, reuse data on chip, or use smaller types; "
                  "right of it only the math does")
    t = (measured.get("tensor_dense_flops") or {}).get("bf16")
    if t and meas.flops:
        advice.append(f"matmul-shaped work belongs on the tensor cores: bf16 reached {t / meas.flops:.0f}x the FP32 roof")
    if below:
        advice.append(CPU_BELOW_BOTH if kind == "cpu" else rl.HINTS[rl.BELOW_BOTH])
    sub = f"below {rd:.3g} FLOP/byte, k < {4 * rd:.0f}; compute-bound above"
    return Verdict("memory-bound", sub, None, ev, "; ".join(said), "; ".join(advice), ["compute-bound"],
                   notes=notes).to_dict()


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
