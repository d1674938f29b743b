"""Diagnose any command: ``gputop --run -- CMD ARGS...`` and ``gputop --watch PID``.

gputop samples every GPU (10 Hz) while the command runs as its child, finds the GPU(s) the command's
process tree uses (its pids in NVML's process list; else the GPUs whose memory or activity rose after
the start, which it says), and at the end prints a verdict timeline and a summary per GPU, or one
JSON document (``--json``, schema ``gputop/schema/monitor.schema.json``). The TUI shows the same live
through :class:`Monitor`.

The command's stdout passes through (to gputop's stderr with ``--json``, so stdout stays one JSON
document); its stderr passes through a pipe that gputop reads to spot out-of-memory errors; ``--log
FILE`` sends both to FILE. The command's exit code becomes gputop's (128+N when a signal N killed it).

Exit codes of gputop itself, before the command runs: 3 when NVML is unavailable (checked before
launching); 2 when the command cannot be started (not found, not executable). A shell says 127/126
there; gputop uses its usage code 2 so that "gputop could not start it" reads the same as every other
bad input. Ctrl-C: a terminal delivers it to the command too (same process group); gputop forwards
SIGINT itself when the terminal did not (``kill -INT``, no terminal), and on a second Ctrl-C always.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import gputop
from gputop import exitcodes
from gputop.analysis import thresholds as T
from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.timeline import format_timeline, overall, timeline
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import SUBCLASS_LABELS
from gputop.analysis.wording import advise
from gputop.format import gb, pct
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.trace import Recorder, read_trace

SCHEMA_VERSION = 1
MAX_TICKS = 12000  # kept for the final analysis; beyond it every other tick is dropped (20 min at 10 Hz)
TERM_GRACE_S = 5.0  # --timeout: SIGTERM, then SIGKILL after this
OOM_PATTERN = re.compile(rb"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
                         re.IGNORECASE)
TREE_REFRESH_S = 0.5
# NVML's process list every 2nd sample (5 Hz at 10 Hz) rather than the live view's every 10th: the moment
# the command first shows up on a GPU ends its "startup" segment, so it should not lag by a second.
PROCESS_EVERY = 2
OOM_MARK = "oom: the command reported out of memory"


# -- which GPUs the process tree uses ------------------------------------------------------------------
class GpuFinder:
    """A sampler listener: when did the watched process tree first appear on each GPU position.

    By pid: the tree's pids in a sample's ``processes`` (NVML's list). Otherwise (another PID
    namespace hides them) by a rise over the first tick: memory up by MEM_RISE_BYTES, or SM activity /
    kernel duty cycle from under half of ACTIVITY_RISE_PCT to above it; with ``active_ok`` (watching a
    process that was already running) any activity above ACTIVITY_RISE_PCT counts.
    """

    def __init__(self, pid: int | None = None, tree=None, active_ok: bool = False):
        self.pid = pid
        self.tree = tree  # callable -> set of pids; default: pid and its descendants (psutil)
        self.known: set[int] = set() if pid is None else {pid}
        self.by_pid: dict[int, float] = {}
        self.by_rise: dict[int, float] = {}
        self.active_ok = active_ok
        self._base: dict[int, tuple] = {}
        self._tree_t = 0.0
        self.lock = threading.Lock()

    def set_pid(self, pid: int) -> None:
        with self.lock:
            self.pid = pid
            self.known.add(pid)

    def _pids(self) -> set[int]:
        now = time.monotonic()
        if self.tree is not None:
            self.known |= set(self.tree())
        elif self.pid is not None and now - self._tree_t > TREE_REFRESH_S:
            self._tree_t = now
            try:
                import psutil

                root = psutil.Process(self.pid)
                self.known |= {root.pid} | {c.pid for c in root.children(recursive=True)}
            except Exception:  # gone: keep what we knew
                pass
        return self.known

    def __call__(self, tick: dict) -> None:
        with self.lock:
            for pos, s in enumerate(tick.get("gpus") or []):
                t = tick["t"]
                procs = s.get("processes")
                if procs and self.pid is not None and pos not in self.by_pid:
                    if {p.get("pid") for p in procs} & self._pids():
                        self.by_pid[pos] = t
                mem = s.get("mem_used_bytes")
                act = max(s.get("sm_active_pct") or 0.0, s.get("util_gpu_pct") or 0.0)
                if pos not in self._base:
                    self._base[pos] = (mem, act)
                    if not self.active_ok:
                        continue
                if pos in self.by_rise:
                    continue
                base_mem, base_act = self._base[pos]
                rose = mem is not None and base_mem is not None and mem - base_mem >= T.MEM_RISE_BYTES
                busy = act >= T.ACTIVITY_RISE_PCT and (self.active_ok or base_act < T.ACTIVITY_RISE_PCT / 2)
                if rose or busy:
                    self.by_rise[pos] = t

    def result(self) -> tuple[dict[int, float], str]:
        """({position: first seen t}, how): how is "process list", "memory/activity rise" or "none"."""
        with self.lock:
            if self.by_pid:
                return dict(self.by_pid), "process list"
            if self.by_rise:
                return dict(self.by_rise), "memory/activity rise"
            return {}, "none"


class TickStore:
    """All ticks of a run for the final analysis, slimmed (no process lists), thinned when long."""

    def __init__(self, max_ticks: int = MAX_TICKS):
        self.ticks: list[dict] = []
        self.max_ticks = max_ticks
        self.stride = 1
        self._n = 0
        self.lock = threading.Lock()

    def __call__(self, tick: dict) -> None:
        self._n += 1
        if (self._n - 1) % self.stride:
            return
        host = dict(tick.get("host") or {})
        cores = host.pop("cpu_per_core_pct", None)
        if cores:
            host["cpu_per_core_pct"] = [max(cores)]  # the classifier reads only the busiest core
        slim = {"t": tick["t"], "gpus": [dict(s, processes=None) for s in tick.get("gpus") or []], "host": host}
        with self.lock:
            self.ticks.append(slim)
            if len(self.ticks) > self.max_ticks:
                self.ticks = self.ticks[::2]
                self.stride *= 2

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.ticks)


# -- the monitor -----------------------------------------------------------------------------------------
class Monitor:
    """Samples a source while one process (tree) runs, then diagnoses each GPU it used.

    ``source``: a LiveSource, or a ReplaySource (tests, offline diagnosis). The TUI can call
    :meth:`live` for the current verdicts while a run is in progress.
    """

    def __init__(self, source, rate_hz: float = 10.0, record: str | None = None, note: str = "",
                 window_s: float = T.WINDOW_S, tree=None, active_ok: bool = False):
        self.source = source
        self.static = source.static()
        self.peaks = [compute_peaks(s) for s in self.static]
        self.window_s = window_s
        for reader in getattr(source, "readers", []):
            reader.process_every = PROCESS_EVERY
        self.sampler = Sampler(source, rate_hz=rate_hz)
        self.store = TickStore()
        self.finder = GpuFinder(tree=tree, active_ok=active_ok)
        self.recorder = Recorder(record, self.static, rate_hz=rate_hz, note=note) if record else None
        self.sampler.listeners += [self.finder, self.store] + ([self.recorder] if self.recorder else [])
        self.pid: int | None = None
        self.t0: float | None = None
        self.oom_times: list[float] = []
        self._marked: set[tuple[int, str]] = set()  # (position, how found)

    def baseline(self) -> None:
        """One tick before the process starts (the "before" of the rise detection)."""
        self.sampler.step()

    def watch(self, pid: int) -> None:
        self.pid = pid
        self.finder.set_pid(pid)
        self.source.watch(pid)
        last = self.sampler.latest()
        self.t0 = last["t"] if last else None
        self.mark("started")

    def start(self) -> None:
        self.sampler.start()

    def mark(self, label: str) -> None:
        if self.recorder is not None:
            last = self.sampler.latest()
            self.recorder.mark(label, last["t"] if last else None)

    def poll_marks(self) -> None:
        """Record "on GPU n" marks as the finder sees the tree appear (for traces)."""
        first, how = self.finder.result()
        for pos, t in first.items():
            if (pos, how) not in self._marked:  # a rise seen first, then the process list: both marked
                self._marked.add((pos, how))
                if self.recorder is not None:
                    self.recorder.mark(f"on GPU {self.static[pos].get('index', pos)} ({how})", t)

    def note_oom(self) -> None:
        last = self.sampler.latest()
        t = last["t"] if last else time.monotonic()
        self.oom_times.append(t)
        if self.recorder is not None:
            self.recorder.mark(OOM_MARK, t)

    def stop(self) -> None:
        self.sampler.stop()
        self.poll_marks()
        if self.recorder is not None:
            self.recorder.close()

    def close(self) -> None:
        self.source.close()

    def _hints(self, a: float, b: float) -> dict:
        return {"oom": True} if any(a <= t < b + self.window_s for t in self.oom_times) else {}

    def live(self, seconds: float = T.WINDOW_S) -> list[tuple[int, Verdict]]:
        """(position, verdict) over the last ``seconds`` for each GPU the tree uses (all if none yet)."""
        window = self.sampler.window(seconds)
        first, _ = self.finder.result()
        positions = sorted(first) or list(range(len(self.static)))
        return [(p, classify(window, self.static[p], self.peaks[p], watched_pid=self.pid, gpu=p))
                for p in positions if window and p < len(window[-1]["gpus"])]

    def analyze(self) -> dict:
        """Per-GPU timelines and verdicts, and the run's overall verdict (the "diagnosis" part)."""
        ticks = self.store.snapshot()
        t0 = self.t0 if self.t0 is not None else (ticks[0]["t"] if ticks else 0.0)
        ticks = [t for t in ticks if t["t"] >= t0]
        first, how = self.finder.result()
        used = sorted(first)
        positions = used or list(range(len(self.static)))
        gpus = []
        for pos in positions:
            segs = timeline(ticks, pos, self.static[pos], self.peaks[pos], window_s=self.window_s,
                            watched_pid=self.pid, hints=self._hints, t_on_gpu=first.get(pos), t0=t0)
            ov = overall(segs)
            if self.oom_times and ov is not None and ov["class"] != "memory-capacity":
                ov = _oom_overall(ov)
            gpus.append({
                "index": self.static[pos].get("index", pos), "name": self.static[pos].get("name"),
                "used": pos in first, "first_seen_s": round(first[pos] - t0, 3) if pos in first else None,
                "timeline": segs, "verdict": ov, "summary": _summary(ticks, pos, self.pid),
            })
        notes = []
        if how == "memory/activity rise":
            notes.append("the command's pids are not in NVML's process list (another PID namespace?); its GPUs "
                         "were picked by a rise in memory use or activity after it started")
        elif how == "none":
            notes.append("the command did not appear on any GPU gputop watched (no pid in NVML's process list, "
                         "no rise in memory use or activity)")
        if self.oom_times:
            notes.append("the command reported an out-of-memory error on its stderr")
        return {"gpus_used": [self.static[p].get("index", p) for p in used], "gpu_detection": how,
                "gpus": gpus, "verdict": _run_verdict(gpus, how), "notes": notes,
                "sampling": {"rate_hz": self.sampler.rate_hz, "ticks": len(ticks), "stride": self.store.stride,
                             "sampler_errors": self.sampler.errors}}


