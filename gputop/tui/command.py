"""``gputop --tui --run -- CMD ARGS...`` and ``gputop --tui --watch PID``: the headless diagnosis, live.

The command runs under a :class:`gputop.monitor.Monitor` through :class:`gputop.monitor.CommandRun`
(the same launching, GPU finding, OOM spotting and timeout as ``gputop --run -- CMD``), polled from the
TUI's frame timer. The TUI shows the Monitor's sampler, diagnoses with the command as the feeding
process, tags the command's processes in the process table, and adds a panel on top: one status line
(command, pid, running or exited with its code, elapsed) and the verdict timeline so far
(:meth:`Monitor.analyze`, recomputed on a thread every couple of seconds). The command's stdout and
stderr go to ``--log FILE``, else to ``gputop-cmd-<gputop's pid>.log`` in the current folder.

When the command exits, sampling stops and the TUI stays open on the final timeline; q quits (while
the command runs, q sends it SIGINT, waits GRACE_S, then kills it). After the TUI closes, the report
prints as headless does (text, or ``--json``), and gputop's exit code is the command's. ``--watch PID``
does the same for a running process, which q leaves running.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

from rich.text import Text

from gputop import exitcodes
from gputop.analysis.timeline import format_timeline
from gputop.tui.app import GputopApp, TuiConfig
from gputop.tui.widgets import Lines

GRACE_S = 5.0  # q: SIGINT, then SIGKILL after this
ANALYSIS_EVERY_S = 2.0  # the live timeline's refresh (longer when the analysis itself takes long)
ROWS, ROWS_SHORT = 6, 2  # timeline segments shown (the latest)
TAG_RUN, TAG_WATCH = "◀ command", "◀ watched"


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class Session:
    """A command (``command``) or a running process (``pid``) under a monitor, polled without blocking.

    ``poll()`` from the UI; ``over`` once it ended; ``finish()`` (any thread, once) stops sampling and
    builds the run document; ``stop()`` is q.
    """

    def __init__(self, monitor, command: list[str] | None = None, pid: int | None = None, log: str | None = None,
                 timeout: float | None = None, seconds: float | None = None, grace_s: float = GRACE_S):
        self.monitor = monitor
        self.mode = "run" if command else "watch"
        self.command, self.pid, self.log = command, pid, log
        self.timeout, self.seconds, self.grace_s = timeout, seconds, grace_s
        self.run = None  # CommandRun (run)
        self.proc = None  # psutil.Process (watch)
        self.code: int | None = None  # the command's exit code once it ended
        self.ended: str | None = None  # watch: how the watch ended
        self.stopping = False
        self.doc: dict | None = None
        self.started_at = self.t_start = None
        self._lock = threading.Lock()

    def start(self) -> "Session":
        """Launch the command or attach to the pid (raises OSError / psutil.Error like the headless paths)."""
        from gputop.monitor import CommandRun

        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if self.mode == "run":
            self.run = CommandRun(self.monitor, self.command, log=self.log, timeout=self.timeout,
                                  err=io.StringIO(), stdin=subprocess.DEVNULL).start()
            self.pid, self.t_start = self.run.child.pid, self.run.t_start
        else:
            import psutil

            self.proc = psutil.Process(self.pid)
            self.monitor.baseline()
            self.monitor.watch(self.pid)
            self.monitor.start()
            self.t_start = time.monotonic()
        return self

    @property
    def over(self) -> bool:
        return self.code is not None or self.ended is not None

    def poll(self) -> bool:
        """Check on the process (and enforce --timeout / --seconds); True once it has ended."""
        if self.over:
            return True
        if self.mode == "run":
            self.code = self.run.poll()
        elif not _alive(self.proc):
            self.ended = "exited"
        elif self.seconds is not None and time.monotonic() - self.t_start >= self.seconds:
            self.ended = "seconds"
        else:
            self.monitor.poll_marks()
        return self.over

    def stop(self) -> None:
        """q: SIGINT to a running command, SIGKILL after ``grace_s``; a watch just ends (the pid lives on)."""
        if self.poll():
            return
        self.stopping = True
        if self.mode == "watch":
            self.ended = "interrupted"
            return
        self.run.sigints += 1  # the run document says "interrupted"
        self.run.signal(signal.SIGINT)
        end = time.monotonic() + self.grace_s
        while time.monotonic() < end:
            if self.run.child.poll() is not None:
                break
            time.sleep(0.05)
        else:
            self.run.signal(signal.SIGKILL)
        self.run.child.wait()
        self.poll()

    def finish(self) -> dict:
        """After it ended (or stop()): stop sampling, the run document (built once)."""
        from gputop.monitor import build_document

        with self._lock:
            if self.doc is None:
                if self.mode == "run":
                    facts = self.run.finish()
                    self.code = facts["exit_code"]
                else:
                    self.monitor.stop()
                    facts = {"pid": self.pid, "exit_code": None, "ended": self.ended or "exited",
                             "wall_s": round(time.monotonic() - self.t_start, 3), "oom": False}
                self.doc = build_document(self.mode, self.monitor, facts, self.command, self.started_at, log=self.log)
            return self.doc

    def exit_code(self) -> int:
        """gputop's exit code, as headless: the command's (TIMEOUT after --timeout); 0 for a watch."""
        doc = self.finish()
        if self.mode == "watch":
            return exitcodes.OK
        return exitcodes.TIMEOUT if doc["ended"] == "timeout" else doc["exit_code"]

    def tagged_pids(self) -> dict[int, str]:
        """The process tree the monitor has seen (pid, children), for the process table."""
        finder = self.monitor.finder
        with finder.lock:
            pids = set(finder.known)
        tag = TAG_RUN if self.mode == "run" else TAG_WATCH
        return {p: tag for p in pids}

    def status(self) -> list[Text]:
        """One line (running / exited with its code, elapsed, pid, the command), then where output goes."""
        doc = self.doc
        elapsed = doc["wall_s"] if doc else time.monotonic() - self.t_start
        t = Text()
        t.append("■ " if self.over else "▶ ", style="bold red" if self.over else "bold green")
        t.append(self._state(), style="bold")
        t.append(f"  {elapsed:.0f} s" if not self.over else f" after {elapsed:.1f} s")
        if self.mode == "run":
            t.append(f"  pid {self.pid}  ")
            t.append(f"`{shlex.join(self.command)}`", style="bold")
        else:
            t.append(f"  watching pid {self.pid} ({self._name()})", style="bold")
        more = Text(style="dim")
        if self.log:
            more.append(f"output: {self.log}  ")
        if self.over:
            more.append("sampling stopped; q quits")
        return [t, more] if more.plain else [t]

    def _state(self) -> str:
        if not self.over:
            return "stopping (SIGINT sent)" if self.stopping else "running"
        ended = self.doc["ended"] if self.doc else (self.ended or "exited")
        if self.mode == "watch":
            if ended == "seconds":
                return f"watched for --seconds {self.seconds:g}"
            return "stopped watching" if ended == "interrupted" else ended
        if ended == "timeout":
            return f"stopped at --timeout (code {self.code})"
        if ended == "interrupted":
            return f"stopped by q (code {self.code})"
        return f"exited with code {self.code}"

    def _name(self) -> str:
        try:
            return self.proc.name()
        except Exception:
            return "?"


class CommandPanel(Lines):
    """The status line, then the verdict timeline so far (the latest segments)."""

    DEFAULT_CSS = "CommandPanel { height: auto; padding: 0 1; }"


def timeline_lines(analysis: dict | None, gpu_index: int | None, rows: int, final: bool) -> list[Text]:
    """The timeline of GPU ``gpu_index`` (else the first GPU the command used) from an analysis/document."""
    if not analysis or not analysis.get("gpus"):
        return [Text("timeline: waiting for samples...", style="dim")]
    gpus = analysis["gpus"]
    g = next((g for g in gpus if g["index"] == gpu_index), gpus[0])
    how = analysis.get("gpu_detection")
    where = (f"found by {how} at {g['first_seen_s']:.1f} s" if g.get("used")
             else "not seen on a GPU yet" if not final else "not used by the command")
    head = Text(f"{'final ' if final else ''}timeline, GPU {g['index']} ({where})", style="bold")
    segs = g.get("timeline") or []
    out = [head]
    if len(segs) > rows:
        out.append(Text(f"  ... {len(segs) - rows} earlier segment(s)", style="dim"))
    out += [Text(ln) for ln in format_timeline(segs[-rows:])]
    v = analysis.get("verdict")
    if final and v:
        out.append(Text(f"verdict: {v['evidence_text']}", style="bold yellow" if v["class"] != "idle" else "bold"))
    return out


class CommandApp(GputopApp):
    """The monitor, with a command (or a watched pid) as the process it diagnoses."""

    def __init__(self, config: TuiConfig, session: Session):
        config.sampler = session.monitor.sampler  # the Monitor samples; the app draws from it
        config.start_sampler = False  # the session started it
        super().__init__(config)
        self.session = session
        self.panel = CommandPanel(id="command")
        self.analysis: dict | None = None
        self._analysis_t = float("-inf")
        self._analysis_cost = 0.0
        self._analysing = False
        self._finishing = False
        self._picked = False

    def on_mount(self) -> None:  # Textual then runs GputopApp.on_mount too
        self.mount(self.panel, after="#strip")

    def watched_pid(self) -> int | None:
        return self.session.pid

    def tagged_pids(self) -> dict[int, str]:
        return self.session.tagged_pids()

    def _header(self) -> list[str]:
        parts = super()._header()
        if self.session.doc is not None:
            parts.append("sampling stopped")
        return parts

    def frame(self, force: bool = False) -> None:
        if not self.is_running:
            return
        s = self.session
        if not self._quitting and s.poll() and not self._finishing:
            self._finishing = True
            self.run_worker(self._finish, thread=True, group="command")
        self._pick_gpu()
        now = time.monotonic()
        if (s.doc is None and not self._analysing
                and now - self._analysis_t >= max(ANALYSIS_EVERY_S, 10 * self._analysis_cost)):
            self._analysing = True
            self._analysis_t = now
            self.run_worker(self._analyse, thread=True, group="analysis")
        super().frame(force)
        self._draw_command()

    def _pick_gpu(self) -> None:
        """Once the command shows up on a GPU, show that GPU."""
        if self._picked:
            return
        first, _ = self.session.monitor.finder.result()
        if first:
            self._picked = True
            pos = min(first)
            if pos in self.positions:
                self.selected = self.positions.index(pos)
                self._verdict_t = None
                self._dirty = True

    def _analyse(self) -> None:
        t = time.perf_counter()
        try:
            self.analysis = self.session.monitor.analyze()
        finally:
            self._analysis_cost = time.perf_counter() - t
            self._analysing = False

    def _finish(self) -> None:
        self.session.finish()
        self._dirty = True

    def _draw_command(self) -> None:
        if not self.panel.is_mounted:
            return
        s = self.session
        index = self.statics[self.selected].get("index") if self.statics else None
        rows = ROWS_SHORT if self.has_class("-short") else ROWS
        self.panel.set_lines(s.status() + timeline_lines(s.doc or self.analysis, index, rows, s.doc is not None))

    def action_quit_clean(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        if self.session.mode == "run" and not self.session.over:
            self.notify(f"stopping the command (SIGINT, killed after {self.session.grace_s:g} s)...")
        self.run_worker(self._stop_then_exit, thread=True, group="quit")

    def _stop_then_exit(self) -> None:
        self.session.stop()
        self.session.finish()
        self.controller.stop_all()
        self.call_from_thread(self.exit, self.session.exit_code())

    def on_unmount(self) -> None:  # before GputopApp.on_unmount closes the source
        if not self.session.over:  # the app ended without q (an error): do not leave the command running
            self.session.stop()


def main_command_tui(args, command: list[str]) -> int:
    """``gputop --tui --run -- CMD ARGS...`` / ``gputop --tui --watch PID``; the exit code as headless."""
    from gputop import monitor as M
    from gputop.cli import fail

    watch = not command
    what = "--tui --watch PID" if watch else "--tui --run -- CMD"
    bad = M._check_live_args(args, what)
    if bad:
        return fail(exitcodes.USAGE, bad)
    if watch:
        import psutil

        if args.watch is None:
            return fail(exitcodes.USAGE, "--tui goes with --run -- CMD or --watch PID")
        if args.watch <= 0 or not psutil.pid_exists(args.watch):
            return fail(exitcodes.USAGE, f"--watch {args.watch}: no such process")
    elif args.seconds is not None:
        return fail(exitcodes.USAGE, "--seconds goes with --record or --watch; to stop a command use --timeout S")
    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    src, code = M._open(args)  # NVML first: exit 3 before anything runs
    if src is None:
        return code
    if not watch and "/" not in command[0] and shutil.which(command[0]) is None:
        src.close()
        return fail(exitcodes.USAGE, f"command not found: {command[0]}")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        src.close()
        return fail(exitcodes.USAGE, "--tui needs a terminal; without --tui the diagnosis prints as text")
    note = f"gputop --watch {args.watch}" if watch else "gputop --run -- " + shlex.join(command)
    mon, code = M._new_monitor(args, src, note=note, active_ok=watch)
    if mon is None:
        return code
    log = args.log or (None if watch else os.path.abspath(f"gputop-cmd-{os.getpid()}.log"))
    session = Session(mon, command or None, pid=args.watch if watch else None, log=log,
                      timeout=args.timeout, seconds=args.seconds)
    try:
        try:
            session.start()
        except OSError as exc:
            mon.stop()
            if log and exc.filename == log:
                return fail(exitcodes.USAGE, f"cannot write {log}: {exc.strerror or exc}")
            why = "command not found" if isinstance(exc, FileNotFoundError) else "cannot run the command"
            return fail(exitcodes.USAGE, f"{why}: {command[0]} ({exc.strerror or exc})")
        except Exception as exc:  # psutil: the pid ended meanwhile, or is not ours to read
            mon.stop()
            return fail(exitcodes.USAGE, f"--watch {args.watch}: {exc}")
        import platform

        config = TuiConfig(source=src, rate_hz=args.rate, hostname=platform.node(),
                           timeout=getattr(args, "timeout", None))
        CommandApp(config, session).run()
        doc = session.finish()
    finally:
        mon.close()
    M._emit(args, doc)
    return session.exit_code()
