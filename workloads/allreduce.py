"""allreduce: how fast GPUs can sum a tensor together, and what that costs a data-parallel training step.

Data-parallel training (DDP) keeps one copy of the model per GPU; after each backward pass every copy
must hold the *sum* of all the gradients. That sum is an **all-reduce**, a collective: every rank gives a
buffer of S bytes and gets back the element-wise sum. This script measures it in two phases:

  bus bandwidth   all-reduce of 4 KB .. 1 GB messages. nccl-tests' definitions (doc/PERFORMANCE.md):
                    algbw = S / t                     (what the application sees)
                    busbw = algbw * 2(n-1)/n          (what each link carries: a ring all-reduce sends
                                                       and receives 2(n-1)/n * S bytes per rank)
                  busbw is comparable with the peak of the link that joins the GPUs (NVLink or PCIe, as
                  NVML reports it). Small messages are **latency-bound**: a fixed cost per call (launch,
                  handshakes, a few microseconds) dominates. Large ones are **bandwidth-bound**: busbw
                  approaches the link's peak.
  ddp step        the same small MLP trained for a few steps three ways:
                    compute only   backward with no gradient all-reduce (the floor: what one GPU costs)
                    overlap        torch DDP as shipped: gradients are all-reduced in 25 MB buckets *while*
                                   backward still computes the earlier layers' gradients
                    no overlap     backward first (``no_sync``), then one all-reduce of every gradient
                  exposed communication = step time - compute-only step time: the part of the all-reduce
                  the GPU waited for. A step is **comms-bound** when that part is a large share of it.

How it runs: ``torchrun`` starts one copy of this script per GPU (``python -m torch.distributed.run
--nproc-per-node N allreduce.py``); each copy is a *rank*, and they find each other through a store on
localhost. Run it as a plain script and it starts torchrun itself, one rank per visible GPU, with the
NCCL backend. ``--device cpu`` runs 2 ranks on the CPU with the gloo backend instead (slow, but the same
code paths: it is how gputop's CI exercises this workload). One GPU is not enough: the script says so and
exits 2.

Run it: ``python workloads/allreduce.py`` (or ``--device cpu --quick``), or ``gputop --run allreduce``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import statistics
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:  # run as a script from a checkout:
    sys.path.insert(0, str(_CHECKOUT))  # its own gputop first, whatever else is installed

from gputop.analysis.verdict import display_name
from gputop.telemetry.devices import multicast_off
from gputop.workload import Param, ParamError, device_param, main, require_torch
from gputop.workload.util import analyzed, link_facts, torch_device

NAME = "allreduce"
DESCRIPTION = "all-reduce across GPUs (torchrun): bus bandwidth vs message size, DDP step with/without overlap"
NEEDS = ["torch"]
TIMEOUT = 600
GPUS = "all"  # gputop makes every GPU visible to it (torchrun starts one rank per GPU)

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
SIZES = [4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB, 1 * GB]
MODES = ["compute only", "overlap", "no overlap"]
LAUNCHER_PID = "GPUTOP_ALLREDUCE_TORCHRUN_PID"
PARAMS = [
    device_param("cuda: NCCL, one rank per GPU; cpu: gloo"),
    Param("nproc", "int", 0, lo=0, hi=1024, help="ranks (0: one per visible GPU; 2 on the CPU)"),
    Param("sizes", "int_list", SIZES, lo=4, hi=8 * GB, help="all-reduce message sizes in bytes (float32)"),
    Param("iters", "int", 20, lo=1, hi=100000, help="timed all-reduces per size"),
    Param("warmup", "int", 5, lo=0, hi=1000, help="untimed all-reduces per size first"),
    Param("width", "int", 4096, lo=8, hi=65536, help="the DDP model: width of each linear layer"),
    Param("layers", "int", 8, lo=1, hi=256, help="the DDP model: linear layers"),
    Param("batch", "int", 64, lo=1, hi=1 << 20, help="the DDP model: samples per rank per step"),
    Param("steps", "int", 20, lo=1, hi=100000, help="timed DDP steps per mode"),
]
QUICK = {"sizes": [4 * KB, 64 * KB, 1 * MB, 16 * MB, 256 * MB], "iters": 10, "warmup": 2, "steps": 8}
CPU = {"nproc": 2, "sizes": [4 * KB, 64 * KB, 1 * MB], "iters": 5, "warmup": 1, "width": 256, "layers": 4,
       "batch": 16, "steps": 4}


# -- 1. the launcher: this script, started by hand or by gputop, starts torchrun --------------------------

def launch(p: dict) -> None:
    """Replace this process with ``torchrun --nproc-per-node N <this script> <the same arguments>``.

    exec keeps the pid, so whoever started us (gputop's supervisor) now supervises torchrun itself."""
    n = p["nproc"]
    if n == 1:
        raise ParamError("nproc must be at least 2: an all-reduce needs two ranks")
    if p["device"] == "cuda":
        have = require_torch().cuda.device_count()  # (this process is replaced below: no CUDA context stays)
        if have < 2:
            raise ParamError(f"allreduce needs at least 2 GPUs (this machine shows {have}); "
                             "try --device cpu for 2 ranks on the CPU")
        if n > have:
            raise ParamError(f"nproc={n} but only {have} GPUs are visible")
        n = n or have
    n = n or 2
    env = multicast_off(dict(os.environ))  # NVLink multicast stays off (NCCL, symmetric memory, NVSHMEM)
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set anyway, without its warning
    env[LAUNCHER_PID] = str(os.getpid())  # torchrun's pid after the exec: the ranks' parent (die_with_parent)
    argv = [sys.executable, "-u", "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
            str(Path(__file__).resolve()), *sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def die_with_parent() -> None:
    """torchrun starts each rank in a session of its own, so a kill aimed at torchrun's process group misses
    the ranks. Ask Linux to SIGKILL this rank when its parent (torchrun) dies, however it dies."""
    if sys.platform.startswith("linux"):
        parent = int(os.environ.get(LAUNCHER_PID) or os.getppid())
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # torchrun died before the line above
            os._exit(1)


def stop_only_when_agreed(emit) -> None:
    """A stop (SIGINT, SIGTERM) only *asks* a rank to stop; the ranks leave together at the next
    ``agree_to_stop``. torchrun passes a stop on to its ranks one after the other: on a busy machine the
    first may already have stopped the second through an agreement when the second's own signal lands.
    For a script run by hand a second Ctrl-C means "stop now" (KeyboardInterrupt), but a rank that left on
    its own, in the middle of a collective, would leave the other waiting forever. (If a rank never gets
    to an agreement, torchrun kills it after its own grace period.)"""

    def ask(signum, frame):
        emit.stop_requested = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, ask)


def quiet(emit) -> None:
    """Ranks other than 0 keep their output to themselves: only rank 0 speaks for the job (errors and
    warnings of every rank still go to stderr)."""
    emit.events = False
    emit.report = False  # rank 0 reports the job's results (and, under gputop, sends its events)
    emit.stream = open(os.devnull, "w")


# -- 2. one rank ----------------------------------------------------------------------------------------

def agree_to_stop(torch, dist, emit, dev) -> bool:
    """True when any rank was asked to stop: every rank must leave at the same point, or the others would
    wait forever in their next collective."""
    flag = torch.tensor([1.0 if emit.should_stop() else 0.0], device=dev)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item():
        emit.stop_requested = True  # every rank now stops, and ends as interrupted
    return bool(flag.item())


def slowest(torch, dist, seconds: float, dev) -> float:
    """The slowest rank's time: a collective (and a step) is done when its last rank is."""
    t = torch.tensor([seconds], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def time_allreduce(torch, dist, buf, iters: int, warmup: int, sync) -> float:
    """Mean seconds of one all-reduce of ``buf`` (after ``warmup`` untimed ones)."""
    import time

    for _ in range(warmup):
        dist.all_reduce(buf)
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    sync()
    return (time.perf_counter() - t0) / iters


def sweep(torch, dist, p, emit, dev, sync, world: int) -> list[dict]:
    """Phase 1: busbw vs message size."""
    emit.phase("bus bandwidth")
    points = []
    for i, size in enumerate(p["sizes"]):
        if agree_to_stop(torch, dist, emit, dev):
            break
        buf = torch.zeros(max(1, size // 4), dtype=torch.float32, device=dev)  # zeros: the sum never overflows
        t = slowest(torch, dist, time_allreduce(torch, dist, buf, p["iters"], p["warmup"], sync), dev)
        algbw = buf.numel() * 4 / t
        points.append({"phase": "bus bandwidth", "busbw_gbps": algbw * 2 * (world - 1) / world / 1e9,
                       "algbw_gbps": algbw / 1e9, "size_bytes": buf.numel() * 4, "time_us": t * 1e6})
        emit.point(points[-1])
        emit.progress(i + 1, len(p["sizes"]), f"{size} bytes")
        del buf
    return points


def ddp_steps(torch, dist, p, emit, dev, sync, world: int) -> list[dict]:
    """Phase 2: one DDP training step, with and without overlap of the gradient all-reduce and backward."""
    import time

    from torch.nn.parallel import DistributedDataParallel as DDP

    emit.phase("ddp step")
    torch.manual_seed(0)
    nn = torch.nn
    layers = [m for _ in range(p["layers"]) for m in (nn.Linear(p["width"], p["width"]), nn.ReLU())]
    model = nn.Sequential(*layers).to(dev)
    ddp = DDP(model, device_ids=[dev] if dev.type == "cuda" else None)  # 25 MB buckets: overlap
    params = [q for q in model.parameters() if q.requires_grad]
    grad_bytes = sum(q.numel() * q.element_size() for q in params)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(p["batch"], p["width"], device=dev)

    def step(mode: str) -> None:
        opt.zero_grad(set_to_none=True)
        if mode == "overlap":  # DDP's hooks all-reduce each bucket as soon as its gradients are ready
            ddp(x).square().mean().backward()
        else:
            with ddp.no_sync():  # no hooks: backward computes every gradient and communicates nothing
                ddp(x).square().mean().backward()
            if mode == "no overlap":  # then one all-reduce of every gradient: nothing left to hide it behind
                flat = torch.cat([q.grad.reshape(-1) for q in params])
                dist.all_reduce(flat)
                flat /= world
                offset = 0
                for q in params:
                    q.grad.copy_(flat[offset:offset + q.numel()].view_as(q.grad))
                    offset += q.numel()
        opt.step()

    # the all-reduce alone, of the same bytes: how much communication each step has to hide
    comm = slowest(torch, dist, time_allreduce(torch, dist, torch.zeros(grad_bytes // 4, device=dev),
                                               max(2, p["iters"]), 1, sync), dev)
    times, points = {}, []
    for i, mode in enumerate(MODES):
        if agree_to_stop(torch, dist, emit, dev):
            break
        step(mode)  # warm-up (the first DDP step also builds its buckets)
        per_step = []
        for _ in range(p["steps"]):
            if agree_to_stop(torch, dist, emit, dev):  # (outside the timed part)
                return points
            sync()
            t0 = time.perf_counter()
            step(mode)
            sync()
            per_step.append(time.perf_counter() - t0)
        times[mode] = slowest(torch, dist, statistics.median(per_step), dev)
        exposed = max(0.0, times[mode] - times["compute only"])  # the part of the step spent waiting on comms
        hidden = 100.0 * (1 - min(exposed, comm) / comm) if comm > 0 and mode != "compute only" else None
        points.append({"phase": "ddp step", "mode": mode, "step_ms": times[mode] * 1e3,
                       "exposed_comm_ms": exposed * 1e3, "comm_ms": comm * 1e3, "grad_bytes": grad_bytes,
                       "exposed_share": exposed / times[mode], "hidden_pct": hidden})
        emit.point(points[-1])
        emit.progress(i + 1, len(MODES), mode)
    return points


def run(p: dict, emit) -> None:
    if "LOCAL_RANK" not in os.environ:  # started by hand or by gputop: start torchrun (never returns)
        launch(p)
    die_with_parent()
    stop_only_when_agreed(emit)
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if rank != 0:
        quiet(emit)
    torch = require_torch()
    import torch.distributed as dist

    if p["device"] == "cuda":  # rank r on GPU r, talking through NCCL
        torch.cuda.set_device(local)
        dev, backend, sync = torch.device("cuda", local), "nccl", torch.cuda.synchronize
        props = torch.cuda.get_device_properties(dev)
        info = {"kind": "cuda", "name": props.name, "torch": torch.__version__, "cuda": torch.version.cuda}
    else:  # every rank on the CPU, talking through gloo
        dev, backend, sync = torch.device("cpu"), "gloo", (lambda: None)
        info = torch_device(torch, "cpu")[1]
    dist.init_process_group(backend, device_id=dev if p["device"] == "cuda" else None)
    try:
        emit.started(NAME, p, {**info, "world_size": world, "backend": backend})
        if p["device"] == "cuda" and rank == 0:  # what joins GPUs 0 and 1, as NVML says (NVLink or PCIe)
            uuids = ["GPU-" + str(torch.cuda.get_device_properties(i).uuid) for i in range(min(2, world))]
            emit.result({"link": link_facts(uuids)})
        sizes = sweep(torch, dist, p, emit, dev, sync, world)
        # (agreed, not this rank's own flag: a rank that skipped the DDP phase alone would leave the other
        # waiting in its first collective)
        steps = [] if agree_to_stop(torch, dist, emit, dev) else ddp_steps(torch, dist, p, emit, dev, sync, world)
        say_verdicts(emit, sizes, steps)
        # every rank leaves here, at the end or at an agreed stop: wait until all are here before any
        # closes its connections (a rank that closes them while another is still finishing its last
        # collective breaks that collective: "Connection reset by peer")
        dist.barrier()
    finally:
        dist.destroy_process_group()


# -- 3. the verdicts, in words at the end of a run by hand (gputop judges the run document: lessons/allreduce) --

def say_verdicts(emit, sizes: list[dict], steps: list[dict]) -> None:
    """What the numbers mean, in words (rank 0 of a run by hand): the verdicts gputop gives the run document
    (:mod:`gputop.lessons.allreduce`), one per message size, then the DDP step's."""
    if emit.events:
        return
    doc = analyzed(NAME, {"points": [dict(q) for q in sizes + steps], "phases": [{"name": "ddp step"}]})
    verdicts = [q["verdict"] for q in doc["points"] if q.get("verdict")]
    for v in verdicts + [ph["verdict"] for ph in doc["phases"] if ph.get("verdict")]:
        emit.log(f"{display_name(v)}: {v['evidence_text']}")


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
