"""Recorded workload runs: a run's events, telemetry, phase marks and final document in one file, and
``RecordedRun``, which plays one back as it happened, on a machine with no GPU.

A recording (``gputop --run NAME --record-run FILE.jsonl.gz``) is a gputop trace (so ``gputop --replay
FILE`` shows its telemetry, phase marks and all) with two more kinds of rows the trace reader skips::

    {"type": "header", "format": "gputop-trace", ..., "devices": [static], "run": {workload, params, device,
     nvml_index, command, started_at, gpu_name}}
    {"type": "tick", "t": 0.1, "gpus": [...], "host": {...}}       # t: seconds since the run started
    {"type": "mark", "t": 0.4, "label": "sweep"}                    # each phase
    {"type": "event", "t": 0.4, "event": {"event": "point", ...}}   # each event the runner saw, as it came
    {"type": "document", "t": 12.3, "document": {...}}              # the final run document (after analyze)

``RecordedRun`` has the face of a :class:`gputop.runner.workload_run.WorkloadRun` that the TUI's run
controller and results view use: it feeds the recorded events into the same ``RunEvents`` record at their
recorded times (``speed`` x), its partial documents are built by the same ``build_document``, and once
over its document is the recorded final one, so the results view shows what it showed live.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from gputop.runner.events import RunEvents
from gputop.runner.run_view import RunView
from gputop.runner.status import exit_code_for
from gputop.telemetry.trace import FORMAT, Recorder, TraceError, read_first_row, read_rows

RUNS_DIR = Path(__file__).resolve().parents[1] / "data" / "runs"  # the recordings that ship with gputop


class RunRecorder:
    """Writes a run's recording as the run goes (``--record-run FILE``): the header once the run has started,
    then every ``FLUSH_S`` its new ticks and events (``on_event``, chained before another listener) in time
    order, flushed (gzip: a sync flush, so a reader gets every complete line), and at the end the final document.
    A gputop killed mid-run (``kill -9``) leaves a readable recording up to its last flushed line.

    ``attach(run)`` before the run starts, ``finish(doc)`` after it ended."""

    FLUSH_S = 0.25

    def __init__(self, path: str | None = None, then: Callable[[dict], None] | None = None):
        self.path, self.then = path, then
        self.events: list[tuple[float, dict]] = []  # (monotonic time received, event) not yet written
        self.rows = 0
        self._lock = threading.Lock()
        self._run = None
        self._rec: Recorder | None = None
        self._ticks_written = 0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: OSError | None = None

    def on_event(self, ev: dict) -> None:
        with self._lock:
            self.events.append((time.monotonic(), copy.deepcopy(ev)))
        if self.then is not None:
            self.then(ev)

    def attach(self, run) -> None:
        """Record ``run`` (a WorkloadRun not yet started) to ``path``, as it goes, from a thread of its own."""
        self._run = run
        self._thread = threading.Thread(target=self._loop, daemon=True, name="gputop-record-run")
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._done.wait(self.FLUSH_S):
                if self._rec is None and self._run.status != "pending":  # started: static facts, t0 and command known
                    self._open()
                if self._rec is not None:
                    self._write_new()
        except OSError as exc:  # the disk filled or went away: said at the end
            self.error = exc

    def _open(self) -> None:
        run = self._run
        meta = {"workload": run.spec.name, "params": dict(run.values), "device": run.device,
                "nvml_index": run.nvml_index, "command": list(run.command), "started_at": run.started_at,
                "gpu_name": (run.static or {}).get("name")}
        self._rec = Recorder(self.path, [run.static] if run.static is not None else [], rate_hz=run.rate_hz,
                             note=f"gputop --run {run.spec.name} --record-run", extra={"run": meta})
        self._rec.start_at(run.t0)
        self.rows = 1

    def _write_new(self) -> None:
        """The ticks and events that came since the last write, in time order, then a flush."""
        ticks = self._run.ticks_copy()
        rows: list[tuple[float, int, dict]] = [(tick["t"], 1, tick) for tick in ticks[self._ticks_written:]]
        self._ticks_written = len(ticks)
        with self._lock:
            events, self.events = self.events, []
        for t, ev in events:
            if ev.get("event") == "phase":  # a mark at each phase, as a trace has them
                at = ev["t"] if isinstance(ev.get("t"), (int, float)) else t
                rows.append((at, 0, {"type": "mark", "label": str(ev.get("name", ""))}))
            rows.append((t, 2, {"type": "event", "event": ev}))
        for t, kind, row in sorted(rows, key=lambda r: (r[0], r[1])):
            if kind == 1:
                self._rec(row)
            else:
                self._rec.row(dict(row, t=self._rec.rel(t)))
        self.rows += len(rows)
        self._rec.flush()

    def finish(self, doc: dict) -> int:
        """The run is over: write what is left and its final document (``doc``), close; returns the rows written.
        Raises OSError when the file could not be written."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error
        run = self._run
        try:
            if self._rec is None:  # the run never started: a recording of its document alone
                self._open()
            self._write_new()
            end = run.t_end if run.t_end is not None else time.monotonic()
            self._rec.row({"type": "document", "t": self._rec.rel(end), "document": doc})
            self.rows += 1
        finally:
            if self._rec is not None:
                self._rec.close()
        if self._rec.error is not None:  # a write failed (a full disk): the file is not the whole run
            raise self._rec.error
        return self.rows


