"""What one sampler tick costs, call by call: every NVML call the sampler makes, the GPM window,
the host reader, and a whole tick (``GpuReader.read`` + ``HostReader.read``).

    python bench/perf/sample_cost.py [--reps 2000] [--gpu 0] [--json FILE]
    python bench/perf/sample_cost.py --paced 20 [--rate 10]     # each call as the sampler makes it, 10 times a second

Each line is the CPU time (this process, user + system) per call in microseconds, the mean over
``--reps`` calls made back to back, and the wall time per call. At 10 Hz, 100 us of CPU per tick is
0.1% of one core. Exit 3 without NVML.

Back to back, a call can be cheaper than the sampler's: NVML and the CPU's caches are warm. ``--paced S``
makes the sampler's calls in the sampler's order, one tick every 1/``--rate`` s for S seconds, and times
each with the thread's own CPU clock; then a sampler thread as the TUI runs it (``Sampler`` over a
``LiveSource``) for as long: its reads and its whole thread, waits and wake-ups included.
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


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
    ap.add_argument("--paced", type=float, metavar="S", help="time the sampler's calls at its pace for S seconds")
    ap.add_argument("--rate", type=float, default=10.0, help="ticks a second with --paced (default 10)")
    args = ap.parse_args()
    if args.paced:
        return paced(args)

    from gputop.telemetry.host import HostReader
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.sample import GPM_METRICS, GpmWindow, GpuReader

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
        buf = lib.nvmlGpmSampleAlloc()
        rows.append(("nvmlGpmSampleGet", *timed(lambda: lib.nvmlGpmSampleGet(h, buf), args.reps)))
        lib.nvmlGpmSampleFree(buf)
        win = GpmWindow(nvml, args.gpu, h)
        rows.append((f"GpmWindow.read (sample + {len(GPM_METRICS)} metrics)", *timed(win.read, args.reps)))
        win.close()
    host = HostReader()
    rows.append(("HostReader.read (/proc)", *timed(host.read, args.reps // 4)))
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


def paced(args) -> int:
    """Each of the sampler's calls, in its order, at its pace: CPU us per call (thread clock), then a real
    sampler thread for as long (its reads, and the whole thread with its waits)."""
    import psutil

    from gputop.telemetry.host import HostReader
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.sample import GPM_METRICS, GpuReader
    from gputop.telemetry.sampler import Sampler

    nvml = Nvml()
    if not nvml.available():
        print(f"sample_cost: {nvml.error}", file=sys.stderr)
        return 3
    lib = nvml.lib
    reader = GpuReader(nvml, args.gpu)
    h = reader.h
    host = HostReader()
    every = {"nvmlDeviceGetComputeRunningProcesses": 10, "HostReader.read (/proc)": 5}
    # GPM's read in its two NVML steps, timed apart, on buffers of its own (as telemetry.sample.GpmWindow reads):
    # a sample into the next buffer, then the metrics between the two newest samples
    gpm = reader.gpm is not None
    if gpm:
        bufs = [lib.nvmlGpmSampleAlloc(), lib.nvmlGpmSampleAlloc()]
        mg = lib.c_nvmlGpmMetricsGet_t()
        mg.version = getattr(lib, "NVML_GPM_METRICS_GET_VERSION", 1)
        for i, metric_id in enumerate(GPM_METRICS.values()):
            mg.metrics[i].metricId = metric_id
    newest = [1]  # the buffer the last sample went into

    def gpm_sample():
        newest[0] ^= 1
        lib.nvmlGpmSampleGet(h, bufs[newest[0]])
        taken[0] += 1

    def gpm_metrics(count=len(GPM_METRICS)):
        if taken[0] < 2:
            return
        mg.numMetrics = count
        mg.sample1, mg.sample2 = bufs[newest[0] ^ 1], bufs[newest[0]]
        lib.nvmlGpmMetricsGet(mg)

    taken = [0]  # GPM samples taken
    calls = {
        "nvmlDeviceGetUtilizationRates": lambda: lib.nvmlDeviceGetUtilizationRates(h),
        "nvmlGpmSampleGet": gpm_sample if gpm else None,
        f"nvmlGpmMetricsGet ({len(GPM_METRICS)} metrics)": gpm_metrics if gpm else None,
        "nvmlDeviceGetClockInfo(SM)": lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_SM),
        "nvmlDeviceGetClockInfo(MEM)": lambda: lib.nvmlDeviceGetClockInfo(h, lib.NVML_CLOCK_MEM),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: lib.nvmlDeviceGetCurrentClocksEventReasons(h),
        "nvmlDeviceGetPowerUsage": lambda: lib.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetTemperature": lambda: lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetMemoryInfo(v2)": lambda: lib.nvmlDeviceGetMemoryInfo(h, lib.nvmlMemory_v2),
        "nvmlDeviceGetComputeRunningProcesses": lambda: lib.nvmlDeviceGetComputeRunningProcesses(h),
        "HostReader.read (/proc)": host.read,
    }
    calls = {k: v for k, v in calls.items() if v is not None}
    spent = dict.fromkeys(calls, 0.0)
    made = dict.fromkeys(calls, 0)
    interval, n = 1.0 / args.rate, int(args.paced * args.rate)
    whole = 0.0
    for k in range(n):
        started = time.monotonic()
        c_tick = time.thread_time()
        for name, fn in calls.items():
            if k % every.get(name, 1):
                continue
            c0 = time.thread_time()
            fn()
            spent[name] += time.thread_time() - c0
            made[name] += 1
        whole += time.thread_time() - c_tick
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    one_metric = 0.0  # the metrics step again, asking for one metric (does its cost grow with the count?)
    if gpm:
        for k in range(n // 3):
            started = time.monotonic()
            gpm_sample()
            c0 = time.thread_time()
            gpm_metrics(1)
            one_metric += time.thread_time() - c0
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
        for b in bufs:
            lib.nvmlGpmSampleFree(b)
    reader.close()

    src = LiveSource(nvml, gpus=[args.gpu])  # the TUI's sampler, on its own thread
    sampler = Sampler(src, rate_hz=args.rate)
    w0 = time.monotonic()
    sampler.start()
    tid = sampler.thread_id
    time.sleep(args.paced)
    thread_s = next((t.user_time + t.system_time for t in psutil.Process().threads() if t.id == tid), 0.0)
    wall = time.monotonic() - w0  # the thread's whole CPU time (reads, listeners, waits, wake-ups) over this
    sampler.stop()
    ticks = len(sampler.ticks)
    src.close()

    name = nvml.get("name", "nvmlDeviceGetName", h)
    print(f"{name}: the sampler's calls at {args.rate:g} Hz for {args.paced:g} s ({n} ticks), thread CPU clock")
    print(f"{'call':<44} {'calls':>6} {'CPU us':>8} {'% core':>7}")
    rows = []
    for name_, s_ in spent.items():
        per = s_ / made[name_] * 1e6 if made[name_] else None
        pct = 100 * s_ / (n * interval)
        rows.append({"call": name_, "calls": made[name_], "cpu_us": per, "pct_of_core": pct})
        print(f"{name_:<44} {made[name_]:6d} {per:8.1f} {pct:7.3f}")
    if gpm:
        per = one_metric / max(1, n // 3 - 1) * 1e6
        rows.append({"call": "nvmlGpmMetricsGet (1 metric)", "calls": n // 3 - 1, "cpu_us": per})
        print(f"{'nvmlGpmMetricsGet (1 metric, after a sample)':<44} {n // 3 - 1:6d} {per:8.1f}")
    tick_us = whole / n * 1e6
    print(f"{'a whole tick (these calls)':<44} {n:6d} {tick_us:8.1f} {100 * whole / (n * interval):7.3f}")
    thread_pct = 100 * thread_s / wall
    reads_pct = 100 * sampler.cpu_s / wall
    print(f"Sampler thread (LiveSource, {ticks} ticks in {wall:.1f} s): reads {reads_pct:.3f}% of a core "
          f"({sampler.cpu_s / max(1, ticks) * 1e6:.0f} us a tick), whole thread {thread_pct:.3f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "gpu": name, "rate_hz": args.rate, "seconds": args.paced, "ticks": n, "rows": rows,
            "whole_tick_us": tick_us, "sampler_ticks": ticks, "sampler_reads_pct": reads_pct,
            "sampler_thread_pct": thread_pct}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
