"""Roofline sweep: where does a kernel stop waiting on memory and start waiting on arithmetic?

The kernel (from the seed deck "GPU workload design", kernels/roofline.cu) computes
``b[i] = a[i] + a[i]^2 + ... + a[i]^k``: 2k FLOPs per element for 8 bytes of memory traffic (one float
read, one float written), so its arithmetic intensity is AI = 2k / 8 = k/4 FLOP/byte. Sweeping k from
1 to 1000 walks it from deep in the memory-bound region (k = 1: 0.25 FLOP/byte) to deep in the
compute-bound one (k = 1000: 250 FLOP/byte). Each point: 3 warm-up launches, then 10 timed launches
with CUDA events; GFLOP/s and GB/s from the mean time; a warning when the RMS spread exceeds 5%.

Beside the seed kernel (``mul+add``) runs the same polynomial by Horner's rule (``fma``):
``r = fma(r, x, x)`` k times. Why two: a GPU's FP32 peak counts one fused multiply-add as 2 FLOPs per
lane per clock. The seed kernel's ``result += power; power *= x`` is a separate add and multiply, two
instructions for those same 2 FLOPs (the compiler cannot fuse them: they feed different chains), so
however long it runs it reaches at most half the FP32 roof. Horner's rule does each term in one FMA and
can reach the whole roof. Same FLOPs, same bytes, same answer: only the instruction mix differs.

The roofs are measured first, in the same run (gputop.measure.ceilings: DRAM and L2 bandwidth, FP32 and
FP64 FMA throughput), the tensor-core roofs (torch matmul) after the sweep, so that their power draw
does not slow the sweep. The SM clock and board power are read at every point.

``--device cpu`` runs the same sweep with NumPy on the host against measured host roofs.

    python workloads/roofline.py                    # the GPU sweep (needs cupy; torch for the tensor roofs)
    python workloads/roofline.py --device cpu       # the same sweep on the host with NumPy
    python workloads/roofline.py --quick --param k=1,10,100,1000 --param csv=roofline.csv
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.measure import ceilings, host
from gputop.measure.probe import gpu_context
from gputop.measure.timing import time_launches, timing_stats
from gputop.workload import Emitter, Param, ParamError, device_param, main, require_cupy
from gputop.workload import util as wu

NAME = "roofline"
DESCRIPTION = ("roofline sweep of b = a + a^2 + ... + a^k (AI = k/4 FLOP/byte): the seed mul+add kernel and "
               "an FMA version against DRAM, L2, FP32 and tensor roofs measured in the same run")
SEED_K = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
VARIANTS = {  # variant -> (kernel in kernels/roofline.cu, phase name)
    "mul+add": ("compute_k_terms", "sweep: seed kernel (mul+add)"),
    "fma": ("compute_k_terms_fma", "sweep: FMA (Horner)"),
}
PARAMS = [
    Param("n", "int", 1 << 26, lo=1024, hi=1 << 30, help="elements per array (float32)"),
    Param("k", "int_list", SEED_K, lo=1, hi=100_000, help="polynomial degrees to sweep (AI = k/4)"),
    Param("warmup", "int", 3, lo=0, hi=1000, help="untimed launches before each point"),
    Param("runs", "int", 10, lo=1, hi=10_000, help="timed launches per point"),
    Param("block", "int", 256, lo=32, hi=1024, help="threads per block (a multiple of 32)"),
    device_param("cuda: CuPy kernels; cpu: NumPy on the host"),
    Param("variants", "choice", "both", choices=["both", "mul+add", "fma"], help="which kernels to sweep"),
    Param("ceilings", "bool", True, help="measure the roofs (DRAM, L2, FP32, FP64, tensor)"),
    Param("tensor_s", "float", 0.5, lo=0, hi=60, help="tensor roofs with torch, then this many seconds of "
                                                       "sustained bf16 matmul (0: no tensor roofs)"),
    Param("csv", "str", "", help="also write the seed's CSV (k, ai, gflops, bandwidth, percent_peak) here"),
]
QUICK = {"warmup": 1, "runs": 3, "tensor_s": 0.25}
CPU = {"n": 1 << 22, "k": [1, 2, 5, 10, 20, 50, 100], "variants": "mul+add"}
NEEDS = ["cupy"]
TIMEOUT = 300.0

INPUT_VALUE = 1.01  # the seed's input: x^k stays finite in float32 up to k = 1000
BYTES_PER_ELEMENT = 8.0  # one float read + one float written
CPU_CHUNK = 1 << 15  # NumPy works on 128 KiB slices so that the k passes per slice stay in cache
_module_cache: dict = {}  # the compiled sweep kernels, once per process


def expected_value(k: int, x: float = INPUT_VALUE) -> float:
    """x + x^2 + ... + x^k in double precision (the correct answer for every element)."""
    return x * (x ** k - 1.0) / (x - 1.0) if x != 1.0 else float(k)


def point_data(variant: str, k: int, n: int, times_ms: list[float], probe: dict | None = None) -> dict:
    """One sweep point: 2k FLOPs and 8 bytes per element; GFLOP/s and GB/s from the mean time (as the seed)."""
    st = timing_stats(times_ms)
    flops, nbytes, probe = 2.0 * k * n, BYTES_PER_ELEMENT * n, probe or {}
    return {
        "variant": variant, "k": k, "ai": k / 4.0,
        "mean_ms": st["mean_ms"], "median_ms": st["median_ms"], "rms_pct": st["rms_pct"],
        "gflops": flops / 1e9 / (st["mean_ms"] / 1e3), "gbs": nbytes / 1e9 / (st["mean_ms"] / 1e3),
        "gflops_median": flops / 1e9 / (st["median_ms"] / 1e3),
        "sm_clock_mhz": probe.get("sm_clock_mhz"), "power_w": probe.get("power_w"),
        "clock_reasons": probe.get("clock_reasons"),
        "n": n, "flops": flops, "bytes": nbytes, "runs": st["runs"],
    }


def check_point(emit: Emitter, pt: dict, got: float, times_ms: list[float]) -> None:
    """The seed's RMS > 5% warning, and a check that b[0] holds the right polynomial value."""
    want = expected_value(pt["k"])
    if not (abs(got - want) <= 1e-3 * abs(want)):
        emit.warning(f"{pt['variant']} k={pt['k']}: b[0] = {got!r}, expected {want:.6g}: the kernel computes "
                     f"the wrong polynomial", code="wrong_result")
    wu.noise_check(emit, f"{pt['variant']} k={pt['k']}", times_ms)


