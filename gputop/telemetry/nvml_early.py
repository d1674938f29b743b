"""NVML opened, and every GPU's static facts read, on a thread started at gputop's first step (the monitor's start-up).

NVML's init is ~0.09 s of driver calls and the static facts of four H100s ~0.06 s (18 NVLink links each); both are
ctypes calls that let go of the GIL, so on a thread they overlap the command line's parsing and the early frame's
imports instead of following them (bench/perf/startup_profile.py). The live source takes them over (``take``) when
it opens; a mode that never opens it leaves the thread to end with the process. Only one source takes them: the
NVML init is that source's (its ``shutdown`` ends it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import device_count, read_static


@dataclass
class Opened:
    nvml: Nvml  # initialised (``available()`` answered; ``error`` says why not)
    static: dict[int, dict] = field(default_factory=dict)  # NVML index -> read_static(), every GPU NVML counts


_lock = threading.Lock()
_thread: threading.Thread | None = None
_opened: Opened | None = None
_taken = False


def start(lib=None) -> None:
    """Open NVML and read every GPU's static facts on a thread (once a process; ``lib``: pynvml, tests a fake)."""
    global _thread
    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(target=_open, args=(lib,), name="gputop-nvml-early", daemon=True)
        _thread.start()


def _open(lib) -> None:
    global _opened
    nvml = Nvml(lib)
    opened = Opened(nvml)
    try:
        if nvml.available():
            opened.static = {i: read_static(nvml, i) for i in range(device_count(nvml))}
    except Exception:  # noqa: BLE001 - NVML's errors are n/a already; anything else: the source reads them itself
        opened.static = {}
    finally:
        _opened = opened


def take() -> Opened | None:
    """What the thread opened (waiting for it), to the first caller only; None when nothing was started or taken."""
    global _taken
    with _lock:
        if _thread is None or _taken:
            return None
        _taken = True
        thread = _thread
    thread.join()
    return _opened


def reset() -> None:
    """Forget the thread and what it opened (tests: each starts afresh). NVML stays initialised if it was."""
    global _thread, _opened, _taken
    with _lock:
        if _thread is not None:
            _thread.join()
        _thread, _opened, _taken = None, None, False
