"""One workload run in a child process: launch, its events, its GPU's telemetry, stop, the document.

``WorkloadRun`` is shared by the headless ``gputop --run NAME`` and the TUI. The gputop process never
creates a CUDA context: the workload runs as ``python -u workloads/NAME.py --events --param k=v ...``
under the one supervisor (:class:`gputop.runner.child.Child`; SIGINT to the workload, SIGKILL to its
group after the grace period). For a CUDA run the child's environment maps its ``cuda:0`` to the chosen
NVML GPU, and a sampler records that GPU (and the CPU% of the child's process tree) while it runs.

``on_event(event)`` is called on the reader and supervisor threads (a TUI hands it to its own thread)
for every child event and for the runner's own: ``error`` (kind ``crashed`` / ``timeout`` / ``exited``)
and, last, ``finished`` (``status``, ``exit_code``).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Callable

from gputop import paths
from gputop.runner.child import GRACE_S, Child
from gputop.runner.events import RunEvents
from gputop.runner.run_view import RunView
from gputop.runner.params import format_value
from gputop.runner.status import STATUSES, exit_code_for, final_status
from gputop.telemetry.devices import child_env_all, child_env_for, multicast_off
from gputop.telemetry.sampler import DEFAULT_RATE_HZ
from gputop.workload.script import STOP_FILE_ENV


def gpu_uuids(nvml) -> list[str | None]:
    """UUIDs of every GPU in NVML index order (for CUDA_VISIBLE_DEVICES)."""
    from gputop.telemetry.static import device_count, read_uuid

    return [read_uuid(nvml, i) for i in range(device_count(nvml))]


class WorkloadRun(RunView):
    """A workload in a child process, a :class:`~gputop.runner.run.Run`: ``start()``, then ``poll()`` /
    ``wait()`` / ``stop()``; ``document()`` any time.

    ``spec``: a :class:`gputop.runner.registry.WorkloadSpec`; ``values``: resolved parameter values.
    ``device``: "cuda" (runs on NVML GPU ``nvml_index``, default 0) or "cpu" (no GPU telemetry).
    ``sampler``: an already running Sampler to attach to (the TUI's); by default the run starts its own
    on a LiveSource for its GPU and stops it at the end. ``ticks`` holds the run's telemetry ticks.
    """

    def __init__(self, spec, values: dict, device: str = "cuda", nvml_index: int | None = None,
                 timeout: float | None = None, on_event: Callable[[dict], None] | None = None,
                 grace_s: float | None = None, rate_hz: float = DEFAULT_RATE_HZ, nvml=None, sampler=None):
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu' (got {device!r})")
        self.spec, self.device = spec, device
        self.values = dict(values)
        if spec.has_device_param:
            self.values["device"] = device
        self.nvml_index = (nvml_index or 0) if device == "cuda" else None
        self.timeout = timeout if timeout is not None else spec.timeout
        self.grace_s, self.rate_hz = GRACE_S if grace_s is None else grace_s, rate_hz  # None: the default
        self.nvml, self.sampler = nvml, sampler
        self._own_sampler = sampler is None
        self.gpu_pos: int | None = None  # position of our GPU in the sampler's ticks
        self.static: dict | None = None
        self.peaks: dict | None = None
        self.events = RunEvents(on_event)
        # made when a stop is asked: the workload looks for it once it listens (gputop/workload/script.py)
        self._stop_file: str | None = os.path.join(tempfile.gettempdir(),
                                                   f"gputop-stop-{os.getpid()}-{uuid.uuid4().hex}")
        # re-entrant: a second Ctrl-C's handler may interrupt the first's (a Lock deadlocked there under load)
        self._stop_file_lock = threading.RLock()
        self._readers_ready = threading.Event()  # start() has made the pipes' readers
        self.status = "pending"  # then "running", then one of STATUSES
        self.child: Child | None = None
        self.command: list[str] = []
        self.started_at: str | None = None
        self.t0: float | None = None
        self.t_end: float | None = None
        self.signum: int | None = None  # the signal that stopped gputop, if one did
        self.stopping = False  # the user (or a signal) asked to stop
        self.ticks: list[dict] = []
        self._ticks_lock = threading.Lock()
        self._stop_pending = False  # stop() before the child existed
        self._finished = threading.Event()
        self._final_doc: dict | None = None
        self._readers: list[threading.Thread] = []

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
            uuids = gpu_uuids(self._nvml())
            if self.nvml_index >= len(uuids):
                raise ValueError(f"no GPU with NVML index {self.nvml_index} ({len(uuids)} GPU(s))")
            env = child_env_all(uuids, env) if self.spec.gpus == "all" else child_env_for(self.nvml_index, uuids, env)
        multicast_off(env)  # NVLink multicast stays off in every child (NCCL, symmetric memory, NVSHMEM)
        root = str(paths.package_root())
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        env[STOP_FILE_ENV] = self._stop_file
        return env

    def _nvml(self):
        if self.nvml is None:
            from gputop.telemetry.nvml import Nvml

            self.nvml = Nvml()
        return self.nvml

    def start(self) -> "WorkloadRun":
        """Launch the child. A launch that fails ends the run at once (status "error", its document built)."""
        if self.status != "pending":
            raise RuntimeError("a WorkloadRun starts once")
        self.command = self.build_command()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.t0 = time.monotonic()
        try:
            env = self.build_env()
            self._open_telemetry()
            self.child = Child(self.command, interrupt="leader", grace_s=self.grace_s, timeout=self.timeout,
                               on_exit=self._on_exit, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, text=True, encoding="utf-8", errors="replace",
                               bufsize=1)
            self.child.start()
        except Exception as exc:  # no GPU after all, no python, a broken sampler: the run ends here, said why
            self.child = None
            self._close_telemetry()
            self.t_end = time.monotonic()
            self.status = "error"
            self.events.runner_event("error", kind="launch", message=f"cannot start the workload: {exc}", detail="")
            self._finish()
            return self
        self.status = "running"
        if self.sampler is not None:
            self.sampler.source.watch(self.child.pid)
            self.sampler.listeners.append(self._on_tick)
            if self._own_sampler:
                self.sampler.start()
        proc = self.child.proc
        for stream, fn in ((proc.stdout, self.events.read_stdout), (proc.stderr, self.events.read_stderr)):
            t = threading.Thread(target=fn, args=(stream,), daemon=True, name=f"gputop-run-{fn.__name__}")
            t.start()
            self._readers.append(t)
        self._readers_ready.set()
        if self._stop_pending:  # stop() came before the child existed
            self.child.stop()
        return self

    def _open_telemetry(self) -> None:
        """Static facts and peaks of our GPU, and the sampler (our own unless one was given)."""
        if self.sampler is not None:
            source = self.sampler.source
            indices = source.indices if source.kind == "live" else []  # a recording's GPUs are not this machine's
            if self.device == "cuda" and self.nvml_index in indices:
                self.gpu_pos = indices.index(self.nvml_index)
                self.static = self.sampler.source.static()[self.gpu_pos]
        else:
            from gputop.telemetry.live import LiveSource
            from gputop.telemetry.sampler import Sampler

            gpus = [self.nvml_index] if self.device == "cuda" else []
            if self.device == "cuda" and self.spec.gpus == "all":  # a torchrun job: every GPU, ours first
                gpus += [i for i in range(len(gpu_uuids(self._nvml()))) if i != self.nvml_index]
            source = LiveSource(self._nvml(), gpus=gpus)
            if self.device == "cuda" and source.indices:
                self.gpu_pos = 0
                self.static = source.static()[0]
            self.sampler = Sampler(source, rate_hz=self.rate_hz)
        if self.static is not None:
            from gputop.analysis.peaks import compute_peaks

            try:
                self.peaks = compute_peaks(self.static)
            except (KeyError, TypeError, ValueError) as exc:  # a card the peak tables do not know
                self.events.warn("no_peaks", f"theoretical peaks unavailable: {exc}")

    def _close_telemetry(self) -> None:
        if self.sampler is None:
            return
        if self._on_tick in self.sampler.listeners:
            self.sampler.listeners.remove(self._on_tick)
        if self.child is not None:
            self.sampler.source.unwatch(self.child.pid)
        if self._own_sampler:
            self.sampler.stop()
            self.sampler.source.close()

    def _on_tick(self, tick: dict) -> None:
        with self._ticks_lock:
            self.ticks.append(tick)

    # -- stop --------------------------------------------------------------------------------------
    def stop(self, signum: int | None = None) -> None:
        """Ask the workload to stop (SIGINT; killed after the grace period). A second stop kills it now.
        ``signum``: the signal that stopped gputop, for the document and the exit code."""
        self.stopping = True
        if signum is not None and self.signum is None:
            self.signum = signum
        self._ask_stop_file()
        if self.child is None:
            self._stop_pending = not self._finished.is_set()
            return
        self.child.stop()

    def _ask_stop_file(self) -> None:
        with self._stop_file_lock:
            if self._stop_file is None:  # the run has ended
                return
            try:
                open(self._stop_file, "a").close()
            except OSError:
                pass

    def kill(self) -> None:
        """Kill the workload now (SIGKILL to its process group)."""
        self.stopping = True
        if self.child is None:
            self._stop_pending = not self._finished.is_set()
        else:
            self.child.kill()

    # -- the end -----------------------------------------------------------------------------------
    def _on_exit(self, rc: int) -> None:
        """On the child's supervisor thread, once the child and its group are gone."""
        try:
            self.t_end = self.child.t_end
            # a child that ends at once can end before start() has made its readers (seen beside other tests: the
            # run's "finished" came before the child's own "done")
            self._readers_ready.wait(5.0)
            for t in self._readers:
                t.join(5.0)
            self._close_telemetry()
            self._settle(rc)
        except BaseException as exc:  # a bug here must still end the run, with a document
            self.status = self.status if self.status in STATUSES else "error"
            self.events.runner_event("error", kind="runner", message=f"gputop's runner failed: {exc!r}", detail="")
        finally:
            self._finish()

    def _settle(self, rc: int) -> None:
        ev, child = self.events, self.child
        if child.killed:
            why = ("a second stop request" if child.kill_asked else
                   f"no exit within {self.grace_s:g} s of SIGINT after the {'timeout' if child.timed_out else 'stop request'}")
            ev.warn("killed", f"the workload was killed (SIGKILL to its process group): {why}")
        with ev.lock:
            kinds = [e["kind"] for e in ev.errors]
            stderr = "\n".join(ev.stderr_tail)
        end = final_status(rc, ev.done_status, stop_asked=child.stop_asked, killed=child.killed,
                           timed_out=child.timed_out, error_kinds=kinds, grace_s=self.grace_s, timeout=self.timeout)
        if end.message:
            ev.runner_event("error", kind=end.kind, message=end.message,
                            detail=stderr if end.kind in ("crashed", "exited", "exception") else "")
        elif end.status == "interrupted" and ev.done_status is None and stderr:
            ev.warn("stderr", "the workload ended without finishing; its last stderr lines: " + stderr[-2000:])
        if end.status == "error" and stderr:
            with ev.lock:
                for e in ev.errors:
                    e["detail"] = e["detail"] or stderr
        ev.close_phase(self.t_end)
        self.status = end.status

    def _finish(self) -> None:
        from gputop.runner.document import build_document

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
            from gputop.documents import clean

            self._final_doc = clean(doc)
        finally:
            with self._stop_file_lock:  # gone before wait() returns; a stop asked from now on makes none
                try:
                    os.unlink(self._stop_file)
                except OSError:
                    pass
                self._stop_file = None
            self._finished.set()  # wait() never hangs, whatever happened above
        self.events.emit({"event": "finished", "t": time.monotonic(), "source": "gputop", "status": self.status,
                          "exit_code": self.exit_code})

    # -- what the run is now -----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    @property
    def interrupted(self) -> bool:
        return (self.stopping and not (self.child and self.child.timed_out)) or self.status == "interrupted"

    @property
    def exit_code(self) -> int | None:
        if self.status not in STATUSES:
            return None
        with self.events.lock:
            kinds = [e["kind"] for e in self.events.errors]
        signum = self.signum if self.interrupted else None
        return exit_code_for(self.status, signum, kinds)