def run_sweep(emit: Emitter, variants: list[str], ks: list[int], n: int, time_point) -> list[dict]:
    """The seed's loop: for each variant, for each k, time the kernel and record one point.
    ``time_point(variant, k)`` returns (times in ms, b[0], clock/power summary)."""
    points: list[dict] = []
    for variant in variants:
        if emit.should_stop():
            break
        emit.phase(VARIANTS[variant][1])
        for k in ks:
            if emit.should_stop():
                break
            times, b0, probe = time_point(variant, k)
            pt = point_data(variant, k, n, times, probe)
            check_point(emit, pt, b0, times)
            points.append(pt)
            emit.point(pt)
            emit.progress(len(points), len(variants) * len(ks), f"{variant} k={k}")
    return points


# -- on the GPU (CuPy) ---------------------------------------------------------------------------------
def kernels(cp) -> dict:
    """kernels/roofline.cu compiled once per process (NVRTC; CuPy also caches the binary on disk)."""
    if "kernels" not in _module_cache:
        source = (Path(__file__).resolve().parent.parent / "kernels" / "roofline.cu").read_text()
        module = cp.RawModule(code=source)
        _module_cache["kernels"] = {v[0]: module.get_function(v[0]) for v in VARIANTS.values()}
    return _module_cache["kernels"]


