"""The TUI's side of the runner: the workload list, starting and cancelling runs, one per GPU.

All runner calls of the TUI are here (no Textual), so the integration is one small module.
``on_event`` runs on the runner's reader threads: it only bumps a counter, and the UI's frame
timer picks the change up (no cross-thread call per event, nothing to deadlock on exit).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import psutil

from gputop.documents import dumps
from gputop.telemetry.sampler import DEFAULT_RATE_HZ
from gputop.workload.params import ParamError

__all__ = ["load_registry", "default_values", "parse_values", "no_live_gpu", "RunState",
           "RunController", "save_document", "RecordingSpec", "with_recordings"]


def no_live_gpu(source, statics: list[dict], na_reason: str | None = None) -> str | None:
    """Why workloads cannot run on a GPU in this session, in a few words; None when they can (a live
    NVML source with a GPU). A replay's GPUs are a recording: a run there would get no telemetry of
    its own GPU, and on a machine without one it could not start at all."""
    kind = source.kind
    if kind == "replay":
        return "--demo replays a recorded trace" if source.loop else "--replay plays a recorded trace"
    if kind != "live":
        return f"a {kind} source has no live GPU"
    if not statics:
        return f"NVML: {na_reason or 'no NVIDIA GPU found'}"
    return None


def load_registry():
    """(specs, errors): every workload ``gputop --list`` shows, and why any failed to load."""
    from gputop.runner.registry import Registry

    reg = Registry()
    return list(reg), list(reg.errors)


@dataclass
class RecordingSpec:
    """A recorded run on the workloads page, next to its workload: played back as it happened, not run
    (no parameters: it ran with the recorded ones)."""

    name: str
    workload: str
    path: str
    description: str
    params: list = field(default_factory=list)
    cpu: dict | None = None
    quick: dict = field(default_factory=dict)
    needs: list = field(default_factory=list)
    supports_cpu: bool = True
    has_device_param: bool = False


def with_recordings(specs: list, paths: list) -> tuple[list, list[str]]:
    """(``specs`` with an entry for each recorded run after its workload's, errors for unreadable ones).
    Only each file's first line is read here; the run itself when it is played."""
    from gputop.runner.recording import read_header, recording_label

    entries, errors = [], []
    for path in paths:
        try:
            header = read_header(path)
        except ValueError as exc:  # TraceError: not a recording, cut off, unreadable
            errors.append(str(exc))
            continue
        run = header["run"]
        params = ", ".join(f"{k}={v}" for k, v in (run.get("params") or {}).items() if k not in ("csv", "device"))
        name = recording_label(header)
        entries.append(RecordingSpec(name=name, workload=str(run.get("workload")), path=str(path), description=(
            f"replay the {name.split('(', 1)[1].rstrip(')')} run of {run.get('workload')}, paced as it happened "
            f"({params}); the results are the ones it measured")))
    out = list(specs)
    for e in entries:
        at = max((i for i, s in enumerate(out) if getattr(s, "workload", s.name) == e.workload), default=len(out) - 1)
        out.insert(at + 1, e)
    return out, errors


def default_values(spec, device: str) -> dict:
    """Parameter values the form starts with: defaults, then the CPU overrides for ``--device cpu``."""
    values = {p.name: p.default for p in spec.params}
    if device == "cpu" and spec.cpu:
        values.update(spec.cpu)
    values.pop("device", None)
    return values


def parse_values(spec, texts: dict[str, str]) -> dict:
    """Validate the form's texts (raises ParamError naming the parameter)."""
    by_name = {p.name: p for p in spec.params}
    out = {}
    for name, text in texts.items():
        if name not in by_name:
            raise ParamError(f"unknown parameter '{name}'")
        out[name] = by_name[name].parse(text)
    return out


@dataclass
class RunState:
    run: object  # gputop.runner.workload_run.WorkloadRun
    name: str
    target: str  # "GPU 0" or "CPU"
    events: int = 0
    progress: dict | None = None
    saved_to: str | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None  # monotonic time the UI first saw it finished

    @property
    def active(self) -> bool:
        return not self.run.finished

    def document(self) -> dict:
        doc = self.run.document()
        if self.active and doc.get("status") in ("pending",):
            doc["status"] = "running"
        return doc


class RunController:
    """Starts runs (one at a time per GPU, one on the CPU) and keeps every run of this session."""

    def __init__(self, sampler=None, nvml=None):
        self.sampler = sampler
        self.nvml = nvml
        self.runs: list[RunState] = []
        self._lock = threading.Lock()

    def active_on(self, target: str) -> RunState | None:
        return next((r for r in self.runs if r.target == target and r.active), None)

    @property
    def active(self) -> list[RunState]:
        return [r for r in self.runs if r.active]

    def start(self, spec, values: dict, device: str, nvml_index: int | None, timeout: float | None = None,
              grace_s: float | None = None) -> RunState:
        """Start ``spec``; raises RuntimeError if a run is already going on that GPU (or the CPU).

        A run that fails to start ends at once with its error (``WorkloadRun.start`` never leaves it running
        without a process)."""
        target = "CPU" if device == "cpu" else f"GPU {nvml_index or 0}"
        busy = self.active_on(target)
        if busy is not None:
            raise RuntimeError(f"{busy.name} is already running on {target}; cancel it first (c)")
        holder: dict = {}
        on_event = self._counter(holder)
        from gputop.runner.workload_run import WorkloadRun  # here: the monitor alone never loads the runner

        sampler = self.sampler if device == "cuda" and self._sampler_is_live() else None
        rate_hz = self.sampler.rate_hz if self.sampler is not None else DEFAULT_RATE_HZ  # a run's own sampler too
        run = WorkloadRun(spec, values, device=device, nvml_index=nvml_index, timeout=timeout, grace_s=grace_s,
                          rate_hz=rate_hz, on_event=on_event, nvml=self.nvml, sampler=sampler)
        return self._track(RunState(run=run, name=spec.name, target=target), holder)

    def replay(self, spec: RecordingSpec, speed: float = 1.0) -> RunState:
        """Play a recorded run (one at a time); raises RuntimeError if one is playing, TraceError (a
        ValueError) if the file is not a whole recording."""
        busy = self.active_on("recording")
        if busy is not None:
            raise RuntimeError(f"{busy.name} is being replayed; cancel it first (c)")
        from gputop.runner.recording import RecordedRun

        holder: dict = {}
        run = RecordedRun(spec.path, speed=speed, on_event=self._counter(holder))
        return self._track(RunState(run=run, name=spec.workload, target="recording"), holder)

    def _track(self, state: RunState, holder: dict) -> RunState:
        """Keep ``state`` among the session's runs (its event counter finds it in ``holder``) and start it."""
        holder["state"] = state
        with self._lock:
            self.runs.append(state)
        state.run.start()
        state.events += 1
        return state

    @staticmethod
    def _counter(holder: dict):
        def on_event(ev: dict) -> None:  # reader thread: count only
            st = holder.get("state")
            if st is None:
                return
            st.events += 1
            if ev.get("event") == "progress":
                st.progress = ev

        return on_event

    def _sampler_is_live(self) -> bool:
        return self.sampler is not None and self.sampler.source.kind == "live"

    def own_pids(self) -> set[int]:
        """PIDs of this session's running workloads (and their children), to tag in the process table."""
        pids: set[int] = set()
        for st in self.active:
            pid = getattr(st.run, "pid", None)
            if pid is None:
                continue
            pids.add(pid)
            try:
                pids.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.Error:  # it ended meanwhile
                pass
        return pids

    def trim(self) -> None:
        """Drop the telemetry ticks of finished runs (their final document already summarises them),
        so a long session with many runs keeps flat memory."""
        for st in self.runs:
            if st.ended is None and st.run.finished:
                st.ended = time.monotonic()
            ticks = getattr(st.run, "ticks", None)
            if st.run.finished and ticks:  # finished: document() returns the cached final document
                del ticks[:]

    def recent(self, keep_s: float) -> bool:
        """True while a run is active or finished less than ``keep_s`` seconds ago."""
        now = time.monotonic()
        return any(st.active or (st.ended is not None and now - st.ended < keep_s) for st in self.runs)

    def cancel(self, target: str | None = None, signum: int | None = None) -> list[RunState]:
        """Cancel the active run on ``target`` (all active runs if None); ``signum``: the signal that
        stopped gputop, for the run's document."""
        hit = [r for r in self.active if target is None or r.target == target]
        for r in hit:
            r.run.stop(signum)
        return hit

    def stop_all(self, timeout: float = 10.0) -> None:
        """Cancel every active run and wait until each has ended (quitting the TUI): the supervisor kills
        a run after its grace period; one still there after ``timeout`` is killed now."""
        runs = self.active
        for r in runs:
            if not r.run.stopping:  # one a signal already stopped keeps its grace period (a second stop kills)
                r.run.stop()
        end = time.monotonic() + timeout
        for r in runs:
            if not r.run.wait(max(0.1, end - time.monotonic())):
                r.run.kill()
                r.run.wait()


def save_document(doc: dict, folder: str | None = None) -> str:
    """Write a run document as JSON; returns the path."""
    folder = folder or os.getcwd()
    stamp = (doc.get("started_at") or time.strftime("%Y-%m-%dT%H:%M:%S")).replace(":", "").replace("+0000", "")
    path = os.path.join(folder, f"gputop-{doc.get('workload', 'run')}-{stamp[:17]}.json")
    n = 1
    base = path[:-5]
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}.json"
    with open(path, "w") as f:
        f.write(dumps(doc) + "\n")
    return path
