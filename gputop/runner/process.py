"""One workload run in a child process: launch, JSON-lines events, telemetry, cancel, timeout, crash.

``WorkloadRun`` is shared by the headless ``gputop --run NAME`` and the TUI. The gputop process never
creates a CUDA context: the workload runs as ``python -u workloads/NAME.py --events --param k=v ...``
in its own session (so a terminal Ctrl-C reaches gputop only; gputop forwards SIGINT itself). For a
CUDA run the child's environment maps its ``cuda:0`` to the chosen NVML GPU, and a sampler records
that GPU (and the CPU% of the child's process tree) while it runs.

Threads: a reader per pipe and one supervisor that waits for the child, enforces the timeout and the
kill after the grace period, then builds the final document (calling the workload's ``analyze``).
``on_event(event)`` is called on those threads (a TUI hands it to its own thread), for every child
event and for the runner's own: ``error`` (kind ``crashed`` / ``timeout``) and, last, ``finished``
(``status``, ``exit_code``).
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from datetime import datetime, timezone
from typing import Callable

from gputop import exitcodes, paths
from gputop.workload_api import EXIT_INTERRUPTED, EXIT_MISSING_DEPENDENCY

DEFAULT_GRACE_S = 5.0
STATUSES = ("ok", "error", "interrupted", "timeout", "crashed", "missing_dependency")
LOG_LINES = 2000  # the document keeps the last LOG_LINES log lines
STDERR_LINES = 40  # the last stderr lines go into a crash's error detail

EXIT_CODES = {
    "ok": exitcodes.OK, "error": exitcodes.FAILED, "interrupted": exitcodes.INTERRUPTED,
    "timeout": exitcodes.TIMEOUT, "crashed": exitcodes.CRASHED,
    "missing_dependency": exitcodes.MISSING_DEPENDENCY,
}


def exit_code_for(status: str, interrupted: bool = False, errors: list[dict] | None = None) -> int:
    """gputop's exit code for a run that ended with ``status``."""
    if interrupted:
        return exitcodes.INTERRUPTED
    if status == "error" and any(e.get("kind") == "bad_param" for e in errors or []):
        return exitcodes.USAGE
    return EXIT_CODES.get(status, exitcodes.FAILED)


