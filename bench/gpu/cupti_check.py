"""CUPTI windows of CUDA programs without PyTorch (issue 27): a CuPy and a JAX program, each with a ground truth
it measures itself, and a comparison of that truth with gputop's window.

    source .whl/use.sh   # cupti-python 13.x + cuda-bindings on PYTHONPATH
    GPUTOP_PROFILE_AT=6 python -m gputop --json --run --profile --profile-seconds 3 -- \\
        python bench/gpu/cupti_check.py cupy --seconds 14 --truth /tmp/cupy_truth.json > /tmp/cupy_doc.json
    python bench/gpu/cupti_check.py compare /tmp/cupy_doc.json /tmp/cupy_truth.json
    (the same with ``jax``; without GPUTOP_PROFILE_AT gputop asks once its live verdict has held 5 s;
    ``jax --own-profiler DIR``: the loop runs under jax.profiler.start_trace, so CUPTI is the program's and
    gputop's window must be one line, "CUPTI is busy ...", with the program's output and exit code unchanged)

Each iteration runs, back to back on one stream: one fp32 GEMM (2048^2: cuBLAS for CuPy, XLA's GEMM for JAX),
three elementwise ops on 2^26 float32 values (CuPy ufuncs with ``out=``: ``cupy_multiply``, ``cupy_add``,
``cupy_sin``; JAX: one jitted ``sin(x * 2 + 1)``, one XLA loop fusion, called three times) and one sum
(CuPy: CUB's device reduction or ``cupy_sum``; JAX: an XLA reduce fusion).

Ground truth, independent of CUPTI and of gputop: each op's GPU time alone, a burst of ``REPS`` calls timed
by the wall clock around a device synchronisation (the ops are GPU-bound: 0.1 to 1 ms each, far above the
launch cost), so the expected share of kernel time by category is time x calls per iteration over the total;
and by construction the calls per iteration (GEMM 1 : elementwise 3 : reduction 1; a library may launch more
than one kernel for one call, e.g. CUB's two-pass reduce or a split-K GEMM: ``compare`` prints the counts).
The loop's iterations per second, in 1 s bins (seconds since the loop started), show the window's cost.

``compare DOC TRUTH``: the document's last window (gputop's ``attribution``) beside the truth, a row per
category (expected share, the window's share, the difference) and the kernel counts per iteration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

N_ELEM = 1 << 26
N_GEMM = 2048
REPS = 30
CATEGORY = {"gemm": "GEMM/conv", "elementwise": "elementwise", "reduction": "reduction"}
PER_ITER = {"gemm": 1, "elementwise": 3, "reduction": 1}


def burst_ms(fn, sync, reps=REPS):
    """GPU time of one call: ``reps`` calls back to back, then a sync (after a warm-up call)."""
    fn()
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t) / reps * 1e3


def cupy_ops():
    import cupy as cp

    a = cp.random.random((N_GEMM, N_GEMM), dtype=cp.float32)
    b = cp.random.random((N_GEMM, N_GEMM), dtype=cp.float32)
    c = cp.empty_like(a)
    x = cp.random.random(N_ELEM, dtype=cp.float32)
    y, z = cp.empty_like(x), cp.empty_like(x)
    box = {}
    ops = {"gemm": lambda: cp.matmul(a, b, out=c),
           "elementwise": [lambda: cp.multiply(x, 2.0, out=y), lambda: cp.add(y, 1.0, out=z),
                           lambda: cp.sin(z, out=y)],
           "reduction": lambda: box.__setitem__("s", cp.sum(y))}
    return ops, cp.cuda.Device().synchronize, "cupy " + cp.__version__


def jax_ops():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (N_GEMM, N_GEMM), jnp.float32)
    b = jax.random.normal(key, (N_GEMM, N_GEMM), jnp.float32)
    box = {"x": jax.random.normal(key, (N_ELEM,), jnp.float32)}
    mm = jax.jit(lambda p, q: p @ q)
    ew = jax.jit(lambda v: jnp.sin(v * 2.0 + 1.0))
    red = jax.jit(jnp.sum)

    def elementwise():
        box["y"] = ew(box["x"])

    ops = {"gemm": lambda: box.__setitem__("c", mm(a, b)), "elementwise": [elementwise] * 3,
           "reduction": lambda: box.__setitem__("s", red(box["x"]))}

    def sync():
        jax.block_until_ready([v for v in box.values()])
    return ops, sync, "jax " + jax.__version__


def run(lib: str, seconds: float, truth_path: str | None, own_profiler: str | None = None) -> None:
    ops, sync, version = cupy_ops() if lib == "cupy" else jax_ops()
    if own_profiler:  # the program's own profiler holds CUPTI: gputop's window must be one line, the run unchanged
        import jax

        jax.profiler.start_trace(own_profiler)
    calls = [(kind, f) for kind, fs in ops.items() for f in (fs if isinstance(fs, list) else [fs])]
    op_ms = {kind: burst_ms(f, sync) for kind, f in calls if kind != "elementwise"}
    op_ms["elementwise"] = sum(burst_ms(f, sync) for kind, f in calls if kind == "elementwise") / 3
    total = sum(op_ms[k] * PER_ITER[k] for k in op_ms)
    expected = {CATEGORY[k]: round(op_ms[k] * PER_ITER[k] / total, 4) for k in op_ms}
    t0 = time.perf_counter()
    bins, n = [0], 0
    while time.perf_counter() - t0 < seconds:
        for _kind, f in calls:
            f()
        n += 1
        if n % 4 == 0:
            sync()  # keep the launch queue short: the host's time is the GPU's (a 1 s bin is a GPU second)
        i = int(time.perf_counter() - t0)
        while len(bins) <= i:
            bins.append(0)
        bins[i] += 1
    sync()
    if own_profiler:
        import jax

        jax.profiler.stop_trace()
    truth = {"lib": version, "seconds": round(time.perf_counter() - t0, 3), "iterations": n,
             "calls_per_iteration": {CATEGORY[k]: v for k, v in PER_ITER.items()},
             "op_ms": {CATEGORY[k]: round(v, 4) for k, v in op_ms.items()},
             "expected_share": expected, "iterations_per_s_bins": bins,
             "method": f"each op alone: {REPS} calls back to back, wall clock around a device sync"}
    print(json.dumps({"truth": truth}), flush=True)
    if truth_path:
        with open(truth_path, "w") as f:
            json.dump(truth, f, indent=1)


def compare(doc_path: str, truth_path: str) -> int:
    with open(doc_path) as f:
        doc = json.load(f)
    with open(truth_path) as f:
        truth = json.load(f)
    a = doc.get("attribution") or {}
    ok = [w for w in a.get("windows", []) if w.get("status") == "ok"]
    if not ok:
        print(f"no window: {a.get('why_none') or [w.get('why_none') for w in a.get('windows', [])]}")
        return 1
    w = ok[-1]
    cats = {c["category"]: c for c in w["categories"]}
    print(f"{truth['lib']}: window {w['seq']} at {w['asked_at_s']} s, {w['wall_s']} s, GPU busy "
          f"{w.get('gpu_busy_share')}, {w['kernel_count']} kernels; truth by {truth['method']}")
    print(f"{'category':<14}{'expected':>10}{'window':>10}{'diff':>8}{'kernels':>9}{'per iter*':>11}")
    gemm_n = (cats.get("GEMM/conv") or {}).get("count") or 0
    for cat, exp in sorted(truth["expected_share"].items(), key=lambda kv: -kv[1]):
        c = cats.get(cat) or {"share": 0.0, "count": 0}
        ratio = c["count"] / gemm_n if gemm_n else None
        print(f"{cat:<14}{100 * exp:>9.1f}%{100 * c['share']:>9.1f}%{100 * (c['share'] - exp):>+7.1f}"
              f"{c['count']:>9}{ratio if ratio is None else round(ratio, 2):>11}")
    for cat, c in cats.items():
        if cat not in truth["expected_share"]:
            print(f"{cat:<14}{'-':>10}{100 * c['share']:>9.1f}%{'':>8}{c['count']:>9}   (not in the program's ops)")
    print("* kernels per GEMM kernel; calls per iteration by construction:", truth["calls_per_iteration"])
    print("top kernels:", [(k["name"][:60], k["count"], k["category"]) for k in w["top_kernels"][:6]])
    bins = truth["iterations_per_s_bins"][1:-1]  # whole seconds
    if bins:
        print(f"iterations per second over the loop: min {min(bins)}, median {sorted(bins)[len(bins) // 2]}, "
              f"max {max(bins)} (bins: {bins})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("cupy", "jax", "compare"))
    ap.add_argument("files", nargs="*", help="compare: DOC TRUTH")
    ap.add_argument("--seconds", type=float, default=14.0)
    ap.add_argument("--truth", default=None, help="write the ground truth (JSON) here")
    ap.add_argument("--own-profiler", metavar="DIR", default=None,
                    help="jax: run the loop under jax.profiler.start_trace(DIR) (CUPTI held by the program)")
    a = ap.parse_args()
    if a.what == "compare":
        if len(a.files) != 2:
            ap.error("compare DOC TRUTH")
        return compare(*a.files)
    if a.own_profiler and a.what != "jax":
        ap.error("--own-profiler goes with jax")
    run(a.what, a.seconds, a.truth, a.own_profiler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
