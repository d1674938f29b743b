"""The observer effect: does gputop sampling the GPU at 10 Hz (GPM included) slow a workload down?

A bf16 matmul loop and a device-to-device copy loop run in this process (torch) on GPU 0, while gputop's
TUI runs in a pseudo-terminal at --rate 10. The TUI is paused (SIGSTOP: no NVML or GPM call at all) and
resumed (SIGCONT) in alternate windows of ``--window`` seconds, ``--pairs`` times per loop, in one run:
off, on, off, on, ... Each window's throughput is measured with CUDA events; printed: the mean on and off,
the % difference (negative: slower while sampled), each pair's difference, and the spread of the off
windows alone (the noise floor the difference is to be read against).

    python bench/perf/observer_effect.py                  # 4 pairs x 3 s windows per loop (about 60 s)
    python bench/perf/observer_effect.py --json FILE
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tui_cpu import ROOT, PtyProc  # noqa: E402


def loops(torch):
    """{name: (step function, work per step, unit)} on cuda:0."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    src = torch.empty(2 ** 28, device="cuda", dtype=torch.float32)  # 1 GiB
    dst = torch.empty_like(src)
    return {
        "matmul_bf16": (lambda: torch.matmul(a, b, out=c), 2 * n ** 3 / 1e12, "TFLOP/s"),
        "copy": (lambda: dst.copy_(src), 2 * src.numel() * 4 / 1e9, "GB/s"),  # read + write
    }


def window(torch, step, work: float, seconds: float) -> float:
    """Throughput of ``step`` over about ``seconds``: steps in batches, timed with CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    steps, t_end = 0, time.monotonic() + seconds
    start.record()
    while time.monotonic() < t_end:
        for _ in range(10):
            step()
        steps += 10
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return steps * work / (start.elapsed_time(end) / 1e3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=float, default=3.0, help="seconds per window (default 3)")
    ap.add_argument("--pairs", type=int, default=4, help="off/on pairs per loop (default 4)")
    ap.add_argument("--gputop-args", default="--rate 10")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("observer_effect: no CUDA GPU", file=sys.stderr)
        return 3
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    gputop = PtyProc("gputop", [sys.executable, "-m", "gputop", *args.gputop_args.split()], 120, 40, env)
    report = {"gpu": torch.cuda.get_device_name(0), "gputop": args.gputop_args, "window_s": args.window, "loops": {}}
    try:
        time.sleep(4)  # its start-up (NVML, GPM) before anything is measured
        if not gputop.alive():
            print(f"observer_effect: gputop exited:\n{gputop.tail_text()}", file=sys.stderr)
            return 1
        for name, (step, work, unit) in loops(torch).items():
            os.killpg(gputop.pid, signal.SIGCONT)
            window(torch, step, work, 2.0)  # warm-up (clocks, caches)
            off, on = [], []
            for _ in range(args.pairs):
                os.killpg(gputop.pid, signal.SIGSTOP)
                off.append(window(torch, step, work, args.window))
                os.killpg(gputop.pid, signal.SIGCONT)
                time.sleep(0.3)  # its first ticks after the pause
                on.append(window(torch, step, work, args.window))
            m_off, m_on = statistics.mean(off), statistics.mean(on)
            diff = 100 * (m_on - m_off) / m_off
            pairs = [100 * (b - a) / a for a, b in zip(off, on)]
            noise = 100 * statistics.pstdev(off) / m_off
            report["loops"][name] = {"unit": unit, "off": off, "on": on, "mean_off": m_off, "mean_on": m_on,
                                     "diff_pct": diff, "pair_diffs_pct": pairs, "off_spread_pct": noise}
            print(f"{name:<12} without gputop {m_off:8.2f} {unit}   with gputop at 10 Hz {m_on:8.2f} {unit}   "
                  f"difference {diff:+.2f}%  (pairs: {', '.join(f'{p:+.2f}' for p in pairs)}; "
                  f"spread of the off windows {noise:.2f}%)", flush=True)
    finally:
        try:
            os.killpg(gputop.pid, signal.SIGCONT)
        except OSError:
            pass
        gputop.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