def _oom_overall(ov: dict) -> dict:
    out = dict(ov)
    out["mixed"] = [ov["class"]] + [c for c in ov.get("mixed", []) if c != "memory-capacity"]
    out.update({"class": "memory-capacity", "label": "memory-capacity pressure", "subclass": "oom",
                "advice": advise("memory-capacity", "oom"),
                "evidence_text": "memory-capacity pressure: the command reported an out-of-memory error; "
                                 "before it: " + ov.get("evidence_text", "")})
    return out


def _run_verdict(gpus: list[dict], how: str) -> dict:
    """The run's verdict: that of the used GPU with the most non-idle time; idle when none was used."""
    used = [g for g in gpus if g["used"] and g["verdict"]]
    if not used:
        ev = {"gpus_watched": len(gpus)}
        text = ("idle: the command used no GPU gputop could see" if how == "none"
                else "idle: no samples while the command ran on its GPU")
        return Verdict("idle", None, 0.9 if how == "none" else 0.3, ev, text, advise("idle", None)).to_dict()

    def busy_time(g):
        return sum(d for c, d in (g["verdict"].get("time_by_class_s") or {}).items() if c != "idle")

    best = max(used, key=busy_time)
    out = dict(best["verdict"])
    out["gpu"] = best["index"]
    return out


