"""dataloader: a GPU starved by its input pipeline, and the fixes that feed it.

A small CNN trains on a synthetic image dataset whose per-sample CPU transform is deliberately
heavy: real NumPy work (an FFT blur and a histogram equalisation by ranking, repeated), calibrated
at start to cost about ``transform_ms`` per sample on this CPU. Four phases, same model and data:

  1. workers=0      the transform runs in the training loop itself, batches in pageable memory
  2. workers=N      N DataLoader worker processes transform in parallel
  3. +pin           pin_memory=True and .to(non_blocking=True): page-locked batches, async copy
  4. +persistent    persistent_workers=True and a deeper prefetch_factor: no worker restart per epoch

Each step is split, as measured in the loop, into data wait (time blocked in ``next(iter)``, host
clock), H2D copy (CUDA events around ``.to(device)``) and compute (CUDA events around forward,
backward and the optimizer step). The workers' CPU is read with psutil over this process's
children. Seed 003's advice table: high DataLoader time -> raise num_workers; slow
cudaMemcpyAsync -> pin_memory.

Run it: ``python workloads/dataloader.py`` (or ``--device cpu --quick``), or ``gputop --run dataloader``.
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import sys
import time
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

import numpy as np

from gputop.workload import Param, device_param, main, require_torch
from gputop.workload.util import noise_check, small_cnn, stats, tf32_flags, torch_device

NAME = "dataloader"
DESCRIPTION = "GPU starvation by the input pipeline: num_workers, pin_memory, persistent workers"
NEEDS = ["torch"]
TIMEOUT = 600


def default_workers() -> int:
    return max(1, min(8, (os.cpu_count() or 2) - 1))


PARAMS = [
    device_param("where the model trains"),
    Param("workers", "int", default_workers(), lo=1, hi=64,
          help="num_workers of phases 2-4 (default min(8, CPUs - 1))"),
    Param("batch", "int", 64, lo=1, hi=4096, help="samples per batch"),
    Param("size", "int", 64, lo=8, hi=512, help="image side: a sample is 3 x size x size float32"),
    Param("transform_ms", "float", 1.0, lo=0.0, hi=1000.0,
          help="CPU cost of one sample's transform, calibrated into FFT/rank passes at start"),
    Param("dataset", "int", 4096, lo=1, hi=10_000_000, help="samples per epoch"),
    Param("width", "int", 96, lo=1, hi=1024, help="channels of the CNN's first layer"),
    Param("seconds", "float", 6.0, lo=0.1, hi=3600.0, help="measured time per phase"),
    Param("warmup", "int", 3, lo=0, hi=1000, help="steps per phase before the clock starts"),
    Param("prefetch", "int", 4, lo=1, hi=64, help="prefetch_factor of phase 4 (PyTorch's default is 2)"),
    Param("seed", "int", 0, lo=0, help="seed of the data and the model"),
]
QUICK = {"seconds": 1.0, "dataset": 1024, "warmup": 2}
CPU = {"workers": 2, "batch": 8, "size": 16, "transform_ms": 2.0, "dataset": 256, "width": 8,
       "seconds": 0.6, "warmup": 1}

CLASSES = 10


# -- the dataset: real CPU work per sample ------------------------------------------------------------

def heavy_transform(x: np.ndarray, passes: int) -> np.ndarray:
    """``passes`` x (FFT low-pass blur, then histogram equalisation by ranking), then standardise."""
    h, w = x.shape[-2:]
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    lowpass = np.exp(-(fy ** 2 + fx ** 2) / (2 * 0.15 ** 2)).astype(np.float32)
    flat_n = h * w
    for _ in range(passes):
        x = np.fft.irfft2(np.fft.rfft2(x) * lowpass, s=(h, w)).astype(np.float32)
        ranks = np.argsort(np.argsort(x.reshape(x.shape[0], -1), axis=1), axis=1)
        x = (ranks.astype(np.float32) / flat_n - 0.5).reshape(x.shape)
    return (x - x.mean()) / (x.std() + 1e-6)


class SyntheticImages:
    """A map-style dataset: sample ``i`` is a seeded random 3 x size x size image, transformed."""

    def __init__(self, n: int, size: int, passes: int, seed: int):
        self.n, self.size, self.passes, self.seed = n, size, passes, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        rng = np.random.default_rng((self.seed, i))
        x = rng.standard_normal((3, self.size, self.size), dtype=np.float32)
        x = heavy_transform(x, self.passes).astype(np.float32)
        return x, int(i % CLASSES)


def calibrate(size: int, target_ms: float, seed: int) -> dict:
    """How many transform passes cost ``target_ms`` per sample here, and what a sample then costs."""
    probe = SyntheticImages(8, size, 0, seed)
    base = _ms_per_sample(probe)
    probe.passes = 1
    one = max(_ms_per_sample(probe) - base, 1e-3)
    passes = max(0, round((target_ms - base) / one)) if target_ms > 0 else 0
    probe.passes = passes
    measured = _ms_per_sample(probe)
    if passes and measured > base:  # one correction: a pass costs a little less in a longer chain
        passes = max(1, round(passes * (target_ms - base) / (measured - base)))
        probe.passes = passes
        measured = _ms_per_sample(probe)
    return {"passes": passes, "ms_per_sample": measured, "ms_per_pass": (measured - base) / passes if passes else one,
            "generate_ms": base, "target_ms": target_ms}


def _ms_per_sample(ds: SyntheticImages, rounds: int = 3) -> float:
    best = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(len(ds)):
            ds[i]
        best = min(best, (time.perf_counter() - t0) / len(ds) * 1e3)
    return best


# -- the workers' CPU -----------------------------------------------------------------------------

def cpu_seconds() -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's): DataLoader workers are joined when the
    loader goes away, and then the kernel adds their CPU time to the parent's children times."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def shm_fit(workers: int, prefetch: int, batch_bytes: int, free_bytes: int | None) -> tuple[int, int]:
    """(workers, prefetch) that fit in /dev/shm: workers hand batches over through shared memory, and
    workers x prefetch_factor batches are in flight (twice that is kept as a margin). A container's
    /dev/shm is often only 64 MB; past it the workers die with a bus error."""
    if not free_bytes:
        return workers, prefetch
    slots = int(0.8 * free_bytes // (2 * batch_bytes))
    workers = max(1, min(workers, slots // 2))  # phases 2-3 use PyTorch's default prefetch_factor=2
    prefetch = max(1, min(prefetch, slots // workers))
    return workers, prefetch


def shm_free() -> int | None:
    try:
        return shutil.disk_usage("/dev/shm").free
    except OSError:
        return None


# -- the measured loop ------------------------------------------------------------------------------

PHASES = [
    # name, workers?, pin_memory + non_blocking, persistent + prefetch
    ("workers=0", False, False, False),
    ("workers=N", True, False, False),
    ("+pin_memory", True, True, False),
    ("+persistent", True, True, True),
]


def run(p: dict, emit) -> None:
    torch = require_torch()
    import multiprocessing as mp

    dev, info = torch_device(torch, p["device"])
    cuda = dev.type == "cuda"
    torch.manual_seed(p["seed"])
    info["cpus"] = os.cpu_count()
    if not cuda:  # the model trains on the cores the workers leave free, the same in every phase
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - p["workers"]))
        info["threads"] = torch.get_num_threads()
    emit.started(NAME, p, info)

    emit.log(f"calibrating the transform to ~{p['transform_ms']:g} ms per sample ...")
    cal = calibrate(p["size"], p["transform_ms"], p["seed"])
    batch_ms = cal["ms_per_sample"] * p["batch"]
    emit.result({"transform": {**cal, "batch_ms_one_core": batch_ms,
                               "work": "per sample: seeded normal image, then passes x (FFT low-pass blur + "
                                       "histogram equalisation by double argsort)"},
                 "tf32_flags": tf32_flags(torch), "cpus": os.cpu_count()})
    emit.log(f"transform: {cal['passes']} passes, {cal['ms_per_sample']:.2f} ms/sample, "
             f"{batch_ms:.1f} ms per batch of {p['batch']} on one core")

    batch_bytes = p["batch"] * (3 * p["size"] ** 2 * 4 + 8)
    free = shm_free()
    workers, prefetch = shm_fit(p["workers"], p["prefetch"], batch_bytes, free)
    if (workers, prefetch) != (p["workers"], p["prefetch"]):
        emit.warning(f"/dev/shm has {free / 1e6:.0f} MB free, too little for {p['workers']} workers x "
                     f"prefetch {p['prefetch']} of {batch_bytes / 1e6:.1f} MB batches: using {workers} workers, "
                     f"prefetch {prefetch}", code="shm_small")
        p = {**p, "workers": workers, "prefetch": prefetch}
    ds = SyntheticImages(p["dataset"], p["size"], cal["passes"], p["seed"])
    model = small_cnn(torch, p["width"], CLASSES).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    # warm the GPU (cuDNN algorithm choice, allocator) before any phase
    xw = torch.randn(p["batch"], 3, p["size"], p["size"], device=dev)
    yw = torch.randint(0, CLASSES, (p["batch"],), device=dev)
    for _ in range(3):
        train_step(xw, yw)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    del xw, yw

    ctx = "fork" if "fork" in mp.get_all_start_methods() else None  # cheap worker start, as on Linux
    points = []
    for k, (label, use_workers, pin, persistent) in enumerate(PHASES):
        if emit.should_stop():
            break
        workers = p["workers"] if use_workers else 0
        name = label.replace("N", str(workers)) if use_workers else label
        opts = {"num_workers": workers, "pin_memory": bool(pin and cuda), "non_blocking": bool(pin and cuda),
                "persistent_workers": bool(persistent and workers),
                "prefetch_factor": (p["prefetch"] if persistent else 2) if workers else None}
        emit.progress(k, len(PHASES), name)
        emit.phase(name)
        pt = measure_phase(torch, dev, ds, p, opts, ctx, train_step, emit)
        pt = {"phase": name, **pt}
        if pin and not cuda:
            pt["note"] = "pin_memory and non_blocking have no effect on the CPU device"
        points.append(pt)
        emit.point(pt)
    emit.progress(len(PHASES), len(PHASES), "done")
    if points:
        emit.result(summarize(points, batch_ms))


def measure_phase(torch, dev, ds, p, opts, ctx, train_step, emit) -> dict:
    cuda = dev.type == "cuda"
    workers = opts["num_workers"]
    kw = {}
    if workers:
        kw = {"persistent_workers": opts["persistent_workers"], "prefetch_factor": opts["prefetch_factor"],
              "multiprocessing_context": ctx}
    gen = torch.Generator().manual_seed(p["seed"])
    loader = torch.utils.data.DataLoader(ds, batch_size=p["batch"], shuffle=True, drop_last=len(ds) >= p["batch"],
                                         num_workers=workers, pin_memory=opts["pin_memory"], generator=gen, **kw)
    nb = opts["non_blocking"]
    own0, kids0 = cpu_seconds()
    t_open = time.perf_counter()
    it = iter(loader)
    restarts = 0
    waits, events, host_compute = [], [], []
    losses = []
    step = 0
    t_start = None
    while True:
        if t_start is None and step >= p["warmup"]:  # warm-up done: start the clock
            if cuda:
                torch.cuda.synchronize()
            t_start, restarts = time.perf_counter(), 0
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:  # a new epoch: without persistent workers, new worker processes
            it = iter(loader)
            restarts += 1
            x, y = next(it)
        t1 = time.perf_counter()
        if cuda:
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            x = x.to(dev, non_blocking=nb)
            y = y.to(dev, non_blocking=nb)
            e[1].record()
            loss = train_step(x, y)
            e[2].record()
        else:
            loss = train_step(x, y)
        t2 = time.perf_counter()
        step += 1
        if t_start is None:
            continue
        waits.append(t1 - t0)
        losses.append(loss)
        if cuda:
            events.append(e)
        else:
            host_compute.append(t2 - t1)
        if time.perf_counter() - t_start >= p["seconds"] or emit.should_stop():
            break
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t_start
    del it, loader  # joins the workers
    gc.collect()
    own1, kids1 = cpu_seconds()
    window = time.perf_counter() - t_open  # the CPU figures cover the whole phase, warm-up included

    steps = len(waits)
    if cuda:
        h2d = [a.elapsed_time(b) / 1e3 for a, b, _ in events]
        comp = [b.elapsed_time(c) / 1e3 for _, b, c in events]
    else:
        h2d = [0.0] * steps
        comp = host_compute
    noise = noise_check(emit, f"compute time per step ({opts['num_workers']} workers)", comp)
    final_loss = float(torch.stack(losses[-5:]).float().mean()) if losses else None
    ms = lambda v: 1e3 * sum(v) / max(1, steps)  # noqa: E731
    pct = lambda v: 100.0 * sum(v) / wall if wall > 0 else None  # noqa: E731
    return {
        "samples_per_s": steps * p["batch"] / wall if wall > 0 else None,
        "step_ms": 1e3 * wall / max(1, steps),
        "data_wait_ms": ms(waits), "h2d_ms": ms(h2d), "compute_ms": ms(comp),
        "data_wait_pct": pct(waits), "h2d_pct": pct(h2d), "compute_pct": pct(comp),
        "worker_cpu_pct": 100.0 * (kids1 - kids0) / window,
        "main_cpu_pct": 100.0 * (own1 - own0) / window,
        "num_workers": opts["num_workers"], "pin_memory": opts["pin_memory"],
        "non_blocking": opts["non_blocking"], "persistent_workers": opts["persistent_workers"],
        "prefetch_factor": opts["prefetch_factor"],
        "steps": steps, "epoch_restarts": restarts, "wall_s": wall, "compute_rms_pct": noise["rms_pct"],
        "loss": final_loss,
        "timing": "data wait: host clock around next(iter); h2d and compute: CUDA events"
                  if cuda else "data wait and compute: host clock (CPU device)",
    }


def summarize(points: list[dict], batch_ms_one_core: float) -> dict:
    """Speed-up of each phase over the first, and how many workers would keep the model fed."""
    base = points[0]["samples_per_s"] or None
    best = max(points, key=lambda q: q["samples_per_s"] or 0)
    compute_ms = stats(q["compute_ms"] for q in points)["min"] or None
    need = math.ceil(batch_ms_one_core / compute_ms) if compute_ms else None
    return {"speedup_vs_workers0": {q["phase"]: (q["samples_per_s"] / base if base else None) for q in points},
            "best_phase": best["phase"], "best_samples_per_s": best["samples_per_s"],
            "workers_to_keep_up": need,
            "workers_to_keep_up_how": "one core's transform time per batch / the model's compute time per step"}


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
