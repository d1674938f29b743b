"""A watched process under a :class:`~gputop.session.monitor.Monitor`: a command gputop runs (through the
one supervisor, :class:`gputop.runner.child.Child`) or a process that was already running (``--watch``).

A :class:`~gputop.runner.run.Run`, polled without blocking: ``start()``, ``poll()`` from the caller's loop
(:func:`gputop.runner.run.drive`, the TUI's frame timer) until it returns True, ``stop(signum)`` to end it
(SIGINT to the command's group, SIGKILL after the grace period; a second stop kills at once; a watch just
ends and the pid lives on), then ``document()`` (built once). ``exit_code`` is gputop's
(:func:`gputop.runner.status.exit_code_for`): the command's own code, 6 after --timeout, 128+N when signal
N stopped gputop, 0 for a watch that ended by itself.

The command's stdout passes through (to ``err`` with ``json_mode``, so stdout stays one document); its
stderr passes through a pipe that gputop reads to spot out-of-memory errors
(:class:`~gputop.session.output_pump.OutputPump`); ``log`` sends both to a file. The session a frontend asks for,
checked and with its monitor open, comes from :func:`gputop.session.command_options.open_session`; its report goes
out through :func:`gputop.session.report.write_report`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

from gputop import exitcodes
from gputop.runner.child import GRACE_S, Child
from gputop.runner.status import command_status, exit_code_for
from gputop.session.output_pump import OutputPump, TextSink
from gputop.session.profiling import PROFILED_MARK, held_spans
from gputop.session.report import build_document
from gputop.session.without_gpu import without_gpu
from gputop.telemetry.devices import multicast_off


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
                 json_mode: bool = False, err=None, stdin=None, profile=None):
        self.monitor = monitor
        self.mode = "run" if command else "watch"
        self.command, self.pid, self.log = command, pid, log
        self.timeout, self.seconds = timeout, seconds
        self.grace_s = GRACE_S if grace_s is None else grace_s  # None: the default
        self.json_mode, self.stdin = json_mode, stdin
        self.profile = profile  # a gputop.session.profiling.ProfileWindows (--profile), or None
        self.no_gpu: str | None = None  # why no GPU is seen (run_without_gpu): the command runs all the same
        self.on_start = None  # called once the command is launched (a frontend's "running ..." line)
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
        self._log_error: OSError | None = None  # closing --log FILE failed (a full disk)
        self._pumps: list[OutputPump] = []
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
            env = multicast_off(dict(os.environ))
            flight = self.monitor.use_flight_recorder()  # PyTorch's flight recorder on, dumped on a stall
            env = flight.env(env) if flight is not None else env
            self.child = Child(self.command, interrupt="group", grace_s=self.grace_s, timeout=self.timeout,
                               stdin=self.stdin, stdout=stdout, stderr=subprocess.PIPE,
                               env=self.profile.env(env) if self.profile else env).start()
        except BaseException:
            if self._logf is not None:
                self._logf.close()
            raise
        if self.stopping:  # stop() came before the launch
            self.child.stop()
        self.pid, self.t_start = self.child.pid, self.child.t_start
        self.monitor.watch(self.pid)
        self.monitor.start()
        err_bin = getattr(self.err, "buffer", None)
        dst = self._logf if self._logf is not None else (err_bin if err_bin is not None else TextSink(self.err))
        proc = self.child.proc
        self._pumps = [OutputPump(proc.stderr, dst, self.monitor.note_oom)]
        if stdout is subprocess.PIPE:  # --json into a stream without a file descriptor (tests)
            self._pumps.append(OutputPump(proc.stdout, dst, lambda: None))
        for p in self._pumps:
            p.start()
        if self.on_start is not None:
            self.on_start()
        return self

    # -- while it runs -----------------------------------------------------------------------------
    @property
    def over(self) -> bool:
        if self.mode == "run":
            return self.child is not None and self.child.done
        return self.ended is not None and self.t_start is not None

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
            if self.profile is not None:
                self.profile.poll(time.monotonic() - self.t_start, self.monitor)
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
        elif self.child is not None:  # else start() stops it as soon as it is launched
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
            status = "interrupted" if self.signum else "ok"
            return {"pid": self.pid, "status": status, "exit_code": exit_code_for(status, self.signum),
                    "command_exit_code": None, "ended": self.ended or "exited", "wall_s": round(wall, 3),
                    "signal": self.signum, "oom": False, "errors": []}
        c = self.child
        rc = exitcodes.shell_code(c.returncode)
        end = command_status(c.returncode, stopped=bool(self.signum or self.stopping), killed=c.killed,
                             timed_out=c.timed_out, grace_s=self.grace_s, timeout=self.timeout)
        how = {"timeout": "timeout", "interrupted": "interrupted", "crashed": f"signal {-c.returncode}"}
        errors = [{"kind": end.kind, "message": end.message, "detail": ""}] if end.message else []
        code = exit_code_for(end.status, self.signum, command_code=rc)
        return {"pid": self.pid, "status": end.status, "exit_code": code, "command_exit_code": rc,
                "ended": how.get(end.status, "exited"), "wall_s": round(c.t_end - c.t_start, 3),
                "signal": self.signum, "oom": bool(self.monitor.oom_times), "errors": errors}

    def document(self) -> dict:
        """Once it ended (a command: waits for that): stop sampling, close the log, build the document
        (once; any thread)."""
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
                    try:  # what the pumps' last writes left in its buffer goes out now, or is said lost
                        self._logf.close()
                    except OSError as exc:
                        self._log_error = exc
            attribution, held = None, None
            if self.profile is not None:
                attribution = self.profile.result()
                self.profile.close()
                held = held_spans(attribution, time.time() - time.monotonic())
                for a, b in held:  # a recorded trace says where the profiler held the program (replay leaves it out)
                    # to the trace clock's 0.1 ms: rounded to 10 ms, a span could end past a tick the run kept
                    self.monitor.mark(f"{PROFILED_MARK} {b - a:.4f} s", a)
            self.monitor.stop()
            self.doc = build_document(self.mode, self.monitor, self.facts(), self.command, self.started_at,
                                      log=self.log, attribution=attribution, exclude=held)
            if self.no_gpu is not None:
                self.doc.update(without_gpu(self.monitor, self.no_gpu, self.pid))
            return self.doc

    def files_lost(self) -> list[str]:
        """One line for each file gputop was asked to write and could not finish (``--record FILE``, ``--log FILE``
        on a disk that filled): every frontend says them and exits non-zero."""
        recorder = self.monitor.recorder
        return [lost for lost in (recorder.why_failed() if recorder is not None else None, self.output_lost()) if lost]

    def output_lost(self) -> str | None:
        """``cannot write LOG: why`` where gputop could not copy the command's stderr into ``--log FILE`` (a full
        disk), else None."""
        errors = [p.error for p in self._pumps if p.error is not None] + [e for e in [self._log_error] if e]
        if not errors or self.log is None:
            return None
        return f"cannot write {self.log}: {errors[0].strerror or errors[0]}; the command's output there is incomplete"

    @property
    def exit_code(self) -> int | None:
        """gputop's exit code once it is over; None before."""
        return self.facts()["exit_code"] if self.over else None
