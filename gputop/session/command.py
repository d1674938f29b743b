"""A watched process under a :class:`~gputop.session.monitor.Monitor`: a command gputop runs (through the
one supervisor, :class:`gputop.runner.child.Child`) or a process that was already running (``--watch``).

Polled without blocking: ``start()``, ``poll()`` from the caller's loop (the headless loop, the TUI's
frame timer) until it returns True, ``stop(signum)`` to end it (SIGINT to the command's group, SIGKILL
after the grace period; a second stop kills at once; a watch just ends and the pid lives on), then
``finish()`` for the document (built once). ``exit_code()`` is gputop's: the command's own code, 6 after
--timeout, 128+N when signal N stopped gputop, 0 for a watch that ended by itself.

The command's stdout passes through (to ``err`` with ``json_mode``, so stdout stays one document); its
stderr passes through a pipe that gputop reads to spot out-of-memory errors; ``log`` sends both to a file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

from gputop import exitcodes
from gputop.runner.child import GRACE_S, Child
from gputop.session.report import build_document
from gputop.telemetry.devices import multicast_off

OOM_PATTERN = re.compile(rb"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
                         re.IGNORECASE)


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


class _TextSink:
    """Bytes into a text stream (a test's StringIO)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, b: bytes) -> None:
        self.stream.write(b.decode("utf-8", "replace"))

    def flush(self) -> None:
        self.stream.flush()


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Session:
    """``command`` (run mode) or ``pid`` (watch mode) under ``monitor``."""

    def __init__(self, monitor, command: list[str] | None = None, pid: int | None = None, *, log: str | None = None,
                 timeout: float | None = None, seconds: float | None = None, grace_s: float | None = None,
                 json_mode: bool = False, err=None, stdin=None):
        self.monitor = monitor
        self.mode = "run" if command else "watch"
        self.command, self.pid, self.log = command, pid, log
        self.timeout, self.seconds = timeout, seconds
        self.grace_s = GRACE_S if grace_s is None else grace_s  # None: the default
        self.json_mode, self.stdin = json_mode, stdin
        self.err = err if err is not None else sys.stderr
        self.child: Child | None = None
        self.proc = None  # psutil.Process (watch)
        self.signum: int | None = None  # the signal that stopped gputop, if one did
        self.stopping = False  # stop() was asked (q, a signal)
        self.ended: str | None = None  # watch: how the watch ended
        self.doc: dict | None = None
        self.started_at: str | None = None
        self.t_start: float | None = None
        self._logf = None
        self._pumps: list[_Pump] = []
        self._lock = threading.Lock()

    # -- start -------------------------------------------------------------------------------------
    def start(self) -> "Session":
        """Launch the command or attach to the pid (OSError: the command cannot start or the log cannot be
        written; psutil.Error: the pid is gone or not ours to read)."""
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if self.mode == "watch":
            import psutil

            self.proc = psutil.Process(self.pid)
            self.monitor.baseline()
            self.monitor.watch(self.pid)
            self.monitor.start()
            self.t_start = time.monotonic()
            return self
        self._logf = open(self.log, "wb") if self.log else None
        try:
            if self._logf is not None:
                stdout = self._logf
            elif self.json_mode:
                self.err.flush()
                stdout = _fileno(self.err) if _fileno(self.err) is not None else subprocess.PIPE
            else:
                stdout = None
            self.monitor.baseline()
            self.child = Child(self.command, interrupt="group", grace_s=self.grace_s, timeout=self.timeout,
                               stdin=self.stdin, stdout=stdout, stderr=subprocess.PIPE,
                               env=multicast_off(dict(os.environ))).start()
        except BaseException:
            if self._logf is not None:
                self._logf.close()
            raise
        self.pid, self.t_start = self.child.pid, self.child.t_start
        self.monitor.watch(self.pid)
        self.monitor.start()
        err_bin = getattr(self.err, "buffer", None)
        dst = self._logf if self._logf is not None else (err_bin if err_bin is not None else _TextSink(self.err))
        proc = self.child.proc
        self._pumps = [_Pump(proc.stderr, dst, self.monitor.note_oom)]
        if stdout is subprocess.PIPE:  # --json into a stream without a file descriptor (tests)
            self._pumps.append(_Pump(proc.stdout, dst, lambda: None))
        for p in self._pumps:
            p.start()
        return self

    # -- while it runs -----------------------------------------------------------------------------
    @property
    def over(self) -> bool:
        return self.child.done if self.mode == "run" else self.ended is not None

    def poll(self) -> bool:
        """Check on the process (--seconds for a watch; the supervisor keeps --timeout); True once ended."""
        if self.over:
            return True
        if self.mode == "watch":
            if not _alive(self.proc):
                self.ended = "exited"
            elif self.seconds is not None and time.monotonic() - self.t_start >= self.seconds:
                self.ended = "seconds"
        if not self.over:
            self.monitor.poll_marks()
        return self.over

    def stop(self, signum: int | None = None) -> None:
        """End it: a command gets SIGINT (its group), SIGKILL after the grace period, at once when asked
        twice; a watch ends (the pid lives on). ``signum``: the signal that stopped gputop."""
        if signum is not None and self.signum is None and not self.over:
            self.signum = signum
        if self.over:
            return
        self.stopping = True
        if self.mode == "watch":
            self.ended = "interrupted"
        else:
            self.child.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until it has ended (a command: its group killed and reaped)."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.poll():
            if end is not None and time.monotonic() >= end:
                return False
            if self.mode == "run":
                self.child.wait(0.1)
            else:
                time.sleep(0.1)
        return True

    # -- the end -----------------------------------------------------------------------------------
    def facts(self) -> dict:
        """How it ended: pid, status, exit codes, how, wall time, the signal that stopped gputop, errors.

        status: ok; error (the command exited non-zero); crashed (a signal gputop did not send killed it);
        timeout; interrupted (gputop was stopped by a signal, or q in the TUI).
        """
        if self.mode == "watch":
            wall = time.monotonic() - self.t_start
            code = exitcodes.for_signal(self.signum) if self.signum else exitcodes.OK
            return {"pid": self.pid, "status": "interrupted" if self.signum else "ok", "exit_code": code,
                    "command_exit_code": None, "ended": self.ended or "exited", "wall_s": round(wall, 3),
                    "signal": self.signum, "oom": False, "errors": []}
        c = self.child
        rc = exitcodes.shell_code(c.returncode)
        errors = []
        if c.timed_out:
            status, how, code = "timeout", "timeout", exitcodes.TIMEOUT
            errors.append(("timeout", f"the command ran past --timeout {self.timeout:g} s and was stopped"
                                      + (f" (killed after {self.grace_s:g} s more)" if c.killed else "")))
        elif self.signum or self.stopping:
            status, how = "interrupted", "interrupted"
            code = exitcodes.for_signal(self.signum) if self.signum else rc
        elif c.returncode < 0:
            status, how, code = "crashed", f"signal {-c.returncode}", rc
            errors.append(("crashed", f"the command was killed by {exitcodes.signal_name(-c.returncode)}"))
        else:
            status, how, code = ("ok" if rc == 0 else "error"), "exited", rc
            if rc:
                errors.append(("exited", f"the command exited with code {rc}"))
        return {"pid": self.pid, "status": status, "exit_code": code, "command_exit_code": rc, "ended": how,
                "wall_s": round(c.t_end - c.t_start, 3), "signal": self.signum, "oom": bool(self.monitor.oom_times),
                "errors": [{"kind": k, "message": m, "detail": ""} for k, m in errors]}

    def finish(self) -> dict:
        """After it ended: stop sampling, close the log, build the document (once; any thread)."""
        with self._lock:
            if self.doc is not None:
                return self.doc
            if self.mode == "run":
                self.child.wait()
                for p in self._pumps:
                    p.join(2.0)
                self.monitor.poll_marks()  # "on GPU" marks found since the last poll go before the exit mark
                self.monitor.mark(f"exited {exitcodes.shell_code(self.child.returncode)}")
                if self._logf is not None:
                    self._logf.close()
            self.monitor.stop()
            self.doc = build_document(self.mode, self.monitor, self.facts(), self.command, self.started_at,
                                      log=self.log)
            return self.doc

    def exit_code(self) -> int:
        return self.finish()["exit_code"]
