"""A sampler thread that reads a source (live NVML or a replay) into bounded ring buffers.

The loop never overlaps itself (a slow read delays the next one, it does not pile up), keeps
monotonic timestamps, and hands each tick to its listeners (a recorder, a workload's phase
collector, the TUI's refresh flag) on the sampler thread. Nothing here imports Textual.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

DEFAULT_RATE_HZ = 10.0  # --rate's default: every mode samples at this rate unless told another
DEFAULT_HISTORY_S = 600.0  # ten minutes
MIN_RATE_HZ, MAX_RATE_HZ = 0.5, 50.0  # --rate's range (checked once, by gputop/cli); the TUI's + and - keys stop there


def within_range(rate_hz: float) -> float:
    """``rate_hz`` held inside [MIN_RATE_HZ, MAX_RATE_HZ]."""
    return min(MAX_RATE_HZ, max(MIN_RATE_HZ, rate_hz))


class Sampler:
    """Reads ``source`` (a :class:`gputop.telemetry.source.Source`) ``rate_hz`` times a second (held within the
    range, as the command line checked it) into a ring of the last ``history_s`` seconds of ticks."""

    def __init__(self, source, rate_hz: float = DEFAULT_RATE_HZ, history_s: float = DEFAULT_HISTORY_S):
        rate_hz = within_range(rate_hz)
        self.source = source
        self.history_s = history_s
        self.rate_hz = rate_hz
        self.ticks: deque[dict] = deque(maxlen=self._maxlen(rate_hz))
        self.listeners: list[Callable[[dict], None]] = []
        self.paused = False
        self.errors = 0
        self.last_error: str | None = None
        self.cpu_s = 0.0  # CPU time the sampling thread spent reading (thread_time)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _maxlen(self, rate_hz: float) -> int:
        return max(10, int(self.history_s * rate_hz))

    @property
    def interval(self) -> float:
        return 1.0 / self.rate_hz

    def set_rate(self, rate_hz: float) -> float:
        rate_hz = within_range(rate_hz)
        with self._lock:
            self.rate_hz = rate_hz
            self.ticks = deque(self.ticks, maxlen=self._maxlen(rate_hz))
        self._wake.set()
        return rate_hz

    # -- one step, usable without the thread (tests, --once) -----------------------------------
    def step(self) -> dict | None:
        c0 = time.thread_time()
        tick = self.source.read()
        self.cpu_s += time.thread_time() - c0
        if tick is None:
            return None
        with self._lock:
            self.ticks.append(tick)
        for fn in list(self.listeners):
            try:
                fn(tick)
            except Exception as exc:  # a broken listener must not stop sampling
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
        return tick

    # -- the thread ------------------------------------------------------------------------------
    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="gputop-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            if not self.paused:
                try:
                    if self.step() is None and self.source.finished:
                        return
                except Exception as exc:  # keep sampling; the UI shows the error
                    self.errors += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
            wait = self.source.delay(self.interval) - (time.monotonic() - started)
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def thread_id(self) -> int | None:
        """The sampling thread's native id (the OS's, as psutil lists threads) while it runs, else None."""
        return self._thread.native_id if self._thread is not None else None

    # -- reading the buffers ---------------------------------------------------------------------
    def latest(self) -> dict | None:
        with self._lock:
            return self.ticks[-1] if self.ticks else None

    def window(self, seconds: float | None = None, since: float | None = None) -> list[dict]:
        """Ticks of the last ``seconds`` (or all since monotonic time ``since``), oldest first (walks back
        from the newest only: the frames ask for the last few seconds of a long history)."""
        with self._lock:
            if not self.ticks:
                return []
            lo = since if since is not None else (self.ticks[-1]["t"] - seconds if seconds is not None else None)
            if lo is None:
                return list(self.ticks)
            out = []
            for tick in reversed(self.ticks):
                if tick["t"] < lo:
                    break
                out.append(tick)
        out.reverse()
        return out

    def since(self, t: float) -> list[dict]:
        """Ticks newer than monotonic time ``t``, oldest first (walks back from the newest only)."""
        out = []
        with self._lock:
            for tick in reversed(self.ticks):
                if tick["t"] <= t:
                    break
                out.append(tick)
        out.reverse()
        return out

    def series(self, gpu: int, field: str, seconds: float = 60.0) -> tuple[list[float], list]:
        """(times, values) of one field of GPU position ``gpu`` over the last ``seconds``."""
        ts, vs = [], []
        for tick in self.window(seconds):
            gpus = tick["gpus"]
            if gpu < len(gpus):
                ts.append(tick["t"])
                vs.append(gpus[gpu].get(field))
        return ts, vs


class Recent:
    """The last ``seconds`` of a sampler's ticks, oldest first, kept from one call to the next: each call
    adds only the ticks that are new since the previous one (the monitor asks for the last 30 s four times a
    second; walking back over 300 ticks each time was 4% of the TUI's main thread on the H100 machine)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._sampler: Sampler | None = None
        self._ticks: deque[dict] = deque()

    def get(self, sampler: Sampler) -> list[dict]:
        ticks = self._ticks
        latest = sampler.latest()
        if sampler is not self._sampler or not ticks or latest is None or latest["t"] < ticks[-1]["t"]:
            self._sampler = sampler  # another sampler, a first call, or time went back (a replay restarted)
            ticks.clear()
            ticks.extend(sampler.window(self.seconds))
        else:
            ticks.extend(sampler.since(ticks[-1]["t"]))
        if ticks:
            lo = ticks[-1]["t"] - self.seconds
            while ticks[0]["t"] < lo:
                ticks.popleft()
        return list(ticks)