def _summary(ticks: list[dict], pos: int, pid: int | None) -> dict:
    try:
        from gputop.analysis.summary import summarize
    except ImportError:  # written in parallel; keep a minimal one so the document is complete
        return _minimal_summary(ticks, pos)
    return summarize(ticks, pos, pid)


def _minimal_summary(ticks: list[dict], pos: int) -> dict:
    def mm(field):
        vals = [t["gpus"][pos].get(field) for t in ticks if pos < len(t["gpus"])]
        vals = [float(v) for v in vals if v is not None]
        return {"mean": sum(vals) / len(vals), "max": max(vals)} if vals else {"mean": None, "max": None}

    return {"samples": len(ticks), "seconds": (ticks[-1]["t"] - ticks[0]["t"]) if len(ticks) > 1 else 0.0,
            **{f: mm(f) for f in ("util_gpu_pct", "sm_active_pct", "dram_bw_pct", "tensor_pct", "power_w")}}


# -- running a command ------------------------------------------------------------------------------------
def exit_code_of(returncode: int) -> int:
    """A child's return code as a shell reports it: 128+N for a child killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _terminal_sent_it() -> bool:
    """True when a terminal Ctrl-C reached our whole foreground process group, the child included."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


class _Pump(threading.Thread):
    """Copies the child's stderr to ``dst`` as it comes (bytes, no line buffering), spotting OOM errors."""

    def __init__(self, src, dst, on_oom):
        super().__init__(name="gputop-stderr", daemon=True)
        self.src, self.dst, self.on_oom = src, dst, on_oom
        self.oom = False

    def run(self) -> None:
        tail = b""
        fd = self.src.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                self.dst.write(chunk)
                self.dst.flush()
            except (OSError, ValueError):
                pass
            if not self.oom and OOM_PATTERN.search(tail + chunk):
                self.oom = True
                self.on_oom()
            tail = chunk[-64:]


