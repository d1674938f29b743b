"""Record the built-in demo trace on a real GPU: labelled phases of known bottlenecks.

    python scripts/record_demo.py OUT.jsonl.gz [--seconds-per-phase 7]

The gputop side (this process) samples NVML at 10 Hz and never touches CUDA; a child process runs
the phases with torch and prints one line per phase start, which becomes a ``mark`` in the trace:

    idle -> bf16 matmul (tensor-bound) -> device copy (DRAM-bound) -> tiny kernels + sync
    (launch-bound) -> pageable host-to-device copies (PCIe) -> idle
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHILD = r"""
import sys, time
import torch
secs = float(sys.argv[1])
dev = torch.device("cuda")
def phase(name):
    print(f"PHASE {time.monotonic():.4f} {name}", flush=True)
def until(t_end, fn):
    n = 0
    while time.monotonic() < t_end:
        fn(); n += 1
    torch.cuda.synchronize()
    return n
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
src = torch.randn(1 << 28, device=dev)            # 1 GiB
dst = torch.empty_like(src)
tiny = torch.randn(50000, device=dev)
host = torch.randn(1 << 26)                       # 256 MiB pageable
torch.cuda.synchronize()
phase("idle"); time.sleep(secs * 0.6)
phase("matmul bf16 8192^3")
def mm():
    for _ in range(20): a @ b
    torch.cuda.synchronize()
until(time.monotonic() + secs, mm)
phase("device copy 1 GiB")
def cp():
    for _ in range(20): dst.copy_(src)
    torch.cuda.synchronize()
until(time.monotonic() + secs, cp)
phase("tiny kernels + sync")
def tk():
    tiny.mul_(1.0001); torch.cuda.synchronize()
until(time.monotonic() + secs, tk)
phase("pageable host-to-device copy")
def h2d():
    host.to(dev); torch.cuda.synchronize()
until(time.monotonic() + secs, h2d)
phase("idle")
time.sleep(secs * 0.6)
phase("end")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seconds-per-phase", type=float, default=7.0)
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()

    from gputop.telemetry.devices import child_env_for
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.sampler import Sampler
    from gputop.telemetry.trace import Recorder

    src = LiveSource(gpus=[args.gpu])
    if not src.nvml.available():
        print(f"record_demo: {src.nvml.error}", file=sys.stderr)
        return 3
    static = src.static()
    rec = Recorder(args.out, static, rate_hz=10.0,
                   note="gputop demo: idle, bf16 matmul, device copy, tiny kernels + sync, pageable H2D, idle")
    sampler = Sampler(src, rate_hz=10.0)
    sampler.listeners.append(rec)
    sampler.start()
    env = child_env_for(args.gpu, [s["uuid"] for s in static])
    child = subprocess.Popen([sys.executable, "-u", "-c", CHILD, str(args.seconds_per_phase)],
                             stdout=subprocess.PIPE, text=True, env=env)
    src.watch(child.pid)
    for line in child.stdout:
        if line.startswith("PHASE "):
            _, t, name = line.rstrip("\n").split(" ", 2)
            if name == "end":
                break
            rec.mark(name, float(t))
            print(f"record_demo: {name}", file=sys.stderr)
    code = child.wait()
    time.sleep(0.5)
    sampler.stop()
    rec.close()
    src.close()
    print(f"record_demo: {rec.ticks} ticks -> {args.out} (child exit {code})", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
