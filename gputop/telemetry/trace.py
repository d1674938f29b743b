"""Record and replay telemetry as JSON lines (optionally gzip-compressed: ``.jsonl.gz``).

A trace is::

    {"type": "header", "format": "gputop-trace", "version": 1, "devices": [static...], ...}
    {"type": "tick", "t": 0.1, "gpus": [sample...], "host": {...}}
    {"type": "mark", "t": 3.2, "label": "matmul bf16"}      # optional phase labels
    ...

``t`` is seconds since the recording started. A replay source gives the same ticks that a live
source gives, so every consumer (headless, TUI, classifier) runs unchanged on a trace.

One rule for every file gputop writes (``--record``, ``--record-run``): a name that ends in ``.gz`` is written
gzip-compressed, any other name as plain JSON lines; the readers tell the two apart by the file's first bytes,
whatever its name. A file cut off while it was written (gputop killed) reads up to its last complete line.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import platform
import threading
import time
from datetime import datetime, timezone

import gputop

FORMAT = "gputop-trace"
VERSION = 1


class TraceError(ValueError):
    """An unreadable or invalid trace file (one line, names the file)."""


GZIP_MAGIC = b"\x1f\x8b"


def _open(path: str, mode: str):
    """A trace file to write (gzip when the name ends in .gz) or to read (gzip when its content is)."""
    if mode == "r":
        with open(path, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
    else:
        gz = str(path).endswith(".gz")
    if gz:
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a trace file, gzip or plain (by its content, whatever its name). A gzip stream that ends
    without its trailer (its writer was killed) gives the lines it holds; raises TraceError (one line)."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a folder, not a trace")
    lines: list[str] = []
    try:
        with _open(path, "r") as f:
            try:
                for line in f:
                    lines.append(line)
            except EOFError:  # "compressed file ended before the end-of-stream marker": cut off while written
                pass
    except (OSError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    return lines


def read_rows(path: str | os.PathLike) -> list:
    """Every JSON line of a trace file; a last line cut off mid-write is left out, any other bad line raises
    TraceError."""
    lines = read_lines(path)
    if not lines:
        raise TraceError(f"{path}: empty file, not a gputop trace")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if n == len(lines) and n > 1:  # a recording cut off mid-line: keep what came before
                break
            raise TraceError(f"{path}: line {n} is not JSON ({exc.msg})") from None
    return rows


def read_first_row(path: str | os.PathLike):
    """The first line of a trace file alone, parsed (its header); raises TraceError."""
    if not os.path.isfile(path):
        raise TraceError(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a file")
    try:
        with _open(path, "r") as f:
            return json.loads(f.readline())
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"{path}: not a gputop recording ({exc})") from None


class Recorder:
    """Writes ticks as they come (a sampler listener). Flushes every second so a kill loses little."""

    def __init__(self, path: str, devices: list[dict], rate_hz: float | None = None, note: str = "",
                 extra: dict | None = None):
        self.path = path
        self._f = _open(path, "w")
        self._lock = threading.Lock()  # ticks come from the sampler thread, marks from anywhere
        self._t0: float | None = None
        self._last_flush = 0.0
        self.ticks = 0
        self._write({
            "type": "header", "format": FORMAT, "version": VERSION, "gputop_version": gputop.__version__,
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hostname": platform.node(), "rate_hz": rate_hz, "note": note, "devices": devices, **(extra or {}),
        })

    def _write(self, obj: dict) -> None:
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        with self._lock:
            if not self._f.closed:
                self._f.write(line)

    def _rel(self, t: float) -> float:
        if self._t0 is None:
            self._t0 = t
        return round(t - self._t0, 4)

    rel = _rel  # recorded time (seconds since the first row, or since ``start_at``) of monotonic time t

    def start_at(self, t0: float) -> None:
        """Count recorded time from monotonic ``t0`` (a run's start) rather than from the first row."""
        self._t0 = t0

    def row(self, obj: dict) -> None:
        """Any other row (a recorded run's events and document: the trace reader skips them)."""
        self._write(obj)

    def __call__(self, tick: dict) -> None:
        row = dict(tick, type="tick", t=self._rel(tick["t"]))
        row["gpus"] = [dict(g, t=self._rel(g["t"])) for g in tick["gpus"]]
        self._write(row)
        self.ticks += 1
        now = time.monotonic()
        if now - self._last_flush > 1.0:
            with self._lock:
                if not self._f.closed:
                    self._f.flush()
            self._last_flush = now

    def flush(self) -> None:
        """Everything written so far onto the disk, readable (gzip: a sync flush ends a complete block)."""
        with self._lock:
            if not self._f.closed:
                self._f.flush()

    def mark(self, label: str, t: float | None = None) -> None:
        self._write({"type": "mark", "t": self._rel(time.monotonic() if t is None else t), "label": label})

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()


def write_trace(path: str, devices: list[dict], ticks: list[dict], marks: list[tuple[float, str]],
                rate_hz: float | None = None, note: str = "") -> int:
    """Write collected ticks (and phase marks, by monotonic time) as a trace; returns the tick count."""
    rec = Recorder(path, devices, rate_hz=rate_hz, note=note)
    rows = [(t["t"], 1, t) for t in ticks] + [(t, 0, label) for t, label in marks if t is not None]
    try:
        for t, is_tick, row in sorted(rows, key=lambda r: (r[0], r[1])):
            rec(row) if is_tick else rec.mark(row, t)
    finally:
        rec.close()
    return rec.ticks


def read_trace(path: str) -> tuple[dict, list[dict]]:
    """(header, rows) of a whole trace; rows are ticks and marks in file order."""
    rows = read_rows(path)
    header = rows[0] if rows else {}
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceError(f"{path}: not a gputop trace (line 1 has no \"format\": \"{FORMAT}\" header)")
    if header.get("version") != VERSION:
        raise TraceError(f"{path}: trace version {header.get('version')} is not supported (this gputop reads {VERSION})")
    body = [r for r in rows[1:] if isinstance(r, dict) and r.get("type") in ("tick", "mark")]
    if not any(r["type"] == "tick" for r in body):
        raise TraceError(f"{path}: the trace has no samples")
    return header, body


def segments(rows: list[dict]) -> list[tuple[str | None, list[dict]]]:
    """Split a trace body at its marks: [(label, ticks), ...] (label None before the first mark)."""
    out: list[tuple[str | None, list[dict]]] = [(None, [])]
    for r in rows:
        if r["type"] == "mark":
            out.append((r["label"], []))
        else:
            out[-1][1].append(r)
    return [(label, ticks) for label, ticks in out if ticks]


class ReplaySource:
    """Plays a recorded trace back at ``speed`` x real time (``inf``: as fast as it is read); with ``loop``, again
    from the start at its end (the demo). A :class:`gputop.telemetry.source.Source`."""

    kind = "replay"
    nvml = None

    def __init__(self, path: str, speed: float = 1.0, loop: bool = False):
        if not speed > 0:
            raise TraceError(f"--speed must be > 0 (got {speed})")
        self.path = path
        self.header, rows = read_trace(path)
        self.ticks = [r for r in rows if r["type"] == "tick"]
        self.marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
        self.speed = speed
        self.loop = loop
        self._i = 0
        self._offset = 0.0  # added to t on each loop, so time keeps increasing
        self.finished = False
        self.label = os.path.basename(path)
        self.hostname = self.header.get("hostname")
        self.na_reasons = dict(self.header.get("na_reasons") or {})
        self.indices = [d.get("index", i) for i, d in enumerate(self.static())]

    def static(self) -> list[dict]:
        return self.header.get("devices", [])

    def mark_at(self, t: float) -> str | None:
        """The phase label in force at recorded time ``t`` (None before the first mark)."""
        label = None
        for mt, lab in self.marks:
            if mt <= t:
                label = lab
        return label

    def read(self) -> dict | None:
        if self._i >= len(self.ticks):
            if not self.loop:
                self.finished = True
                return None
            self._offset += self.ticks[-1]["t"] + self._step()
            self._i = 0
        row = self.ticks[self._i]
        self._i += 1
        tick = {"t": row["t"] + self._offset, "gpus": [dict(g, t=g["t"] + self._offset) for g in row["gpus"]],
                "host": row.get("host", {})}
        phase = self.mark_at(row["t"])
        if phase:
            tick["phase"] = phase
        return tick

    def _step(self) -> float:
        if len(self.ticks) > 1:
            return (self.ticks[-1]["t"] - self.ticks[0]["t"]) / (len(self.ticks) - 1)
        return 0.1

    def delay(self, interval: float) -> float:
        """Seconds to wait before the next read."""
        if math.isinf(self.speed):
            return 0.0
        if self._i >= len(self.ticks) or self._i == 0:
            return self._step() / self.speed
        return max(0.0, (self.ticks[self._i]["t"] - self.ticks[self._i - 1]["t"]) / self.speed)

    def watch(self, pid: int) -> None:  # nothing to watch in a recording
        pass

    def unwatch(self, pid: int) -> None:
        pass

    def close(self) -> None:
        pass


def demo_trace_path() -> str:
    """The real trace that ships with gputop (recorded on an H100/H200), used by ``--demo``."""
    from importlib.resources import files

    return str(files("gputop.data") / "demo.jsonl.gz")

