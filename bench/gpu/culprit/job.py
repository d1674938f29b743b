"""A DDP job on every GPU of the machine (torchrun), healthy for --before seconds, then the fault of --case on rank
--culprit (the truth, written by bench/gpu/culprit_corpus_gpu.sh before gputop runs it: which rank, which kind):

  exit       the rank ends its process (its own clock said "done"): its peers wait in the next all-reduce
  sleep      the rank leaves the loop and sleeps in Python
  spin       the rank spins in a Python loop (a CPU core busy, its GPU idle)
  io         the rank blocks reading a FIFO nobody writes (I/O that never comes)
  lock       the rank blocks on a lock another of its threads holds
  op         the rank broadcasts where its peers all-reduce (a mismatched order)
  size       the rank all-reduces twice the elements its peers do
  nojoin     the rank never joins the process group (it sleeps before init_process_group): its peers block in
             NCCL's communicator set-up, their GPUs idle
  dataloader the rank's DataLoader worker blocks on one sample (its main process waits on the loader's queue)
  healthy    no fault: DDP steps for --seconds (no stall, no culprit)
  small      no fault, no DDP: a 4 KiB metric all-reduced and read on the host, again and again for --seconds
             (thousands of small synchronous collectives a second: latency, not bandwidth)

Each step: a forward and backward of an MLP under DistributedDataParallel (its gradient all-reduces), a metric
all-reduced and read on the host (``.item()``, as a training loop logs its loss). NVLink multicast stays off.

    torchrun --standalone --nproc-per-node G bench/gpu/culprit/job.py --case sleep --culprit 1 --before 10
"""

import argparse
import os
import tempfile
import threading
import time

for var, val in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    if os.environ.get(var) != val:
        raise SystemExit(f"{var} must be {val} (NVLink multicast stays off)")

ap = argparse.ArgumentParser()
ap.add_argument("--case", required=True)
ap.add_argument("--culprit", type=int, default=1)
ap.add_argument("--before", type=float, default=10.0, help="seconds of healthy steps before the fault")
ap.add_argument("--seconds", type=float, default=60.0, help="healthy: how long the job runs")
a = ap.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
me = rank == a.culprit
torch.cuda.set_device(local)
if a.case == "nojoin" and me:  # the fault: never joins (its peers wait for it in NCCL's set-up); its CUDA context
    torch.zeros(1, device="cuda")  # made first, as a rank that prepares its data on the GPU does: NVML lists it
    time.sleep(3600)
dist.init_process_group("nccl")


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 10**9

    def __getitem__(self, i):
        if a.case == "dataloader" and me and os.environ.get("GPUTOP_CORPUS_STUCK") and i >= 64:
            time.sleep(3600)  # the fault: one sample that never comes (a hung read from storage)
        return torch.randn(1024)


model = DDP(torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda())
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
loader = None
if a.case == "dataloader":
    if me:
        os.environ["GPUTOP_CORPUS_STUCK"] = "1"  # (the workers inherit it)
    loader = iter(torch.utils.data.DataLoader(Samples(), batch_size=64, num_workers=2))
metric = torch.zeros(16, device="cuda")


def step():
    x = next(loader).cuda() if loader is not None else torch.randn(64, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    metric.fill_(loss.detach())
    dist.all_reduce(metric)
    return metric[0].item()


def fault():
    if a.case == "exit":
        os._exit(0)
    if a.case == "sleep":
        time.sleep(3600)
    if a.case == "spin":
        n = 0
        while True:
            n += 1
    if a.case == "io":
        path = os.path.join(tempfile.mkdtemp(), "never")
        os.mkfifo(path)
        with open(path) as f:  # blocks: no writer ever comes
            f.read()
    if a.case == "lock":
        lock = threading.Lock()
        held = threading.Event()
        threading.Thread(target=lambda: (lock.acquire(), held.set(), time.sleep(3600)), daemon=True).start()
        held.wait()
        lock.acquire()  # blocks: its own thread holds it
    if a.case == "op":
        dist.broadcast(metric, 0)  # its peers all-reduce here
        return metric[0].item()
    if a.case == "size":
        bigger = torch.zeros(32, device="cuda")
        dist.all_reduce(bigger)  # its peers all-reduce 16 elements
        return bigger[0].item()


if a.case == "small":
    small, end = torch.zeros(1024, device="cuda"), time.monotonic() + a.seconds
    while time.monotonic() < end:  # (each rank on its own clock: they stop within a collective of each other)
        dist.all_reduce(small)
        small[0].item()
    dist.destroy_process_group()
    raise SystemExit(0)
end = time.monotonic() + (a.seconds if a.case == "healthy" else a.before)
stop = torch.zeros(1, device="cuda")
while True:  # the ranks agree when the healthy part ends (rank 0's clock)
    step()
    if rank == 0:
        stop.fill_(1.0 if time.monotonic() >= end else 0.0)
    dist.broadcast(stop, 0)
    if stop.item():
        break
if a.case == "healthy":
    dist.destroy_process_group()
    raise SystemExit(0)
print(f"rank {rank}: fault {a.case if me else '(none: a peer)'} at {time.time():.3f}", flush=True)
while True:  # the faulty rank does its fault; its peers go on, and wait for it
    if me and a.case != "dataloader":
        fault()
    step()
