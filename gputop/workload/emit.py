"""What a running workload says: its events, written by :class:`Emitter`.

Run by gputop (``--events``), one JSON object a line on stdout, which the runner and the TUI read (``t`` is
``time.monotonic()``, the same clock as gputop's sampler on Linux)::

    {"event": "started", "workload", "params", "device": {...}, "pid"}
    {"event": "phase", "name"}                 # a new phase begins (telemetry is summarised per phase)
    {"event": "progress", "done", "total", "message"}
    {"event": "point", "data": {...}}          # one measured result (a roofline point, a mode, a batch size)
    {"event": "result", "data": {...}}         # workload-level results (measured roofs, summary)
    {"event": "log", "message"}
    {"event": "warning", "message", "code"}
    {"event": "error", "message", "kind"}      # kind: missing_dependency | oom | cuda | bad_param | exception
    {"event": "done", "status"}                # ok | interrupted | error

Without ``--events`` the same calls print readable text, so the script is a teaching tool on its own.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

from gputop.documents import jsonable


class Emitter:
    """Sends events: JSON lines (``events=True``, for gputop) or readable text (standalone)."""

    def __init__(self, events: bool = False, stream=None, err=None):
        self.events = events
        self.stream = stream or sys.stdout
        self.err = err or sys.stderr
        self.stop_requested = False
        self.status = "ok"
        self.on_point: Callable[[dict], None] | None = None  # a standalone script's own printer
        self.params, self.device, self.points, self.results = {}, {}, [], {}  # standalone: for the report at the end
        self.report = True  # standalone: print the results, the figure and the verdicts at the end (a quiet rank: no)

    def _send(self, event: str, **fields) -> None:
        if self.events:
            fields = {"event": event, "t": time.monotonic(), **fields}
            self.stream.write(json.dumps(fields, default=jsonable) + "\n")
            self.stream.flush()

    def started(self, workload: str, params: dict, device: dict) -> None:
        self._send("started", workload=workload, params=params, device=device, pid=os.getpid())
        if not self.events:
            self.params, self.device = dict(params), dict(device)
            print(f"{workload} on {device.get('name', device.get('kind'))}  params: "
                  + " ".join(f"{k}={_short(v)}" for k, v in params.items()), file=self.stream)

    def phase(self, name: str) -> None:
        self._send("phase", name=name)
        if not self.events:
            print(f"\n== {name}", file=self.stream)

    def progress(self, done: int, total: int, message: str = "") -> None:
        self._send("progress", done=done, total=total, message=message)

    def point(self, data: dict) -> None:
        self._send("point", data=data)
        if not self.events:
            self.points.append(dict(data))
            if self.on_point:
                self.on_point(data)
            else:
                print("  " + "  ".join(f"{k}={_short(v)}" for k, v in data.items()), file=self.stream)

    def result(self, data: dict) -> None:
        self._send("result", data=data)
        if not self.events:  # printed as labelled lines at the end (script.run_module)
            self.results.update(data)

    def log(self, message: str) -> None:
        self._send("log", message=message)
        if not self.events:
            print(message, file=self.stream)

    def warning(self, message: str, code: str = "warning") -> None:
        self._send("warning", message=message, code=code)
        if not self.events:
            print(f"WARNING: {message}", file=self.err)

    def error(self, message: str, kind: str = "exception", detail: str = "") -> None:
        self.status = "error"
        self._send("error", message=message, kind=kind, detail=detail)
        if not self.events:
            print(f"error: {message}", file=self.err)

    def done(self) -> None:
        self._send("done", status=self.status)

    def should_stop(self) -> bool:
        """True after SIGINT/SIGTERM: finish the current measurement, emit what you have, return."""
        return self.stop_requested


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ",".join(_short(x) for x in v)
    return str(v)
