"""Host ceilings for the roofline's CPU path (``--device cpu``): NumPy copy bandwidth and float32 BLAS
matmul, measured on this machine (there are no datasheet roofs for an arbitrary host).

A measurement on the host takes as long as it takes (thousands of copies, a long polynomial): each one here is
given ``stop``, asked before every timed call, and a stop asked meanwhile ends it with :class:`Stopped` (a
KeyboardInterrupt: a workload script ends on it as on Ctrl-C), the measurement dropped, within one call."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from gputop.measure.timing import timing_stats


class Stopped(KeyboardInterrupt):
    """A stop was asked in the middle of a measurement: it is dropped (a half-timed point is no measurement)."""


def check_stop(stop: Callable[[], bool] | None) -> None:
    """Raise :class:`Stopped` when ``stop()`` says a stop was asked."""
    if stop is not None and stop():
        raise Stopped()


def time_host(fn, warmup: int, runs: int, stop: Callable[[], bool] | None = None) -> list[float]:
    """Milliseconds of each of ``runs`` calls of ``fn`` after ``warmup`` untimed ones, asking ``stop`` before each."""
    for _ in range(warmup):
        check_stop(stop)
        fn()
    times = []
    for _ in range(runs):
        check_stop(stop)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def llc_bytes() -> int | None:
    try:
        v = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        if v > 0:
            return int(v)
    except (ValueError, OSError, AttributeError):
        pass
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for idx in base.glob("index*"):
        try:
            s = (idx / "size").read_text().strip()
            sizes.append(int(s[:-1]) * 1024 if s.endswith("K") else int(s[:-1]) << 20 if s.endswith("M") else int(s))
        except (OSError, ValueError):
            continue
    return max(sizes) if sizes else None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def host_memory_roof(np, warmup: int, runs: int, stop: Callable[[], bool] | None = None) -> dict:
    """Copy bandwidth (read + write) of one NumPy copy on buffers at least twice the last-level cache."""
    llc = llc_bytes() or (32 << 20)
    side = 64 << 20
    while side < 2 * llc and side < (512 << 20):
        side *= 2
    try:
        import psutil

        while side > (16 << 20) and 2 * side > psutil.virtual_memory().available / 4:
            side //= 2
    except ImportError:
        pass
    src = np.ones(side // 4, dtype=np.float32)
    dst = np.zeros_like(src)  # first touch before timing
    times = time_host(lambda: np.copyto(dst, src), max(1, warmup), runs, stop)
    st = timing_stats(times)
    return {"bytes_per_s": 2 * side / (st["median_ms"] / 1e3), "buffer_bytes": side, "llc_bytes": llc,
            "threads": 1, "how": "numpy.copyto, read + write bytes counted", **st}


def host_fp32_roof(np, warmup: int, runs: int, stop: Callable[[], bool] | None = None) -> dict:
    """float32 matmul through NumPy's BLAS (all cores), the size grown until one call takes >= 25 ms."""
    rng = np.random.default_rng(0)
    m = 256
    while True:
        check_stop(stop)
        a = rng.random((m, m), dtype=np.float32)
        b = rng.random((m, m), dtype=np.float32)
        np.dot(a, b)
        t0 = time.perf_counter()
        np.dot(a, b)
        if time.perf_counter() - t0 >= 0.025 or m >= 4096:
            break
        m *= 2
    times = time_host(lambda: np.dot(a, b), warmup, runs, stop)
    st = timing_stats(times)
    flops = 2.0 * m ** 3
    return {"flops_per_s": flops / (st["median_ms"] / 1e3), "size": m, "flops_per_run": flops,
            "threads": os.cpu_count(), "how": "numpy.dot float32 (BLAS), 2 m^3 FLOPs", **st}
