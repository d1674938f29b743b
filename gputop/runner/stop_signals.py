"""The signals that stop gputop (SIGINT, SIGTERM, SIGHUP), and :class:`StopSignals`, which turns them into
a call: every headless mode, ``--export`` and the TUI stop through it, so a Ctrl-C, a ``kill`` or a lost
terminal ends a run the same way (the child supervisor, :mod:`gputop.runner.child`, does the stopping).
"""

from __future__ import annotations

import signal
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    """While active, gputop's SIGINT, SIGTERM and SIGHUP call ``on_stop(signum)`` (the headless runs:
    stop the child, keep the partial document). ``first`` is the first signal received; the exit code
    is then 128 + first. Outside the main thread it installs nothing (Python delivers signals there only).
    """

    def __init__(self, on_stop: Callable[[int], None]):
        self.on_stop = on_stop
        self.first: int | None = None
        self.count = 0
        self._old: dict[int, object] = {}

    def _handler(self, signum, frame) -> None:
        self.count += 1
        if self.first is None:
            self.first = signum
        self.on_stop(signum)

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