def save_recording(path: str, recorder: RunRecorder, run, doc: dict) -> bool:
    """``--record-run FILE``: finish the recording of a run that has ended, and say so (or why not: one line, and
    False, which the frontend makes a non-zero exit code) on stderr."""
    from gputop import exitcodes

    try:
        n = recorder.finish(doc)
    except OSError as exc:
        exitcodes.say(f"cannot write {path}: {exc.strerror or exc}; the recording is incomplete")
        return False
    exitcodes.say(f"recorded the run ({n} rows: events, telemetry, phases, the document) to {path}")
    return True


def read_recording(path: str | os.PathLike) -> dict:
    """{header, run, ticks, marks, events, document} of a recording; raises TraceError (one line). A recording cut
    off before the run ended (gputop killed) has every complete line up to there and ``document`` None."""
    rows = read_rows(path)
    header = rows[0] if rows and isinstance(rows[0], dict) else {}
    if header.get("format") != FORMAT:
        raise TraceError(f"{path}: not a gputop recording (line 1 has no \"format\": \"{FORMAT}\" header)")
    if not isinstance(header.get("run"), dict):
        raise TraceError(f"{path}: a telemetry trace, not a recorded run (record one with --run NAME --record-run FILE)")
    body = [r for r in rows[1:] if isinstance(r, dict)]
    doc = next((r["document"] for r in body if r.get("type") == "document"), None)
    return {"header": header, "run": header["run"], "document": doc if isinstance(doc, dict) else None,
            "ticks": [r for r in body if r.get("type") == "tick"],
            "events": [r for r in body if r.get("type") == "event" and isinstance(r.get("event"), dict)],
            "marks": [r for r in body if r.get("type") == "mark"]}


def read_header(path: str | os.PathLike) -> dict:
    """The header line of a recording alone (what the workloads page lists); raises TraceError."""
    header = read_first_row(path)
    if not isinstance(header, dict) or header.get("format") != FORMAT or not isinstance(header.get("run"), dict):
        raise TraceError(f"{path}: not a recorded run (record one with gputop --run NAME --record-run FILE)")
    return header


def shipped(folder: str | os.PathLike | None = None) -> list[Path]:
    """The recorded runs in ``folder`` (default: the ones that ship with gputop), by name."""
    folder = Path(folder) if folder is not None else RUNS_DIR
    return sorted(folder.glob("*.jsonl.gz")) if folder.is_dir() else []


def recording_label(header: dict) -> str:
    """``roofline (recorded H100)`` / ``roofline (recorded CPU)``, from a recording's header."""
    run = header["run"]
    gpu = (run.get("gpu_name") or "").replace("NVIDIA ", "")
    where = gpu.split()[0] if gpu else "CPU"
    return f"{run.get('workload')} (recorded {where})"