def run_gpu(p: dict, emit: Emitter, variants: list[str], ks: list[int]) -> tuple[dict, list, dict]:
    cp = require_cupy()
    import numpy as np

    if p["ceilings"] and p["tensor_s"] > 0:
        ceilings.prefetch_torch()  # torch takes seconds to import: overlap it with the CuPy work
    info, probe = gpu_context(cp)
    emit.started(NAME, p, info)
    t0 = time.perf_counter()
    K = kernels(cp)
    if p["ceilings"]:
        ceilings.kernels(cp)
    results: dict = {"compile_s": time.perf_counter() - t0}
    ceilings.wait_torch()  # a thread still importing torch would stall the timed launches
    points: list[dict] = []
    try:
        if p["ceilings"]:
            emit.phase("ceilings")
            results["measured_roofs"] = ceilings.measure(cp, info, probe, p["runs"], emit)
            if emit.events:  # a live plot draws the roofs before the sweep
                emit.result({"measured_roofs": results["measured_roofs"]})
        n, block = p["n"], p["block"]
        a = cp.full(n, INPUT_VALUE, dtype=cp.float32)
        b = cp.zeros(n, dtype=cp.float32)
        grid = (n + block - 1) // block

        def time_point(variant: str, k: int):
            f = K[VARIANTS[variant][0]]
            with probe:
                times = time_launches(cp, lambda: f((grid,), (block,), (a, b, np.int32(n), np.int32(k))),
                                      p["warmup"], p["runs"])
            return times, float(b[0]), probe.summary()

        points = run_sweep(emit, variants, ks, n, time_point)
        if p["ceilings"] and p["tensor_s"] > 0 and not emit.should_stop():
            emit.phase("ceilings: tensor (torch matmul)")
            quick = p["runs"] < 10  # --quick: three matmul shapes instead of six
            ceilings.measure_with_torch(probe, p["runs"], quick, p["tensor_s"], emit, results["measured_roofs"])
    finally:
        emit.result(results)
    return info, points, results


# -- on the host (NumPy) -------------------------------------------------------------------------------
def poly_numpy(np, a, b, k: int, variant: str, scratch, stop=None) -> None:
    """b = a + a^2 + ... + a^k with NumPy, one cache-sized slice at a time (each ufunc is one pass). ``stop``: asked
    before each slice (a long polynomial takes minutes on the host; a stop asked meanwhile drops the point)."""
    for s in range(0, a.shape[0], CPU_CHUNK):
        host.check_stop(stop)
        x, r = a[s:s + CPU_CHUNK], b[s:s + CPU_CHUNK]
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


def run_cpu(p: dict, emit: Emitter, variants: list[str], ks: list[int]) -> tuple[dict, list, dict]:
    import numpy as np

    info = {"kind": "cpu", "name": host.cpu_name(), "cores": os.cpu_count(), "llc_bytes": host.llc_bytes(),
            "numpy_version": np.__version__, "peaks": None}
    emit.started(NAME, p, info)
    results: dict = {}
    points: list[dict] = []
    try:
        if p["ceilings"]:
            emit.phase("ceilings")
            mem = host.host_memory_roof(np, p["warmup"], p["runs"], emit.should_stop)
            fp = host.host_fp32_roof(np, p["warmup"], p["runs"], emit.should_stop)
            results["measured_roofs"] = {"dram_bytes_per_s": mem["bytes_per_s"], "fp32_flops": fp["flops_per_s"],
                                         "details": {"dram": mem, "fp32": fp}}
            emit.log(f"host roofs: memory {mem['bytes_per_s'] / 1e9:.1f} GB/s (numpy copy), FP32 "
                     f"{fp['flops_per_s'] / 1e9:.1f} GFLOP/s (float32 matmul {fp['size']}^3)")
        n = p["n"]
        a = np.full(n, INPUT_VALUE, dtype=np.float32)
        b = np.zeros(n, dtype=np.float32)
        scratch = np.empty(CPU_CHUNK, dtype=np.float32)

        def time_point(variant: str, k: int):
            times = host.time_host(lambda: poly_numpy(np, a, b, k, variant, scratch, emit.should_stop),
                                   p["warmup"], p["runs"], emit.should_stop)
            return times, float(b[0]), None

        points = run_sweep(emit, variants, ks, n, time_point)
    finally:
        if results or points:
            emit.result(results)
    return info, points, results


