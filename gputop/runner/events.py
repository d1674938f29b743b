"""What a workload child says: its JSON-lines events on stdout, read into one record of the run.

A workload (``gputop.workload.Emitter``) writes one JSON object a line: ``started``, ``phase``,
``progress``, ``point``, ``result``, ``log``, ``warning``, ``error`` and last ``done``. Any other line
(a stray print) becomes a ``log`` event. gputop's runner adds its own ``error`` events (crash, timeout)
the same way. The record is filled on the reader threads, under its lock; ``copy()`` takes a
consistent snapshot for a document.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from typing import Callable

LOG_LINES = 2000  # the document keeps the last LOG_LINES log lines
STDERR_LINES = 40  # the last stderr lines go into a crash's error detail


class RunEvents:
    """The events of one run so far. ``on_event(event)`` is called for each, outside the lock."""

    def __init__(self, on_event: Callable[[dict], None] | None = None):
        self.on_event = on_event
        self.started: dict | None = None  # the child's "started" event
        self.progress: dict | None = None  # the last "progress" event
        self.points: list[dict] = []
        self.results: dict = {}
        self.phases: list[dict] = []  # {"name", "t_start", "t_end"} in monotonic seconds
        self.warnings: list[dict] = []
        self.errors: list[dict] = []
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.done_status: str | None = None
        self.lock = threading.RLock()
        self._listener_failed = False

    # -- reading the child's pipes -------------------------------------------------------------------
    def read_stdout(self, stream) -> None:
        for line in stream:
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                event = {"event": "log", "message": line, "t": time.monotonic()}
            self.handle(event)

    def read_stderr(self, stream) -> None:
        for line in stream:
            with self.lock:
                self.stderr_tail.append(line.rstrip("\r\n"))

    # -- one event -----------------------------------------------------------------------------------
    def handle(self, ev: dict) -> None:
        kind = ev["event"]
        t = ev.get("t") if isinstance(ev.get("t"), (int, float)) else time.monotonic()
        with self.lock:
            if kind == "started":
                self.started = ev
            elif kind == "phase":
                self.close_phase(t)
                self.phases.append({"name": str(ev.get("name", "")), "t_start": t, "t_end": None})
            elif kind == "progress":
                self.progress = ev
            elif kind == "point" and isinstance(ev.get("data"), dict):
                self.points.append(ev["data"])
            elif kind == "result" and isinstance(ev.get("data"), dict):
                self.results.update(ev["data"])
            elif kind == "log":
                self.log.append(str(ev.get("message", "")))
            elif kind == "warning":
                self.warn(str(ev.get("code") or "warning"), str(ev.get("message", "")))
            elif kind == "error":
                self.errors.append({"kind": str(ev.get("kind") or "exception"), "message": str(ev.get("message", "")),
                                    "detail": str(ev.get("detail") or "")})
            elif kind == "done":
                self.done_status = str(ev.get("status"))
                self.close_phase(t)
            elif kind != "finished":
                self.log.append(f"(unknown event) {json.dumps(ev, default=str)}")
        self.emit(ev)

    def runner_event(self, event: str, **fields) -> None:
        """An event of gputop's runner itself (crash, timeout, launch failure), recorded like a child's."""
        self.handle({"event": event, "t": time.monotonic(), "source": "gputop", **fields})

    def warn(self, code: str, message: str) -> None:
        with self.lock:
            self.warnings.append({"code": code, "message": message})

    def close_phase(self, t: float) -> None:
        with self.lock:
            if self.phases and self.phases[-1]["t_end"] is None:
                self.phases[-1]["t_end"] = t

    def emit(self, ev: dict) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(ev)
        except Exception as exc:  # a broken listener must not stop the run
            if not self._listener_failed:
                self._listener_failed = True
                self.warn("listener", f"event listener failed: {exc!r}")

    def copy(self) -> dict:
        """A consistent deep copy of the record (for a document)."""
        with self.lock:
            return copy.deepcopy({
                "started": self.started, "progress": self.progress, "points": self.points,
                "results": self.results, "phases": self.phases, "warnings": self.warnings, "errors": self.errors,
                "log": list(self.log), "stderr_tail": list(self.stderr_tail), "done_status": self.done_status,
            })
