"""What one sampler tick costs, call by call: every NVML call the sampler makes, the GPM window,
the host reader, and a whole tick (``GpuReader.read`` + ``HostReader.read``).

    python bench/sample_cost.py [--reps 2000] [--gpu 0] [--json FILE]

Each line is the CPU time (this process, user + system) per call in microseconds, the mean over
``--reps`` calls made back to back, and the wall time per call. At 10 Hz, 100 us of CPU per tick is
0.1% of one core. Exit 3 without NVML.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn, reps: int) -> tuple[float, float]:
    """(CPU us per call, wall us per call) over ``reps`` calls."""
    fn()  # warm
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        fn()
    c1, w1 = time.process_time(), time.perf_counter()
    return (c1 - c0) / reps * 1e6, (w1 - w0) / reps * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()

    from gputop.telemetry.host import HostReader
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.sample import GpmWindow, GpuReader

    nvml = Nvml()
    if not nvml.available():
        print(f"sample_cost: {nvml.error}", file=sys.stderr)
        return 3
    lib = nvml.lib
    reader = GpuReader(nvml, args.gpu)
    h = reader.h
    calls = {
        "nvmlDeviceGetUtilizationRates": lambda: lib.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetClockInfo(SM)": lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_SM),
        "nvmlDeviceGetClockInfo(MEM)": lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_MEM),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: lib.nvmlDeviceGetCurrentClocksEventReasons(h),
        "nvmlDeviceGetPowerUsage": lambda: lib.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetTemperature": lambda: lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetMemoryInfo(v2)": lambda: lib.nvmlDeviceGetMemoryInfo(h, lib.nvmlMemory_v2),
        "nvmlDeviceGetComputeRunningProcesses": lambda: lib.nvmlDeviceGetComputeRunningProcesses(h),
        "Nvml.get(power) (the choke point)": lambda: nvml.get("power", "nvmlDeviceGetPowerUsage", h, gpu=args.gpu),
    }
    rows = []
    for name, fn in calls.items():
        try:
            rows.append((name, *timed(fn, args.reps)))
        except Exception as exc:  # a call this GPU does not support
            rows.append((name, None, None, type(exc).__name__))
    if reader.gpm is not None:
        win = GpmWindow(nvml, args.gpu, h)
        rows.append(("nvmlGpmSampleGet", *timed(lambda: lib.nvmlGpmSampleGet(h, win.bufs[0]), args.reps)))
        rows.append(("GpmWindow.read (sample + 15 metrics)", *timed(win.read, args.reps)))
        win.close()
    host = HostReader()
    rows.append(("HostReader.read (psutil)", *timed(host.read, args.reps // 4)))
    rows.append(("GpuReader.read (one GPU, all fields)", *timed(reader.read, args.reps // 4)))
    rows.append(("GpuReader.read + HostReader.read", *timed(lambda: (reader.read(), host.read()), args.reps // 4)))
    reader.close()

    name = nvml.get("name", "nvmlDeviceGetName", h)
    print(f"{name}, {args.reps} calls each (whole ticks: {args.reps // 4})")
    print(f"{'call':<44} {'CPU us':>8} {'wall us':>8}")
    for r in rows:
        if r[1] is None:
            print(f"{r[0]:<44} {'n/a':>8} {r[3]}")
        else:
            print(f"{r[0]:<44} {r[1]:8.1f} {r[2]:8.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": name, "reps": args.reps, "rows": [
            {"call": r[0], "cpu_us": r[1], "wall_us": r[2]} for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