class CommandRun:
    """One command under a monitor, without blocking: ``start()``, ``poll()`` until it returns the exit
    code, then ``finish()`` for the run facts. ``signal(sig)`` sends a signal to the command.
    ``run_command`` drives it for the CLI; the TUI can drive it from its own loop.
    """

    def __init__(self, monitor: Monitor, command: list[str], *, json_mode: bool = False, log: str | None = None,
                 timeout: float | None = None, err=None, stdin=None):
        self.monitor, self.command = monitor, command
        self.stdin = stdin  # the TUI gives the command /dev/null: the terminal's keys are the TUI's
        self.json_mode, self.log, self.timeout = json_mode, log, timeout
        self.err = err if err is not None else sys.stderr
        self.child: subprocess.Popen | None = None
        self.sigints = 0
        self.timed_out = False
        self._logf = None
        self._pumps: list[_Pump] = []
        self._killed_at: float | None = None
        self.t_start = self.t_end = None

    def start(self) -> "CommandRun":
        """Launch the command (raises FileNotFoundError / PermissionError / OSError if it cannot start)."""
        err = self.err
        self._logf = open(self.log, "wb") if self.log else None
        try:
            if self._logf is not None:
                stdout = self._logf
            elif self.json_mode:
                err.flush()
                stdout = err.fileno() if _has_fileno(err) else subprocess.PIPE
            else:
                stdout = None
            self.monitor.baseline()
            self.t_start = time.monotonic()
            self.child = subprocess.Popen(self.command, stdin=self.stdin, stdout=stdout, stderr=subprocess.PIPE)
        except BaseException:
            if self._logf is not None:
                self._logf.close()
            raise
        self.monitor.watch(self.child.pid)
        self.monitor.start()
        err_bin = getattr(err, "buffer", None)
        dst = self._logf if self._logf is not None else (err_bin if err_bin is not None else _TextSink(err))
        self._pumps = [_Pump(self.child.stderr, dst, self.monitor.note_oom)]
        if stdout is subprocess.PIPE:  # --json into a stream without a file descriptor (tests)
            self._pumps.append(_Pump(self.child.stdout, dst, lambda: None))
        for p in self._pumps:
            p.start()
        return self

    def poll(self) -> int | None:
        """None while the command runs (and enforce --timeout); its exit code once it has ended."""
        rc = self.child.poll()
        if rc is not None:
            return exit_code_of(rc)
        self.monitor.poll_marks()
        now = time.monotonic()
        if self.timeout and now - self.t_start >= self.timeout and not self.timed_out:
            self.timed_out = True
            print(f"gputop: the command ran past --timeout {self.timeout:g} s; stopping it", file=self.err)
            self.child.terminate()
            self._killed_at = now
        if self._killed_at is not None and now - self._killed_at > TERM_GRACE_S:
            self.child.kill()
            self._killed_at = None
        return None

    def signal(self, sig: int) -> None:
        try:
            self.child.send_signal(sig)
        except ProcessLookupError:
            pass

    def on_signal(self, signum, frame=None) -> None:
        """gputop's SIGINT/SIGTERM handler while the command runs (see the module docstring)."""
        if signum == signal.SIGINT:
            self.sigints += 1
            if self.sigints == 1 and _terminal_sent_it():
                return  # the terminal already delivered it to the command
            self.signal(signal.SIGINT if self.sigints <= 2 else signal.SIGKILL)
        else:
            self.signal(signum)

    def finish(self) -> dict:
        """After the command ended: stop sampling, close the log; the run facts."""
        self.child.wait()
        self.t_end = time.monotonic()
        for p in self._pumps:
            p.join(2.0)
        code = exit_code_of(self.child.returncode)
        self.monitor.poll_marks()  # "on GPU" marks found since the last poll go before the exit mark
        self.monitor.mark(f"exited {code}")
        self.monitor.stop()
        if self._logf is not None:
            self._logf.close()
        if self.timed_out:
            how = "timeout"
        elif self.sigints:
            how = "interrupted"
        elif self.child.returncode < 0:
            how = f"signal {-self.child.returncode}"
        else:
            how = "exited"
        return {"pid": self.child.pid, "exit_code": code, "ended": how,
                "wall_s": round(self.t_end - self.t_start, 3), "oom": bool(self.monitor.oom_times)}