class RecordedRun(RunView):
    """A recorded run played back: the same events at the same pace (``speed`` x), then the recorded
    final document. A :class:`~gputop.runner.run.Run` as a WorkloadRun is: ``start()``, ``stop()`` (ends the
    playback: an interrupted partial run), ``poll()`` / ``wait()``, ``document()`` any time."""

    def __init__(self, path: str | os.PathLike, speed: float = 1.0, on_event: Callable[[dict], None] | None = None):
        self.path = str(path)
        self.rec = read_recording(path)
        run = self.rec["run"]
        doc = self.rec["document"] or {}  # {}: a recording cut off before the run ended
        self.spec = SimpleNamespace(name=run["workload"])
        self.speed = speed
        self.device = run.get("device") or (doc.get("device") or {}).get("kind") or "cpu"
        self.nvml_index = run.get("nvml_index")
        self.values = dict(run.get("params") or {})
        self.command = list(run.get("command") or [])
        self.started_at = run.get("started_at")
        devices = self.rec["header"].get("devices") or [None]
        self.static = (doc.get("device") or {}).get("static") or devices[0]
        self.peaks = (doc.get("device") or {}).get("peaks")
        if self.peaks is None and self.static:
            from gputop.analysis.peaks import compute_peaks

            self.peaks = compute_peaks(self.static)
        self.gpu_pos = 0 if self.static else None
        self.rate_hz = self.rec["header"].get("rate_hz")
        self.events = RunEvents(on_event)
        self.status = "pending"
        self.child = None
        self.pid = None
        self.signum = None
        self.stopping = False
        self.t0: float | None = None
        self.t_end: float | None = None
        self.ticks: list[dict] = []
        self._ticks_lock = threading.Lock()
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._final_doc: dict | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "RecordedRun":
        if self.status != "pending":
            raise RuntimeError("a RecordedRun starts once")
        self.t0 = time.monotonic()
        self.status = "running"
        self._thread = threading.Thread(target=self._play, daemon=True, name="gputop-recorded-run")
        self._thread.start()
        return self

    def _at(self, t: float) -> float:
        """The monotonic time now that recorded time ``t`` maps to."""
        return self.t0 + t / self.speed

    def _play(self) -> None:
        rows = sorted(self.rec["ticks"] + self.rec["events"], key=lambda r: r["t"])
        for row in rows:
            wait = self._at(row["t"]) - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                break
            if row["type"] == "tick":
                tick = dict(row, t=self._at(row["t"]))
                tick["gpus"] = [dict(g, t=tick["t"]) for g in row.get("gpus", [])]
                with self._ticks_lock:
                    self.ticks.append(tick)
            else:
                ev = dict(row["event"], t=self._at(row["t"]))
                if ev.get("event") == "finished":
                    continue  # said below, once the document is final
                self.events.handle(ev)
        end = self.rec["document"]
        cut_off = end is None  # the recording ends before the run did (gputop was killed): interrupted there
        self.t_end = time.monotonic() if self._stop.is_set() or cut_off else self._at(end.get("wall_time_s") or 0.0)
        if self._stop.is_set() or cut_off:  # stopped: what was played so far, as an interrupted run
            from gputop.runner.document import build_document

            self.status = "interrupted"
            if cut_off and not self._stop.is_set():
                self.stopping = True
                self.events.warn("cut_off", "the recording ends before the run did (gputop was killed while "
                                            "recording it): the run as far as it was recorded")
            self.events.close_phase(self.t_end)
            self._final_doc = build_document(self)
        else:
            self.status = end.get("status", "ok")
            self._final_doc = copy.deepcopy(end)
        self._finished.set()
        self.events.emit({"event": "finished", "t": time.monotonic(), "source": "gputop", "status": self.status,
                          "exit_code": self.exit_code})

    # -- what a WorkloadRun offers ---------------------------------------------------------------------
    def stop(self, signum: int | None = None) -> None:
        self.stopping = True
        self.signum = self.signum or signum
        self._stop.set()

    kill = stop

    @property
    def interrupted(self) -> bool:
        return self.stopping

    @property
    def exit_code(self) -> int | None:
        if self.status == "interrupted":
            return exit_code_for("interrupted", self.signum, [])
        return self._final_doc.get("exit_code") if self._final_doc is not None else None
