"""dataloader_starved: a DataLoader with a heavy CPU transform and num_workers=0 (expected: input-starved).

Each sample is a 256x256 image run through FFTs and rankings on the CPU in the training process
itself (num_workers=0), so the GPU waits for every batch. The GPU step is real work (an MLP in bf16,
forward, backward and an SGD step, sized at start to take about a quarter of the batch's CPU time):
the GPU runs in bursts with idle gaps while the process's CPU stays busy.
"""

import time

import numpy as np

from _common import setup

torch, dev, args = setup(__doc__, seconds=12.0)
SIDE, BATCH = 256, 32


class Heavy(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = rng.standard_normal((SIDE, SIDE), dtype=np.float32)
        for _ in range(2):  # FFT blur and a histogram equalisation by ranking: real CPU work
            f = np.fft.rfft2(img)
            f[SIDE // 8:, :] = 0
            img = np.fft.irfft2(f, s=img.shape).astype(np.float32)
            img = (np.argsort(np.argsort(img, axis=None)).reshape(img.shape) / img.size).astype(np.float32)
        return torch.from_numpy(img)


loader = torch.utils.data.DataLoader(Heavy(), batch_size=BATCH, num_workers=0, pin_memory=False)
width = 8192
model = torch.nn.Sequential(torch.nn.Linear(SIDE * SIDE // 16, width), torch.nn.GELU(),
                            torch.nn.Linear(width, width), torch.nn.GELU(),
                            torch.nn.Linear(width, 1024)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)


def gpu_step(x, repeats):
    x = x.to(dev).reshape(BATCH * 16, SIDE * SIDE // 16)
    x = x.repeat(16, 1)  # 8192 rows: kernels that fill the GPU
    for _ in range(repeats):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.item()  # waits for the GPU, like a training loop logging its loss


it = iter(loader)
t = time.monotonic()
first = next(it)
cpu_s = time.monotonic() - t
gpu_step(first, 1)  # warm-up
t = time.monotonic()
gpu_step(first, 1)
gpu_s = time.monotonic() - t
repeats = max(1, round(0.25 * cpu_s / max(gpu_s, 1e-4)))
print(f"batch CPU {cpu_s * 1e3:.0f} ms, one GPU step {gpu_s * 1e3:.1f} ms -> {repeats} GPU steps per batch",
      flush=True)
t0 = time.monotonic()
n = 0
wait = 0.0
while time.monotonic() - t0 < args.seconds:
    t = time.monotonic()
    batch = next(it)
    wait += time.monotonic() - t
    gpu_step(batch, repeats)
    n += 1
dt = time.monotonic() - t0
print(f"{n} batches in {dt:.1f} s; waiting for data {100 * wait / dt:.0f}% of the time", flush=True)