def run_command(monitor: Monitor, command: list[str], *, json_mode: bool = False, log: str | None = None,
                timeout: float | None = None, err=None, poll_s: float = 0.05) -> dict:
    """Run ``command`` under ``monitor`` until it ends; returns the run facts (exit code, wall time, how
    it ended). SIGINT/SIGTERM to gputop go to the command meanwhile. Raises like ``CommandRun.start``."""
    run = CommandRun(monitor, command, json_mode=json_mode, log=log, timeout=timeout, err=err).start()
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, run.on_signal)
    try:
        while run.poll() is None:
            time.sleep(poll_s)
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)
    return run.finish()


def _has_fileno(stream) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


class _TextSink:
    """Bytes into a text stream (a test's StringIO)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, b: bytes) -> None:
        self.stream.write(b.decode("utf-8", "replace"))

    def flush(self) -> None:
        self.stream.flush()


def build_document(mode: str, monitor: Monitor, run: dict, command: list[str] | None, started_at: str,
                   log: str | None = None) -> dict:
    analysis = monitor.analyze()
    src = monitor.source
    return {
        "schema_version": SCHEMA_VERSION,
        "gputop_version": gputop.__version__,
        "mode": mode,
        "command": command,
        "pid": run.get("pid"),
        "exit_code": run.get("exit_code"),
        "ended": run.get("ended"),
        "started_at": started_at,
        "wall_s": run.get("wall_s"),
        "log": log,
        "source": {"kind": src.kind, "path": getattr(src, "path", None)},
        "host": {"hostname": platform.node()},
        **analysis,
    }


# -- text output ------------------------------------------------------------------------------------------
def render_text(doc: dict) -> str:
    lines = []
    if doc["mode"] == "run":
        lines.append(f"gputop: `{shlex.join(doc['command'])}` {_ended(doc)} after {doc['wall_s']:.1f} s")
    else:
        lines.append(f"gputop: watched pid {doc['pid']} for {doc['wall_s']:.1f} s ({doc['ended']})")
    for n in doc.get("notes") or []:
        lines.append(f"  note: {n}")
    for g in doc["gpus"]:
        seen = (f"found by {doc['gpu_detection']} at {g['first_seen_s']:.1f} s" if g["used"]
                else "not used by the command")
        lines.append("")
        lines.append(f"GPU {g['index']} ({g.get('name') or 'n/a'}), {seen}")
        if g["timeline"]:
            lines.append("  timeline:")
            lines += ["  " + ln for ln in format_timeline(g["timeline"])]
        v = g["verdict"]
        if v:
            lines += _verdict_lines(v, "  ")
        s = g.get("summary") or {}
        lines.append("  summary: " + _summary_text(s))
    v = doc["verdict"]
    lines.append("")
    lines.append(f"verdict: {_name(v)} (confidence {v['confidence']:.2f})"
                 + (f" on GPU {v['gpu']}" if v.get("gpu") is not None and len(doc["gpus"]) > 1 else ""))
    if _is_mixed(v):
        lines.append(f"  a mixed run: {_shares(v)}")
    lines.append(f"  {v['evidence_text']}")
    lines.append(f"  advice: {v['advice']}")
    if doc["mode"] == "run":
        lines.append(f"exit code {doc['exit_code']}")
    return "\n".join(lines) + "\n"


def _is_mixed(v: dict) -> bool:
    return v.get("share") is not None and v["share"] < 0.5 and bool(v.get("mixed"))


def _shares(v: dict) -> str:
    busy = {c: d for c, d in (v.get("time_by_class_s") or {}).items() if c != "idle"}
    total = sum(busy.values()) or 1.0
    return ", ".join(f"{c} {pct(100 * d / total)}" for c, d in sorted(busy.items(), key=lambda x: -x[1]))


def _ended(doc):
    if doc["ended"] == "exited":
        return f"exited with code {doc['exit_code']}"
    if doc["ended"] == "timeout":
        return "was stopped at its timeout"
    return f"ended ({doc['ended']}, code {doc['exit_code']})"


def _name(v: dict) -> str:
    sub = v.get("subclass")
    return v["label"] + (f" ({SUBCLASS_LABELS.get(sub, sub)})" if sub else "")


def _verdict_lines(v: dict, ind: str) -> list[str]:
    share = ""
    if v.get("share") is not None:
        share = f", {pct(100 * v['share'])} of the {'run' if v['class'] == 'idle' else 'busy time'}"
    out = [f"{ind}verdict: {_name(v)}, confidence {v['confidence']:.2f}{share}",
           f"{ind}  evidence: {v['evidence_text']}",
           f"{ind}  advice: {v['advice']}"]
    if _is_mixed(v):
        out.append(f"{ind}  a mixed run (busy time): {_shares(v)}")
    elif v.get("mixed"):
        out.append(f"{ind}  also: {', '.join(v['mixed'])}")
    for n in v.get("notes") or []:
        out.append(f"{ind}  note: {n}")
    for m in v.get("missing") or []:
        out.append(f"{ind}  missing: {m}")
    return out


def _summary_text(s: dict) -> str:
    def mm(key, unit="%"):
        v = s.get(key) or {}
        if not isinstance(v, dict) or v.get("mean") is None:
            return "n/a"
        if unit == "%":
            return f"{v['mean']:.0f}/{v['max']:.0f}%"
        return f"{v['mean']:.0f}/{v['max']:.0f} {unit}"

    parts = [f"mean/max SM active {mm('sm_active_pct')}", f"kernels {mm('util_gpu_pct')}",
             f"DRAM {mm('dram_bw_pct')}", f"tensor {mm('tensor_pct')}", f"power {mm('power_w', 'W')}"]
    if isinstance(s.get("sm_clock_mhz"), dict):
        parts.append(f"SM clock {mm('sm_clock_mhz', 'MHz')}")
    if isinstance(s.get("mem_used_bytes"), dict) and s["mem_used_bytes"].get("max") is not None:
        parts.append(f"memory max {gb(s['mem_used_bytes']['max'])} GiB")
    if s.get("clock_reasons_seen"):
        parts.append("clock events: " + ", ".join(s["clock_reasons_seen"]))
    if isinstance(s.get("workload_cpu_pct"), dict) and s["workload_cpu_pct"].get("mean") is not None:
        parts.append(f"process CPU {mm('workload_cpu_pct')}")
    return ", ".join(parts)


# -- entry points -----------------------------------------------------------------------------------------
def clean(obj):
    """The document with non-finite floats (NaN, inf) as null, so it stays valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj


def _emit(args, doc: dict) -> None:
    doc = clean(doc)
    if getattr(args, "output", None):
        try:
            with open(args.output, "w") as f:
                json.dump(doc, f, indent=2)
        except OSError as exc:
            print(f"gputop: cannot write {args.output}: {exc.strerror}", file=sys.stderr)
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(doc))
    sys.stdout.flush()


def _check_live_args(args, what: str) -> str | None:
    if getattr(args, "replay", None) or getattr(args, "demo", False):
        return f"{what} diagnoses live GPUs; it does not take --replay or --demo"
    return None


def _open(args):
    """(source, None) or (None, exit code) after printing why."""
    from gputop.cli import fail
    from gputop.sources import SourceError, open_source

    try:
        return open_source(args, need_gpu=True), None
    except SourceError as exc:
        return None, fail(exc.code, str(exc))


def _new_monitor(args, src, note: str, active_ok: bool = False):
    from gputop.cli import fail

    try:
        return Monitor(src, rate_hz=args.rate, record=args.record, note=note, active_ok=active_ok), None
    except ValueError as exc:  # the sampling rate
        src.close()
        return None, fail(exitcodes.USAGE, str(exc))
    except OSError as exc:
        src.close()
        return None, fail(exitcodes.USAGE, f"cannot write {args.record}: {exc.strerror}")