# -- the run, the table, the CSV -------------------------------------------------------------------------
def run(p: dict, emit: Emitter) -> None:
    if p["block"] % 32:
        raise ParamError(f"bad value for parameter 'block': {p['block']} (allowed: a multiple of 32 in [32, 1024])")
    variants = list(VARIANTS) if p["variants"] == "both" else [p["variants"]]
    if not emit.events:
        emit.on_point = print_row
    info, points, results = (run_cpu if p["device"] == "cpu" else run_gpu)(p, emit, variants, list(p["k"]))
    if emit.events and not p["csv"]:
        return  # gputop judges the run document itself (gputop/lessons/roofline.py)
    doc = {"device": info, "points": [dict(pt) for pt in points], "results": dict(results)}
    wu.analyzed(NAME, doc)  # what gputop would conclude: the points against the roofs, the verdict
    if p["csv"]:
        write_seed_csv(p["csv"], doc["points"])
    if not emit.events:
        print_summary(doc)


def print_row(pt: dict) -> None:
    clock = f"{pt['sm_clock_mhz']:.0f}" if pt.get("sm_clock_mhz") else "n/a"
    print(f"  {pt['variant']:<8} k={pt['k']:<5} AI={pt['ai']:<7.2f} mean {pt['mean_ms']:9.3f} ms  "
          f"{pt['gflops']:10.1f} GFLOP/s  {pt['gbs']:8.1f} GB/s  RMS {pt['rms_pct']:4.1f}%  SM {clock} MHz", flush=True)


def print_summary(doc: dict) -> None:
    roofs = doc["results"].get("measured_roofs") or {}
    print("\n== measured roofs")
    for key, label, unit in (("dram_bytes_per_s", "DRAM", "GB/s"), ("l2_bytes_per_s", "L2", "GB/s"),
                             ("fp32_flops", "FP32", "GFLOP/s"), ("fp64_flops", "FP64", "GFLOP/s")):
        if roofs.get(key):
            print(f"  {label:<7} {roofs[key] / 1e9:10.1f} {unit}")
    for name, v in (roofs.get("tensor_dense_flops") or {}).items():
        print(f"  {name:<7} {v / 1e9:10.1f} GFLOP/s (tensor cores)")
    print("\n== roofline (% of the binding roof: measured / theoretical)")
    for pt in doc["points"]:
        pcts = "/".join("  n/a" if pt.get(f"pct_roof_{b}") is None else f"{pt[f'pct_roof_{b}']:5.1f}"
                        for b in ("measured", "theoretical"))
        flags = "  !! " + "; ".join(pt["flags"]) if pt.get("flags") else ""
        print(f"  {pt['variant']:<8} k={pt['k']:<5} AI={pt['ai']:<7.2f} {pt['gflops']:10.1f} GFLOP/s  {pcts} %  "
              f"{pt.get('bound') or 'n/a'}{flags}")


def write_seed_csv(path: str, points: list[dict]) -> None:
    """The seed's CSV (k, ai, gflops, bandwidth, percent_peak) with the variant in front."""
    with open(path, "w") as f:
        f.write("variant,k,ai,gflops,bandwidth,percent_peak\n")
        for pt in points:
            pct = pt.get("pct_fp32_theoretical")
            pct = pt.get("pct_fp32_measured") if pct is None else pct
            f.write(f"{pt['variant']},{pt['k']},{pt['ai']:.6f},{pt['gflops']:.2f},{pt['gbs']:.2f},"
                    f"{'' if pct is None else f'{pct:.2f}'}\n")


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
