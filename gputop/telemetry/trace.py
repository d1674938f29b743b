"""Record and replay telemetry as JSON lines (optionally gzip-compressed: ``.jsonl.gz``).

A trace is::

    {"type": "header", "format": "gputop-trace", "version": 1, "devices": [static...], ...}
    {"type": "tick", "t": 0.1, "gpus": [sample...], "host": {...}}
    {"type": "mark", "t": 3.2, "label": "matmul bf16"}      # optional phase labels
    {"type": "stacks", "t": 41.3, "since": 30.2, "stacks": {...}, "records": {...}}   # a run's ranks' stacks
    {"type": "flight_recorder", "t": 33.0, "result": {...}}   # its flight recorder's dump, judged
    ...

``stacks`` and ``flight_recorder`` rows (``--record`` with ``--run -- CMD``: gputop/session/culprit_log.py) are what
named the culprit of a stall while the run went: a replay says it too (``ReplaySource.extra``, ``stacks_at``).
A trace without them reads as before, and a reader that does not know a row's type skips it.

``t`` is seconds since the recording started. A replay source gives the same ticks that a live
source gives, so every consumer (headless, TUI, classifier) runs unchanged on a trace.

One rule for every file gputop writes (``--record``, ``--record-run``): a name that ends in ``.gz`` is written
gzip-compressed, any other name as plain JSON lines; the readers tell the two apart by the file's first bytes,
whatever its name; reading any input (a file, stdin, a pipe) is :mod:`gputop.telemetry.trace_file`'s. A file cut off
while it was written (gputop killed) reads up to its last complete line and says so (``ReplaySource.truncated``).
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
from gputop.telemetry.sample import SAMPLE_FIELDS
from gputop.telemetry.trace_file import GZIP_MAGIC, Rows, TraceError, name_of, read_first_row, read_rows  # noqa: F401

FORMAT = "gputop-trace"
VERSION = 1
EXTRA_ROWS = ("stacks", "flight_recorder")  # a run's culprit evidence (module doc); their shape is their reader's


def _open(path: str, mode: str):
    """A trace file to write: gzip when the name ends in .gz."""
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


class Recorder:
    """Writes ticks as they come (a sampler listener). Flushes every second so a kill loses little.

    A write that fails (a full disk, ``/dev/full``, a file size limit) stops the recording: ``error`` holds the
    first OSError, the file is closed, and what called it says so with a non-zero exit code (a sampler listener
    cannot raise to anyone)."""

    def __init__(self, path: str, devices: list[dict], rate_hz: float | None = None, note: str = "",
                 extra: dict | None = None):
        self.path = path
        self._f = _open(path, "w")
        self._lock = threading.Lock()  # ticks come from the sampler thread, marks from anywhere
        self._t0: float | None = None
        self._last_flush = 0.0
        self.ticks = 0
        self.error: OSError | None = None  # the first write that failed; nothing more is written after it
        self._write({
            "type": "header", "format": FORMAT, "version": VERSION, "gputop_version": gputop.__version__,
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hostname": platform.node(), "rate_hz": rate_hz, "note": note, "devices": devices, **(extra or {}),
        })

    def _io(self, fn) -> None:
        """``fn(file)`` under the lock, unless the file is closed; an OSError ends the recording (``error``)."""
        with self._lock:
            if self._f.closed:
                return
            try:
                fn(self._f)
            except OSError as exc:
                self.error = self.error or exc
                try:
                    self._f.close()
                except OSError:
                    pass

    def _write(self, obj: dict) -> None:
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        self._io(lambda f: f.write(line))

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
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        """Everything written so far onto the disk, readable (gzip: a sync flush ends a complete block)."""
        self._io(lambda f: f.flush())

    def mark(self, label: str, t: float | None = None) -> None:
        self._write({"type": "mark", "t": self._rel(time.monotonic() if t is None else t), "label": label})

    def close(self) -> None:
        """Close the file (the gzip trailer written); a failure is kept in ``error``."""
        self._io(lambda f: f.close())

    def why_failed(self) -> str | None:
        """``cannot write PATH: why`` where a write failed, else None."""
        if self.error is None:
            return None
        return f"cannot write {self.path}: {self.error.strerror or self.error}; the file is incomplete"


def write_trace(path: str, devices: list[dict], ticks: list[dict], marks: list[tuple[float, str]],
                rate_hz: float | None = None, note: str = "") -> int:
    """Write collected ticks (and phase marks, by monotonic time) as a trace; returns the tick count. Raises OSError
    where the file could not be written whole."""
    rec = Recorder(path, devices, rate_hz=rate_hz, note=note)
    rows = [(t["t"], 1, t) for t in ticks] + [(t, 0, label) for t, label in marks if t is not None]
    try:
        for t, is_tick, row in sorted(rows, key=lambda r: (r[0], r[1])):
            rec(row) if is_tick else rec.mark(row, t)
    finally:
        rec.close()
    if rec.error is not None:
        raise rec.error
    return rec.ticks


def read_trace(path: str) -> tuple[dict, Rows]:
    """(header, rows) of a whole trace; rows are ticks and marks in file order (``rows.truncated``: why the file ends
    early, or None). Raises TraceError for a file that is not a gputop trace or holds a row of the wrong shape."""
    name = name_of(path)
    rows = read_rows(path)
    header = rows[0] if rows else {}
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceError(f"{name}: not a gputop trace (line 1 has no \"format\": \"{FORMAT}\" header)")
    if header.get("version") != VERSION:
        raise TraceError(f"{name}: trace version {header.get('version')!r} is not supported (this gputop reads "
                         f"{VERSION})")
    devices = header.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise TraceError(f"{name}: the header's \"devices\" is not a list of GPUs")
    body = Rows(r for r in rows[1:] if isinstance(r, dict) and r.get("type") in ("tick", "mark"))
    body.truncated = rows.truncated
    body.extra = sorted((r for r in rows[1:] if isinstance(r, dict) and r.get("type") in EXTRA_ROWS
                         and _number(r.get("t"))), key=lambda r: r["t"])
    for n, r in enumerate(body, 1):
        why = _bad_row(r)
        if not why and r["type"] == "tick" and len(r["gpus"]) != len(devices):
            why = (f"has {len(r['gpus'])} GPU samples where the header's devices are {len(devices)}: more GPU "
                   "samples than the header's devices" if len(r["gpus"]) > len(devices) else
                   f"has {len(r['gpus'])} GPU samples where the header's devices are {len(devices)}")
        if why:
            raise TraceError(f"{name}: row {n} after the header ({r['type']}) {why}")
    if not any(r["type"] == "tick" for r in body):
        raise TraceError(f"{name}: the trace has no samples")
    return header, body


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bad_row(r: dict) -> str | None:
    """What is wrong with a tick or mark row's shape (what the replay reads of it), or None (a sample's NaN or
    infinite field is made None, n/a, on the way)."""
    if not _number(r.get("t")):
        return "has no time t"
    if r["type"] == "mark":
        return None if isinstance(r.get("label"), str) else "has no label"
    gpus = r.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, dict) and _number(g.get("t")) for g in gpus):
        return "has no list of GPU samples, each with its time t"
    for g in gpus:
        for k in _NUMBERS:  # NaN or infinity (JSON lets a writer put them): the field is n/a
            if isinstance(g.get(k), float) and not math.isfinite(g[k]):
                g[k] = None
        bad = [k for k in _NUMBERS if g.get(k) is not None and not _number(g[k])]
        if bad:
            return f"has a sample whose {bad[0]} is not a number"
        if not isinstance(g.get("clock_reasons") or [], list) or not isinstance(g.get("processes") or [], list):
            return "has a sample whose clock_reasons or processes is not a list"
    if not isinstance(r.get("host", {}), dict):
        return "has a host that is not an object"
    return None


_NUMBERS = tuple(f for f in SAMPLE_FIELDS if f != "clock_reasons")  # a sample's fields that hold a number or null


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
        self.truncated = rows.truncated  # why the file ends early (cut off while written), or None
        self.ticks = [r for r in rows if r["type"] == "tick"]
        self.marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
        self.extra = list(getattr(rows, "extra", []))  # stacks and flight_recorder rows, by time
        self._stacks = [r for r in self.extra if r["type"] == "stacks" and isinstance(r.get("stacks"), dict)]
        self.speed = speed
        self.loop = loop
        self._i = 0
        self._offset = 0.0  # added to t on each loop, so time keeps increasing
        self.finished = False
        self.label = name_of(path) if path == "-" else os.path.basename(path)
        if self.truncated:
            self.label += " (cut off)"
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

    def stacks_at(self, t: float) -> dict | None:
        """The last ``stacks`` row recorded at or before tick time ``t`` of this play (its ``t`` in that time, a
        loop's offset added), or None."""
        got = None
        for r in self._stacks:
            if r["t"] + self._offset > t:
                break
            got = r
        return None if got is None else dict(got, t=got["t"] + self._offset)

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