def main_command(args, command: list[str]) -> int:
    """``gputop --run -- CMD ARGS...``."""
    from gputop.cli import fail

    bad = _check_live_args(args, "--run -- CMD")
    if bad:
        return fail(exitcodes.USAGE, bad)
    if args.seconds is not None:
        return fail(exitcodes.USAGE, "--seconds goes with --record or --watch; to stop a command use --timeout S")
    if not command:
        return fail(exitcodes.USAGE, "no command after `--`")
    src, code = _open(args)  # NVML first: exit 3 before anything runs
    if src is None:
        return code
    if "/" not in command[0] and shutil.which(command[0]) is None:
        src.close()
        return fail(exitcodes.USAGE, f"command not found: {command[0]}")
    mon, code = _new_monitor(args, src, note="gputop --run -- " + shlex.join(command))
    if mon is None:
        return code
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if not args.json:
        print(f"gputop: running `{shlex.join(command)}`, sampling {len(mon.static)} GPU(s) at {args.rate:g} Hz",
              file=sys.stderr)
    try:
        try:
            run = run_command(mon, command, json_mode=args.json, log=args.log, timeout=args.timeout)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            mon.stop()
            what = "command not found" if isinstance(exc, FileNotFoundError) else "cannot run the command"
            return fail(exitcodes.USAGE, f"{what}: {command[0]} ({exc.strerror})")
        except OSError as exc:
            mon.stop()
            return fail(exitcodes.USAGE, f"cannot run the command: {command[0]} ({exc.strerror or exc})")
        doc = build_document("run", mon, run, command, started_at, log=args.log)
    finally:
        mon.close()
    _emit(args, doc)
    return exitcodes.TIMEOUT if run["ended"] == "timeout" else run["exit_code"]


def main_watch(args) -> int:
    """``gputop --watch PID [--seconds N]``: until the process exits, N seconds pass, or Ctrl-C."""
    import psutil

    from gputop.cli import fail

    bad = _check_live_args(args, "--watch PID")
    if bad:
        return fail(exitcodes.USAGE, bad)
    pid = args.watch
    if pid <= 0 or not psutil.pid_exists(pid):
        return fail(exitcodes.USAGE, f"--watch {pid}: no such process")
    src, code = _open(args)
    if src is None:
        return code
    mon, code = _new_monitor(args, src, note=f"gputop --watch {pid}", active_ok=True)
    if mon is None:
        return code
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    if not args.json:
        until = f" for {args.seconds:g} s" if args.seconds else " until it exits or Ctrl-C"
        print(f"gputop: watching pid {pid}{until}",
              file=sys.stderr)
    try:
        run = watch_process(mon, pid, seconds=args.seconds)
        doc = build_document("watch", mon, run, None, started_at)
    finally:
        mon.close()
    _emit(args, doc)
    return exitcodes.OK


