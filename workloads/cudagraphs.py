"""cudagraphs: launch overhead, and CUDA graphs that remove it.

A port of the seed's listings 1 and 2 (kernels/cudagraphs.cu, loaded with CuPy's RawModule):
``shortKernel`` on N = 50000 floats, NSTEP x NKERNEL launches per run, in four modes:

  naive        synchronize after every launch
  interleaved  launch NKERNEL kernels back to back, synchronize once per step
  graph        capture the NKERNEL launches into a CUDA graph once, replay it once per step
  pipes        8 graphs (each on its own buffers) in flight on one stream, gated by events (listing 2)

Each mode reports microseconds per kernel. The kernel's own run time is measured apart: CUDA events
around a single launch queued behind a spin kernel (so the GPU, not the host, sets the pace), minus
the same two events around nothing, median of many. A kernel that runs for ~2 us but costs 10+ us
to launch and synchronize is launch-bound; NVIDIA's V100 figures for this program were 9.6 / 3.8 /
3.4 us per kernel (sync each / back to back / graph).

A PyTorch part does the same for a model: the seed's MNIST-X, an MLP of X dense layers trained at a
small batch, eager vs one ``torch.cuda.CUDAGraph`` replay per training step.

Run it: ``python workloads/cudagraphs.py`` (needs cupy and torch), or ``gputop --run cudagraphs``.
On ``--device cpu`` the GPU modes are skipped (reported as skipped) and the MLP runs eagerly.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.lessons.cudagraphs import MODES, V100_REFERENCE_US  # the modes its lesson judges
from gputop.workload import Param, device_param, main, require_cupy, require_torch
from gputop.workload.util import noise_check, torch_device

NAME = "cudagraphs"
DESCRIPTION = "launch overhead: naive / interleaved / graph / pipes launches of a tiny kernel; MLP eager vs graph"
NEEDS = ["cupy", "torch"]
TIMEOUT = 300

PARAMS = [
    device_param("cuda: all parts; cpu: the MLP eagerly only"),
    Param("n", "int", 50000, lo=1, hi=1 << 28, help="floats per kernel (the seed's N)"),
    Param("nstep", "int", 200, lo=1, hi=1_000_000, help="steps per run (the seed's NSTEP is 1000)"),
    Param("nkernel", "int", 100, lo=1, hi=100_000, help="kernels per step (the seed's NKERNEL is 1000)"),
    Param("threads", "int", 512, lo=32, hi=1024, help="threads per block"),
    Param("pipes", "int", 8, lo=1, hi=64, help="graphs in flight in the pipes mode"),
    Param("min_seconds", "float", 1.0, lo=0.0, hi=600.0, help="each mode repeats its run for at least this long"),
    Param("repeats", "int", 3, lo=1, hi=10000, help="and at least this many times"),
    Param("samples", "int", 200, lo=3, hi=100000, help="single launches timed for the kernel's own run time"),
    Param("mlp_layers", "int_list", [2, 8, 32], lo=1, hi=1000, help="dense layers of the MLPs (MNIST-X)"),
    Param("mlp_width", "int", 512, lo=1, hi=16384, help="hidden width of the MLP"),
    Param("mlp_batch", "int", 32, lo=1, hi=65536, help="MLP batch (small: the point is the per-step overhead)"),
    Param("mlp_seconds", "float", 1.0, lo=0.0, hi=600.0, help="timed seconds per MLP mode"),
    Param("seed", "int", 0, lo=0, help="seed of the MLP and its data"),
]
QUICK = {"nstep": 50, "min_seconds": 0.3, "samples": 50, "mlp_layers": [2, 16], "mlp_seconds": 0.3}
CPU = {"mlp_layers": [2, 8], "mlp_width": 64, "mlp_batch": 8, "mlp_seconds": 0.2}

MNIST_IN, MNIST_CLASSES = 784, 10


def run(p: dict, emit) -> None:
    cuda = p["device"] == "cuda"
    if cuda:
        require_cupy()
    torch = require_torch()
    _, info = torch_device(torch, p["device"])
    results: dict = {"v100_reference_us_per_kernel": V100_REFERENCE_US}
    if cuda:
        import cupy as cp

        info["cupy"] = cp.__version__
    emit.started(NAME, p, info)
    if cuda:
        results.update(kernel_modes(p, emit))
    else:
        for mode in ["kernel time"] + MODES:
            emit.point({"phase": mode, "part": "kernels", "mode": mode, "skipped": True,
                        "reason": "needs a CUDA GPU (cupy)"})
        emit.warning("the kernel-launch modes need a CUDA GPU: skipped on the CPU device", code="skipped")
    if not emit.should_stop():
        results["mlp"] = mlp_part(torch, p, emit)
    emit.result(results)


# -- part 1: the seed's listings with CuPy -------------------------------------------------------------

def kernel_modes(p: dict, emit) -> dict:
    import cupy as cp
    import numpy as np

    from gputop.paths import kernels_dir

    t0 = time.perf_counter()
    module = cp.RawModule(code=(kernels_dir() / "cudagraphs.cu").read_text())
    short = module.get_function("shortKernel")
    spin = module.get_function("spinKernel")
    compile_s = time.perf_counter() - t0
    n, nstep, nkernel = p["n"], p["nstep"], p["nkernel"]
    grid, block = ((n + p["threads"] - 1) // p["threads"],), (p["threads"],)
    stream = cp.cuda.Stream(non_blocking=True)
    bufs = [(cp.empty(n, cp.float32), cp.arange(n, dtype=cp.float32)) for _ in range(max(1, p["pipes"]))]
    args = [(dst, src, np.int32(n)) for dst, src in bufs]

    def launch(i=0):
        short(grid, block, args[i])

    out: dict = {"compile_s": compile_s}
    with stream:
        launch()
        stream.synchronize()
        emit.phase("kernel time")
        alone = kernel_alone(cp, np, stream, launch, spin, p["samples"], nkernel)
        check = float(bufs[0][0][7:8].get()[0])
        if abs(check - (1.23 * 7 + 4.0)) > 1e-3:
            emit.warning(f"shortKernel wrote {check}, expected {1.23 * 7 + 4.0}", code="wrong_result")
        pt = {"phase": "kernel time", "part": "kernels", "mode": "kernel alone", **alone}
        emit.point(pt)
        if not alone["spin_covered"]:
            emit.warning("the spin kernel ended before the host had queued the back-to-back launches: "
                         "back_to_back_us is host-paced", code="spin_short")
        kernel_us = alone["kernel_us"]
        out["kernel_us"] = kernel_us
        graphs = {}

        def naive():
            for _ in range(nstep):
                for _ in range(nkernel):
                    launch()
                    stream.synchronize()

        def interleaved():
            for _ in range(nstep):
                for _ in range(nkernel):
                    launch()
                stream.synchronize()

        def graph():
            g = graphs[0]
            for _ in range(nstep):
                g.launch(stream)
                stream.synchronize()

        def pipes():  # listing 2: launch graph i whenever its previous launch has finished
            events = [cp.cuda.Event(disable_timing=True) for _ in range(p["pipes"])]
            taken = [0] * p["pipes"]
            busy = True
            while busy:
                busy = False
                for i in range(p["pipes"]):
                    if taken[i] < nstep:
                        busy = True
                        if events[i].done:
                            taken[i] += 1
                            graphs[i].launch(stream)
                            events[i].record(stream)
            stream.synchronize()

        def capture(i: int):
            stream.begin_capture()
            for _ in range(nkernel):
                launch(i)
            return stream.end_capture()

        per_run = {"naive": nstep * nkernel, "interleaved": nstep * nkernel, "graph": nstep * nkernel,
                   "pipes": p["pipes"] * nstep * nkernel}
        fns = {"naive": naive, "interleaved": interleaved, "graph": graph, "pipes": pipes}
        us = {}
        for k, mode in enumerate(MODES):
            if emit.should_stop():
                break
            emit.progress(k, len(MODES) + len(p["mlp_layers"]), mode)
            emit.phase(mode)
            extra = {}
            if mode == "graph":
                c0 = time.perf_counter()
                graphs[0] = capture(0)
                stream.synchronize()
                extra["capture_ms"] = 1e3 * (time.perf_counter() - c0)
            if mode == "pipes":
                for i in range(1, p["pipes"]):
                    graphs[i] = capture(i)
            times = repeat(fns[mode], p["min_seconds"], p["repeats"], emit)
            per_kernel = [1e6 * t / per_run[mode] for t in times]
            noise = noise_check(emit, f"{mode}: us per kernel", per_kernel)
            us[mode] = statistics.median(per_kernel)
            pt = {"phase": mode, "part": "kernels", "mode": mode, "us_per_kernel": us[mode],
                  "kernel_us": kernel_us, "overhead_us": us[mode] - kernel_us,
                  "overhead_ratio": us[mode] / kernel_us if kernel_us > 0 else None,
                  "kernels_per_run": per_run[mode], "repeats": len(times), "rms_pct": noise["rms_pct"],
                  "seconds": sum(times), **extra}
            if mode in V100_REFERENCE_US:
                pt["v100_reference_us"] = V100_REFERENCE_US[mode]
            emit.point(pt)
    out["us_per_kernel"] = us
    if "naive" in us and "graph" in us:
        out["graph_speedup_vs_naive"] = us["naive"] / us["graph"]
    if "interleaved" in us and "graph" in us:
        out["graph_speedup_vs_interleaved"] = us["interleaved"] / us["graph"]
    return out


def kernel_alone(cp, np, stream, launch, spin, samples: int, nkernel: int) -> dict:
    """The kernel's own run time, and back-to-back throughput, both paced by the GPU (see the docstring)."""
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()

    def timed(body, spin_cycles) -> float:
        spin((1,), (1,), (np.int64(spin_cycles),))
        e0.record(stream)
        body()
        e1.record(stream)
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1) * 1e3  # us

    cycles = 1 << 20  # calibrate the spin: SM cycles per microsecond at the clock it runs now
    spin_us = statistics.median(timed(lambda: spin((1,), (1,), (np.int64(cycles),)), 1000) for _ in range(5))
    per_us = cycles / spin_us
    short_spin = int(50 * per_us)  # 50 us: longer than queuing two events and a launch
    one = [timed(launch, short_spin) for _ in range(samples)]
    empty = [timed(lambda: None, short_spin) for _ in range(samples)]

    host = {}

    def burst():
        h0 = time.perf_counter()
        for _ in range(nkernel):
            launch()
        host["s"] = time.perf_counter() - h0

    long_spin_us = 30.0 * nkernel + 200.0
    b2b = [timed(burst, int(long_spin_us * per_us)) / nkernel for _ in range(5)]
    return {"kernel_us": statistics.median(one) - statistics.median(empty),
            "event_pair_us": statistics.median(empty), "single_launch_events_us": statistics.median(one),
            "back_to_back_us": statistics.median(b2b), "spin_cycles_per_us": per_us,
            "spin_covered": host["s"] * 1e6 < long_spin_us, "samples": samples,
            "method": "CUDA events around one launch queued behind a 50 us spin kernel, minus events around "
                      "nothing (median of samples); back_to_back_us: NKERNEL launches queued behind a longer "
                      "spin, event time / NKERNEL"}


