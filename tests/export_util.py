"""Helpers for the ``gputop --export`` tests: a free port, a real exporter process, waiting on conditions."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import fault_util

ROOT = Path(__file__).resolve().parents[1]


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free now for a server a test starts, never the same twice in one suite. Below the kernel's
    ephemeral range: the port bind(0) hands out comes from that range, where any process's outgoing connection may
    take it as its own end before the server binds it. Each pytest-xdist worker draws from its own slice of the
    range and none hands out a port twice (a port checked free and released is free for anyone until the server
    binds it: two servers of one suite that drew the same port meant "Address already in use"). Random within the
    slice, so that two suites on one machine seldom pick the same."""
    import os
    import random

    low = max(1025, min(_ephemeral_low(), 65536) - 12000)
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = int((os.environ.get("PYTEST_XDIST_WORKER", "gw0") or "gw0").lstrip("gw") or 0) % workers
    size = 12000 // workers
    mine = range(low + worker * size, low + (worker + 1) * size)
    for port in random.sample(mine, len(mine)):
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise AssertionError(f"no free port left in {mine.start}-{mine.stop - 1}")


def wait_for(condition, timeout: float, what: str, step: float = 0.05):
    """``condition()``'s first truthy value, polled until ``timeout`` seconds pass (then AssertionError)."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            got = condition()
            if got:
                return got
        except OSError as exc:  # not up yet (refused, reset); an AssertionError goes up at once
            last_exc = exc
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last error: {last_exc!r})")


def get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def start_exporter(*args: str, fake_nvml: bool = False, **extra_env: str) -> subprocess.Popen:
    """``gputop --export ARGS`` as a real process; ``fake_nvml``: live NVML from tests/fake_pynvml (one H200)."""
    e = fault_util.env(fake_nvml=fake_nvml, **extra_env)
    return subprocess.Popen([sys.executable, "-m", "gputop", "--export", *args], cwd=ROOT, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_metrics(proc: subprocess.Popen, port: int, timeout: float = 30.0,
                     series: str = "DCGM_FI_DEV_SM_CLOCK{") -> str:
    """The first /metrics text that holds ``series`` (default: a GPU series, the sampler has ticked; the
    verdict series come once the live verdict has judged a window, up to a second later)."""
    def ready():
        if proc.poll() is not None:
            raise AssertionError(f"gputop --export exited {proc.returncode}: {proc.stderr.read()}")
        text = get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)
        return text if series in text else None
    return wait_for(ready, timeout, f"gputop --export to serve {series!r}")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    """Stop a process a test started (SIGKILL after ``timeout``), whatever state it is in."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def replay_collector(path: str):
    """(collector, sampler, source) of ``gputop --export --replay path``'s collector, every GPU of the trace exported,
    nothing sampled yet (the test steps the sampler)."""
    from gputop.analysis.peaks import compute_peaks
    from gputop.export.collector import ExportedGpu, ExportOptions, GputopCollector, gpu_labels
    from gputop.telemetry.sampler import Sampler
    from gputop.telemetry.trace import ReplaySource

    src = ReplaySource(str(path), speed=float("inf"))
    sampler = Sampler(src)
    gpus = [ExportedGpu(i, s, compute_peaks(s), gpu_labels(s, "node")) for i, s in enumerate(src.static())]
    return GputopCollector(sampler, gpus, ExportOptions(live=False)), sampler, src