def format_value(value) -> str:
    """A parameter value as the text ``Param.parse`` reads back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def gpu_uuids(nvml) -> list[str | None]:
    """UUIDs of every GPU in NVML index order (for CUDA_VISIBLE_DEVICES)."""
    from gputop.telemetry.nvml import text
    from gputop.telemetry.static import device_count, handle

    return [text(nvml.get("uuid", "nvmlDeviceGetUUID", handle(nvml, i), gpu=i)) for i in range(device_count(nvml))]


class WorkloadRun:
    """A workload in a child process. ``start()``, then ``wait()`` / ``cancel()``; ``document()`` any time.

    ``spec``: a :class:`gputop.runner.registry.WorkloadSpec`; ``values``: resolved parameter values.
    ``device``: "cuda" (runs on NVML GPU ``nvml_index``, default 0) or "cpu" (no GPU telemetry).
    ``sampler``: an already running Sampler to attach to (the TUI's); by default the run starts its own
    on a LiveSource for its GPU and stops it at the end. ``ticks`` holds the run's telemetry ticks.
    """

    def __init__(self, spec, values: dict, device: str = "cuda", nvml_index: int | None = None,
                 timeout: float | None = None, on_event: Callable[[dict], None] | None = None,
                 grace_s: float = DEFAULT_GRACE_S, rate_hz: float = 10.0, nvml=None, sampler=None):
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu' (got {device!r})")
        self.spec = spec
        self.device = device
        self.values = dict(values)
        if spec.has_device_param:
            self.values["device"] = device
        self.nvml_index = (nvml_index or 0) if device == "cuda" else None
        self.timeout = timeout if timeout is not None else spec.timeout
        self.on_event = on_event
        self.grace_s = grace_s
        self.rate_hz = rate_hz
        self.nvml = nvml
        self.sampler = sampler
        self._own_sampler = sampler is None
        self.gpu_pos: int | None = None  # position of our GPU in the sampler's ticks
        self.static: dict | None = None
        self.peaks: dict | None = None

        self.status = "pending"  # then "running", then one of STATUSES
        self.proc: subprocess.Popen | None = None
        self.command: list[str] = []
        self.started_at: str | None = None
        self.t0: float | None = None
        self.t_end: float | None = None
        self.returncode: int | None = None
        self.started_info: dict | None = None  # the child's "started" event
        self.progress: dict | None = None  # the last "progress" event
        self.points: list[dict] = []
        self.results: dict = {}
        self.phases: list[dict] = []  # {"name", "t_start", "t_end"} in monotonic seconds
        self.warnings: list[dict] = []
        self.errors: list[dict] = []
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.ticks: list[dict] = []
        self.done_status: str | None = None
        self.done_t: float | None = None
        self.cancelled = False  # the user asked to stop
        self.timed_out = False
        self.killed = False  # SIGKILL after the grace period
        self._kill_at: float | None = None
        self._stop_pending = False  # cancel() before the child existed
        self._kill_asked = False  # kill() or a second cancel(), rather than the grace period running out
        self._lock = threading.RLock()
        self._finished = threading.Event()
        self._final_doc: dict | None = None
        self._readers: list[threading.Thread] = []
        self._on_event_failed = False

    # -- launch ------------------------------------------------------------------------------------
    def build_command(self) -> list[str]:
        cmd = [sys.executable, "-u", str(self.spec.path), "--events"]
        for name, value in self.values.items():
            if isinstance(value, (list, tuple)) and not value:
                continue  # an empty list has no --param text; it is only ever the default
            cmd += ["--param", f"{name}={format_value(value)}"]
        return cmd

    def build_env(self) -> dict:
        env = dict(os.environ)
        if self.device == "cuda":
            from gputop.telemetry.devices import child_env_for

            uuids = gpu_uuids(self._nvml())
            if self.nvml_index >= len(uuids):
                raise ValueError(f"no GPU with NVML index {self.nvml_index} ({len(uuids)} GPU(s))")
            env = child_env_for(self.nvml_index, uuids, env)
        root = str(paths.package_root())
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _nvml(self):
        if self.nvml is None:
            from gputop.telemetry.nvml import Nvml

            self.nvml = Nvml()
        return self.nvml

    def start(self) -> "WorkloadRun":
        if self.status != "pending":
            raise RuntimeError("a WorkloadRun starts once")
        self.command = self.build_command()
        env = self.build_env()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._open_telemetry()
        self.t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, start_new_session=True, text=True, encoding="utf-8", errors="replace", bufsize=1,
            )
        except OSError as exc:
            self._close_telemetry()
            self.t_end = time.monotonic()
            self.status = "error"
            self._runner_event("error", kind="launch", message=f"cannot start the workload: {exc}", detail="")
            self._finish()
            return self
        self.status = "running"
        if self.sampler is not None:
            watch = getattr(self.sampler.source, "watch", None)
            if watch:
                watch(self.proc.pid)
            self.sampler.listeners.append(self._on_tick)
            if self._own_sampler:
                self.sampler.start()
        for stream, fn in ((self.proc.stdout, self._read_stdout), (self.proc.stderr, self._read_stderr)):
            t = threading.Thread(target=fn, args=(stream,), daemon=True, name=f"gputop-run-{fn.__name__}")
            t.start()
            self._readers.append(t)
        threading.Thread(target=self._supervise, daemon=True, name="gputop-run-supervisor").start()
        with self._lock:
            pending, self._stop_pending = self._stop_pending, False
        if pending:  # cancel() came before the child existed
            self._stop(self.grace_s)
        return self

    def _open_telemetry(self) -> None:
        """Static facts and peaks of our GPU, and the sampler (our own unless one was given)."""
        if self.sampler is not None:
            indices = list(getattr(self.sampler.source, "indices", []))
            if self.device == "cuda" and self.nvml_index in indices:
                self.gpu_pos = indices.index(self.nvml_index)
                self.static = self.sampler.source.static()[self.gpu_pos]
        else:
            from gputop.telemetry.live import LiveSource
            from gputop.telemetry.sampler import Sampler

            gpus = [self.nvml_index] if self.device == "cuda" else []
            source = LiveSource(self._nvml(), gpus=gpus)
            if self.device == "cuda" and source.indices:
                self.gpu_pos = 0
                self.static = source.static()[0]
            self.sampler = Sampler(source, rate_hz=self.rate_hz)
        if self.static is not None:
            try:
                from gputop.analysis.peaks import compute_peaks

                self.peaks = compute_peaks(self.static)
            except Exception as exc:  # peaks are nice to have; the run goes on without them
                self.warnings.append({"code": "no_peaks", "message": f"theoretical peaks unavailable: {exc}"})

    def _close_telemetry(self) -> None:
        if self.sampler is None:
            return
        try:
            self.sampler.listeners.remove(self._on_tick)
        except ValueError:
            pass
        if self.proc is not None:
            unwatch = getattr(getattr(self.sampler.source, "host", None), "unwatch", None)
            if unwatch:
                unwatch(self.proc.pid)
        if self._own_sampler:
            self.sampler.stop()
            close = getattr(self.sampler.source, "close", None)
            if close:
                close()

    def _on_tick(self, tick: dict) -> None:
        with self._lock:
            self.ticks.append(tick)

    # -- events ------------------------------------------------------------------------------------
    def _read_stdout(self, stream) -> None:
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
            self._handle(event)

    def _read_stderr(self, stream) -> None:
        for line in stream:
            with self._lock:
                self.stderr_tail.append(line.rstrip("\r\n"))

    def _handle(self, ev: dict) -> None:
        kind = ev["event"]
        t = ev.get("t") if isinstance(ev.get("t"), (int, float)) else time.monotonic()
        with self._lock:
            if kind == "started":
                self.started_info = ev
            elif kind == "phase":
                self._close_phase(t)
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
                self.warnings.append({"code": str(ev.get("code") or "warning"), "message": str(ev.get("message", ""))})
            elif kind == "error":
                self.errors.append({"kind": str(ev.get("kind") or "exception"), "message": str(ev.get("message", "")),
                                    "detail": str(ev.get("detail") or "")})
            elif kind == "done":
                self.done_status = str(ev.get("status"))
                self.done_t = t
                self._close_phase(t)
            else:
                self.log.append(f"(unknown event) {json.dumps(ev, default=str)}")
        self._emit(ev)

    def _close_phase(self, t: float) -> None:
        if self.phases and self.phases[-1]["t_end"] is None:
            self.phases[-1]["t_end"] = t

    def _emit(self, ev: dict) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(ev)
        except Exception as exc:  # a broken listener must not stop the run
            if not self._on_event_failed:
                self._on_event_failed = True
                with self._lock:
                    self.warnings.append({"code": "listener", "message": f"event listener failed: {exc!r}"})

    def _runner_event(self, event: str, **fields) -> None:
        """An event of the runner itself (crash, timeout), recorded like a child's."""
        self._handle({"event": event, "t": time.monotonic(), "source": "gputop", **fields})

    # -- stop --------------------------------------------------------------------------------------
    def cancel(self, grace_s: float | None = None) -> None:
        """Ask the workload to stop (SIGINT); it is killed if still running after the grace period.
        A second cancel kills it now."""
        with self._lock:
            self.cancelled = True
        self._stop(self.grace_s if grace_s is None else grace_s)

    def kill(self) -> None:
        """Kill the workload now (SIGKILL to its process group)."""
        with self._lock:
            self.cancelled = True
            self._kill_asked = True
            self._kill_at = time.monotonic()

    def _stop(self, grace_s: float) -> None:
        with self._lock:
            if self.proc is None:
                self._stop_pending = not self._finished.is_set()
                return
            if self._finished.is_set() or self.returncode is not None:
                return
            now = time.monotonic()
            if self._kill_at is not None:  # asked twice: no more waiting
                self._kill_asked = True
                self._kill_at = now
                return
            self._kill_at = now + grace_s
            self._signal(signal.SIGINT, group=False)

    def _signal(self, sig: int, group: bool) -> None:
        """Signal the child (or its whole process group). Only the supervisor reaps the child, so its
        pid stays reserved (running or zombie) until then."""
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                os.kill(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- the supervisor ------------------------------------------------------------------------------
    def _exited(self) -> bool:
        """True once the child has exited (left as a zombie, not reaped, where the OS allows)."""
        if hasattr(os, "waitid"):
            try:
                return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                return True
        return self.proc.poll() is not None

    def _supervise(self) -> None:
        try:
            self._watch_child()
        except BaseException as exc:  # a bug here must still end the run, with a document
            self.status = "error" if self.status not in STATUSES else self.status
            self.errors.append({"kind": "runner", "message": f"gputop's runner failed: {exc!r}", "detail": ""})
            if self.proc is not None and self.returncode is None:
                self._signal(signal.SIGKILL, group=True)
            try:
                self._close_telemetry()
            except Exception:
                pass
        finally:
            if not self._finished.is_set():
                self._finish()

    def _watch_child(self) -> None:
        while not self._exited():
            time.sleep(0.05)
            now = time.monotonic()
            if self.timeout and not self.timed_out and now - self.t0 > self.timeout:
                with self._lock:
                    self.timed_out = True
                self._stop(self.grace_s)
            with self._lock:
                kill = self._kill_at is not None and now >= self._kill_at and not self.killed
                if kill:
                    self.killed = True
            if kill:
                self._signal(signal.SIGKILL, group=True)
        self.t_end = time.monotonic()
        self._signal(signal.SIGKILL, group=True)  # grandchildren left behind would hold the pipes open
        self.returncode = self.proc.wait()
        for t in self._readers:
            t.join(5.0)
        self._close_telemetry()
        self._settle()

    def _settle(self) -> None:
        """The final status from the exit code, the "done" event, and what the runner did."""
        rc, done = self.returncode, self.done_status
        if self.killed and self._kill_asked:
            self.warnings.append({"code": "killed", "message": "the workload was killed (SIGKILL) on a second stop request"})
        elif self.killed:
            why = "timeout" if self.timed_out else "stop request"
            self.warnings.append({"code": "killed", "message": f"the workload did not stop within {self.grace_s:g} s "
                                                              f"of SIGINT after the {why}; it was killed"})
        if self.timed_out:
            status = "timeout"
            self._runner_event("error", kind="timeout", message=f"the workload ran past its {self.timeout:g} s timeout "
                               "and was stopped", detail="")
        elif rc < 0 or done is None:
            # asked to stop, and it stopped before finishing: interrupted, however it ended (a SIGINT that
            # lands while Python is still starting up ends it with KeyboardInterrupt, exit code 1)
            if self.cancelled and (self.killed or rc in (-signal.SIGINT, EXIT_INTERRUPTED, 1)):
                status = "interrupted"
            else:
                status = "crashed"
                if rc < 0:
                    try:
                        name = signal.Signals(-rc).name
                    except ValueError:
                        name = f"signal {-rc}"
                    msg = f"the workload process was killed by {name}"
                    if -rc == signal.SIGKILL:
                        msg += " (out of host memory, or killed from outside?)"
                else:
                    msg = f"the workload process exited with code {rc} without finishing"
                self._runner_event("error", kind="crashed", message=msg, detail="\n".join(self.stderr_tail))
        elif rc == EXIT_MISSING_DEPENDENCY or any(e["kind"] == "missing_dependency" for e in self.errors):
            status = "missing_dependency"
        elif rc == EXIT_INTERRUPTED or done == "interrupted":
            status = "interrupted"
        elif rc == 0 and done == "ok":
            status = "ok"
        else:
            status = "error"
            if not self.errors:
                self._runner_event("error", kind="exception", message=f"the workload exited with code {rc}",
                                   detail="\n".join(self.stderr_tail))
        if status == "error" and self.stderr_tail:
            for e in self.errors:
                if not e["detail"]:
                    e["detail"] = "\n".join(self.stderr_tail)
        with self._lock:
            self._close_phase(self.t_end)
            self.status = status

    def _finish(self) -> None:
        from gputop.runner.document import build_document, clean

        try:
            doc = build_document(self)
            analyze = self.spec.analyze
            if analyze is not None:
                try:  # on a copy: a failing analyze leaves the document as it was
                    work = copy.deepcopy(doc)
                    out = analyze(work)
                    doc = out if isinstance(out, dict) else work
                except Exception as exc:
                    doc["warnings"].append({"code": "analyze_failed", "message":
                                            f"{self.spec.name}.analyze failed: {type(exc).__name__}: {exc}"})
            doc = clean(doc)
            with self._lock:
                self._final_doc = doc
        finally:
            self._finished.set()  # wait() never hangs, whatever happened above
        self._emit({"event": "finished", "t": time.monotonic(), "source": "gputop", "status": self.status,
                    "exit_code": doc["exit_code"]})

    # -- results -----------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    @property
    def interrupted(self) -> bool:
        return (self.cancelled and not self.timed_out) or self.status == "interrupted"

    @property
    def exit_code(self) -> int | None:
        if self.status not in STATUSES:
            return None
        return exit_code_for(self.status, self.interrupted, self.errors)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run is over and its document built; False if ``timeout`` passed first."""
        return self._finished.wait(timeout)

    def document(self) -> dict:
        """The run document: final once finished (after ``analyze``), else a partial one."""
        with self._lock:
            if self._final_doc is not None:
                return copy.deepcopy(self._final_doc)
        from gputop.runner.document import build_document

        return build_document(self)