def repeat(fn, min_seconds: float, min_repeats: int, emit) -> list[float]:
    """Wall seconds of each run of ``fn`` (which synchronizes at its end), after one warm-up run."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_repeats or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if emit.should_stop():
            break
    return times


# -- part 2: MNIST-X, eager vs CUDA graph ---------------------------------------------------------------

def make_mlp(torch, layers: int, width: int):
    """X dense layers with ReLU (784 -> width -> ... -> width), then a 10-way linear head."""
    nn = torch.nn
    mods, cin = [], MNIST_IN
    for _ in range(layers):
        mods += [nn.Linear(cin, width), nn.ReLU()]
        cin = width
    return nn.Sequential(*mods, nn.Linear(cin, MNIST_CLASSES))


def mlp_part(torch, p: dict, emit) -> dict:
    dev = torch.device("cuda" if p["device"] == "cuda" else "cpu")
    cuda = dev.type == "cuda"
    g = torch.Generator(device=dev).manual_seed(p["seed"])
    pool = [(torch.randn(p["mlp_batch"], MNIST_IN, device=dev, generator=g),
             torch.randint(0, MNIST_CLASSES, (p["mlp_batch"],), device=dev, generator=g)) for _ in range(8)]
    out = {}
    for k, layers in enumerate(p["mlp_layers"]):
        if emit.should_stop():
            break
        emit.progress(len(MODES) + k, len(MODES) + len(p["mlp_layers"]), f"mlp X={layers}")
        eager = time_mlp(torch, dev, p, layers, pool, graphed=False, emit=emit)
        res = out[str(layers)] = {"eager_ms": eager["step_ms"]}
        if cuda and not emit.should_stop():
            try:
                graph = time_mlp(torch, dev, p, layers, pool, graphed=True, emit=emit)
            except RuntimeError as exc:  # a capture this torch cannot do: report it, keep the rest
                emit.warning(f"mlp X={layers}: CUDA graph capture failed: {exc}", code="graph_failed")
                emit.point({"phase": f"mlp X={layers} graph", "part": "mlp", "layers": layers, "mode": "graph",
                            "skipped": True, "reason": f"capture failed: {str(exc)[:200]}"})
                continue
            graph["speedup_vs_eager"] = eager["step_ms"] / graph["step_ms"]
            res.update(graph_ms=graph["step_ms"], speedup=graph["speedup_vs_eager"])
            emit.point(graph)
        elif not cuda:
            emit.point({"phase": f"mlp X={layers} graph", "part": "mlp", "layers": layers, "mode": "graph",
                        "skipped": True, "reason": "torch.cuda.CUDAGraph needs a CUDA GPU"})
    return out


def time_mlp(torch, dev, p: dict, layers: int, pool, graphed: bool, emit) -> dict:
    cuda = dev.type == "cuda"
    mode = "graph" if graphed else "eager"
    torch.manual_seed(p["seed"])
    model = make_mlp(torch, layers, p["mlp_width"]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = pool[0][0].clone()
    y = pool[0][1].clone()

    def train():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if graphed:  # torch's whole-network capture recipe: warm up on a side stream, capture, replay
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                train()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            train()  # backward() writes fresh .grad tensors in every replay

        def step(i):
            x.copy_(pool[i % len(pool)][0])
            y.copy_(pool[i % len(pool)][1])
            graph.replay()
    else:
        def step(i):
            x.copy_(pool[i % len(pool)][0])
            y.copy_(pool[i % len(pool)][1])
            opt.zero_grad(set_to_none=True)
            train()

    emit.phase(f"mlp X={layers} {mode}")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for i in range(5):
        step(i)
    sync()
    t0 = time.perf_counter()
    probe = 10
    for i in range(probe):
        step(i)
    sync()
    per = (time.perf_counter() - t0) / probe
    budget = p["mlp_seconds"] / 3  # three timed chunks of about this long each
    chunk = max(1, int(budget / per)) if per > 0 else 1
    chunks, steps = [], 0
    for _ in range(3):
        t0 = time.perf_counter()
        n = 0
        while n < chunk:
            step(n)
            n += 1
            if time.perf_counter() - t0 > 2 * budget:  # the probe was optimistic (a busy host): cut the chunk
                break
        sync()  # the steps launched so far are done: the time per step counts all of them
        chunks.append(1e3 * (time.perf_counter() - t0) / n)
        steps += n
        if emit.should_stop():
            break
    noise = noise_check(emit, f"mlp X={layers} {mode}: ms per step", chunks)
    pt = {"phase": f"mlp X={layers} {mode}", "part": "mlp", "layers": layers, "mode": mode,
          "step_ms": statistics.median(chunks), "steps": steps, "rms_pct": noise["rms_pct"],
          "batch": p["mlp_batch"], "width": p["mlp_width"]}
    if not graphed:
        emit.point(pt)
    return pt


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
