"""pageable_h2d: repeated host-to-device copies from pageable memory (expected: pcie-bound, pageable).

A 256 MiB tensor in ordinary (pageable) host memory is copied to the GPU again and again. The driver
stages pageable copies through a pinned bounce buffer with the CPU, so the copy runs well below the
PCIe link's peak while the SMs do nothing: the transfer is the bottleneck (pin_memory is the fix).
"""

from _common import loop, setup

torch, dev, args = setup(__doc__)
host = torch.empty(1 << 26).fill_(1.0)  # 256 MiB, pageable; filled before CUDA starts work
dst = torch.empty(1 << 26, device=dev)


def step():
    dst.copy_(host)
    torch.cuda.synchronize()


n = loop(torch, args.seconds, step, "pageable H2D copy of 256 MiB")
print(f"about {n * 256 / 1024 / args.seconds:.1f} GiB/s", flush=True)