def watch_process(monitor: Monitor, pid: int, seconds: float | None = None, poll_s: float = 0.1) -> dict:
    """Sample while ``pid`` lives (or ``seconds``); Ctrl-C ends the watch normally."""
    import psutil

    monitor.baseline()
    monitor.watch(pid)
    monitor.start()
    t_start = time.monotonic()
    how = "exited"
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        proc = None
    try:
        while True:
            if proc is None or not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                how = "exited"
                break
            if seconds is not None and time.monotonic() - t_start >= seconds:
                how = "seconds"
                break
            monitor.poll_marks()
            time.sleep(poll_s)
    except psutil.Error:
        how = "exited"
    except KeyboardInterrupt:
        how = "interrupted"
    monitor.stop()
    return {"pid": pid, "exit_code": None, "ended": how, "wall_s": round(time.monotonic() - t_start, 3), "oom": False}


# -- offline: a recorded trace of a monitored run -----------------------------------------------------------
def diagnose_trace(path: str, window_s: float = T.WINDOW_S) -> dict:
    """The monitor's analysis of a trace recorded with ``gputop --record FILE --run -- CMD`` (or any trace).

    The watched pid is the one in the ticks' ``host.procs`` (if exactly one); its GPUs are found the same
    way as live (pids in NVML's process lists, else a rise after the first tick).
    """
    from gputop.telemetry.trace import ReplaySource

    header, rows = read_trace(path)
    ticks = [r for r in rows if r["type"] == "tick"]
    pids = {k for t in ticks for k in ((t.get("host") or {}).get("procs") or {})}
    pid = int(next(iter(pids))) if len(pids) == 1 else None
    src = ReplaySource(path, speed=float("inf"))
    mon = Monitor(src, rate_hz=header.get("rate_hz") or 10.0, window_s=window_s, tree=lambda: set())
    if pid is not None:
        mon.finder.set_pid(pid)
        mon.pid = pid
    while True:
        if mon.sampler.step() is None:
            break
    mon.oom_times = [r["t"] for r in rows if r["type"] == "mark" and r["label"] == OOM_MARK]
    mon.t0 = ticks[0]["t"] if ticks else 0.0
    analysis = mon.analyze()
    analysis["header"] = {k: header.get(k) for k in ("note", "hostname", "recorded_at", "rate_hz")}
    analysis["pid"] = pid
    return analysis


# -- labelled traces (bench/proof, tests, docs/diagnosis.md) --------------------------------------------------
EXPECT_RE = re.compile(r"expect=([a-z-]+)")


def trace_expectations(path: str, header: dict | None = None, rows: list[dict] | None = None) -> dict:
    """What a labelled trace should be diagnosed as.

    ``overall``: from the file name ``<case>.<class>.jsonl.gz`` or ``expect=<class>`` in the header note;
    ``phases``: ``[(label, class, t_start, t_end)]`` for marks whose label holds ``expect=<class>``.
    """
    from gputop.analysis.vocabulary import CLASSES

    if header is None or rows is None:
        header, rows = read_trace(path)
    name = os.path.basename(path)
    for ext in (".jsonl.gz", ".jsonl"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    overall_cls = None
    parts = name.split(".")
    if len(parts) > 1 and parts[-1] in CLASSES:
        overall_cls = parts[-1]
    m = EXPECT_RE.search(header.get("note") or "")
    if m and m.group(1) in CLASSES:
        overall_cls = m.group(1)
    ticks_t = [r["t"] for r in rows if r["type"] == "tick"]
    end = ticks_t[-1] if ticks_t else 0.0
    marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
    phases = []
    for i, (t, label) in enumerate(marks):
        m = EXPECT_RE.search(label)
        if m and m.group(1) in CLASSES:
            phases.append((label, m.group(1), t, marks[i + 1][0] if i + 1 < len(marks) else end))
    return {"overall": overall_cls, "phases": phases}
