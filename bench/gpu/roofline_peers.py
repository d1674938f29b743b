"""The roofline's roofs against torch's own best, measured in this process after the gputop run.

    python bench/gpu/roofline_peers.py roofline-<gpu>.json

Reads the run document of ``gputop --run roofline --json``, then measures with torch:
- streaming ops on 256 MiB .. 4 GiB buffers: ``dst.copy_(src)`` (read + write bytes), ``x.sum()`` and
  ``x.amax()`` (read bytes); the best of each, timed with CUDA events, median of 20;
- the 8192^3 bf16 and fp16 matmul two ways: 10 warm-ups then 50 back to back between one pair of events
  (the usual benchmark), and the median of 20 individually timed calls;
and prints roof / peer ratios against the targets (DRAM >= 0.90 of theoretical and >= 1.02x torch's best
streaming op; FP32 >= 0.95; L2 > DRAM; bf16/fp16 tensor >= 1.0x torch's best 8192^3 figure).
"""

from __future__ import annotations

import json
import statistics
import sys


def timed(torch, fn, warm=3, runs=20) -> float:
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    fn()
    for a, b in ev:
        a.record()
        fn()
        b.record()
    ev[-1][1].synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def streaming(torch) -> dict:
    best: dict = {}
    for side in (256 << 20, 1 << 30, 2 << 30, 4 << 30):
        x = torch.ones(side // 4, device="cuda")
        y = torch.empty_like(x)
        for op, fn, nbytes in (("copy_", lambda: y.copy_(x), 2 * side), ("sum", lambda: x.sum(), side),
                               ("amax", lambda: x.amax(), side)):
            bw = nbytes / (timed(torch, fn) / 1e3)
            if bw > best.get(op, (0,))[0]:
                best[op] = (bw, side >> 20)
        x = y = None
        torch.cuda.empty_cache()
    return best


def matmul(torch, dtype, n=8192) -> dict:
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(50):
        a @ b
    e.record()
    e.synchronize()
    flops = 2.0 * n ** 3
    return {"loop50": flops / (s.elapsed_time(e) / 50 / 1e3), "median20": flops / (timed(torch, lambda: a @ b) / 1e3)}


def main() -> int:
    import torch

    doc = json.load(open(sys.argv[1]))
    roofs = (doc.get("results") or {}).get("measured_roofs") or {}
    peaks = (doc.get("device") or {}).get("peaks") or {}
    print(f"device: {torch.cuda.get_device_name(0)}; gputop run: status {doc.get('status')}, "
          f"wall {doc.get('wall_time_s')} s, torch {torch.__version__}")
    st = streaming(torch)
    mm = {name: matmul(torch, dt) for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16))}
    rows = []
    dram, best_peer = roofs.get("dram_bytes_per_s"), max(v[0] for v in st.values())
    rows.append(("DRAM roof / theoretical", dram, peaks.get("dram_bytes_per_s"), 0.90))
    for op, (bw, mib) in st.items():
        rows.append((f"DRAM roof / torch {op} (best at {mib} MiB)", dram, bw, None))
    rows.append(("DRAM roof / torch's best streaming op", dram, best_peer, 1.02))
    rows.append(("L2 roof / DRAM roof", roofs.get("l2_bytes_per_s"), dram, 1.0))
    rows.append(("FP32 roof / theoretical", roofs.get("fp32_flops"), peaks.get("fp32_flops"), 0.95))
    rows.append(("FP64 roof / theoretical", roofs.get("fp64_flops"), peaks.get("fp64_flops"), None))
    for name, v in mm.items():
        t = (roofs.get("tensor_dense_flops") or {}).get(name)
        rows.append((f"{name} tensor roof / theoretical", t, (peaks.get("tensor_dense_flops") or {}).get(name), None))
        rows.append((f"{name} tensor roof / torch 8192^3 (50-loop)", t, v["loop50"], None))
        rows.append((f"{name} tensor roof / torch 8192^3 best", t, max(v.values()), 1.0))
    print(f"\n{'measurement':<52} {'ours':>10} {'reference':>10} {'ratio':>7} {'target':>7} met")
    for label, ours, ref, target in rows:
        if not ours or not ref:
            print(f"{label:<52} {'n/a':>10}")
            continue
        scale = 1e12
        r = ours / ref
        met = "" if target is None else ("yes" if r >= target else "NO")
        print(f"{label:<52} {ours / scale:10.3f} {ref / scale:10.3f} {r:7.3f} {'' if target is None else f'>= {target}':>7} {met}")
    print("(T units: TB/s for bandwidth, TFLOP/s for math)")
    for name, v in ((roofs.get("details") or {}).get("tensor") or {}).items():
        print(f"{name}: roof shape {v.get('shape')}, SM {v.get('sm_clock_mhz')} MHz, {v.get('power_w')} W, "
              f"reasons {v.get('clock_reasons')}; sustained {(v.get('sustained') or {}).get('flops_per_s')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
