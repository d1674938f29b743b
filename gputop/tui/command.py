"""``gputop --tui --run -- CMD ARGS...`` and ``gputop --tui --watch PID``: the headless diagnosis, live.

The command runs in a :class:`gputop.session.command.Session` (the same supervisor, GPU finding, OOM
spotting and timeout as ``gputop --run -- CMD``), polled from the TUI's frame timer. The TUI shows the Monitor's sampler, diagnoses with the command as the feeding
process, tags the command's processes in the process table, and adds a panel on top: one status line
(command, pid, running or exited with its code, elapsed) and the verdict timeline so far
(:meth:`Monitor.analyze`, recomputed on a thread every couple of seconds). The command's stdout and
stderr go to ``--log FILE``, else to ``gputop-cmd-<gputop's pid>.log`` in the current folder.

When the command exits, sampling stops and the TUI stays open on the final timeline; q quits (while
the command runs, q sends it SIGINT and the supervisor kills it after its grace period). SIGINT, SIGTERM
and SIGHUP to gputop do the same as q, and gputop then exits 128+N. After the TUI closes, the report
prints as headless does (text, or ``--json``), and gputop's exit code is the command's. ``--watch PID``
does the same for a running process, which q leaves running.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import time

from rich.text import Text
from textual.binding import Binding

from gputop import exitcodes
from gputop.analysis.attribution import window_for_gpu
from gputop.analysis.comms import latest_processes
from gputop.analysis.timeline import format_timeline
from gputop.analysis.verdict import display_name
from gputop.session.command import Session
from gputop.tui.app import GputopApp, TuiConfig
from gputop.tui.attribution import AttributionPanel
from gputop.tui.messages import Redraw
from gputop.tui.model import TuiModel
from gputop.tui.widgets.lines import Lines

ANALYSIS_EVERY_S = 2.0  # the live timeline's refresh (longer when the analysis itself takes long)
ROWS, ROWS_SHORT = 6, 2  # timeline segments shown (the latest)
TAG_RUN, TAG_WATCH = "◀ command", "◀ watched"


def status_lines(s: Session) -> list[Text]:
    """One line (running / exited with its code, elapsed, pid, the command), then where output goes."""
    doc = s.doc
    elapsed = doc["wall_s"] if doc else time.monotonic() - s.t_start
    t = Text()
    t.append("■ " if s.over else "▶ ", style="bold red" if s.over else "bold green")
    t.append(_state(s), style="bold")
    t.append(f"  {elapsed:.0f} s" if not s.over else f" after {elapsed:.1f} s")
    if s.mode == "run":
        t.append(f"  pid {s.pid}  ")
        t.append(f"`{one_line(shlex.join(s.command))}`", style="bold")
    else:
        t.append(f"  watching pid {s.pid} ({_name(s)})", style="bold")
    more = Text(style="dim")
    if s.log:
        more.append(f"output: {s.log}  ")
    if s.over:
        more.append("sampling stopped; q quits")
    return [t, more] if more.plain else [t]


def one_line(text: str) -> str:
    """``text`` on one row: a newline in a command (``python -c "..."``) drawn as ``\\n``, not sent to the terminal
    (where it would break the row and push the screen down)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _state(s: Session) -> str:
    if not s.over:
        return "stopping (SIGINT sent)" if s.stopping else "running"
    if s.mode == "watch":
        if s.ended == "seconds":
            return f"watched for --seconds {s.seconds:g}"
        return "stopped watching" if s.ended == "interrupted" else (s.ended or "exited")
    code = exitcodes.shell_code(s.child.returncode)
    if s.child.timed_out:
        return f"stopped at --timeout (code {code})"
    if s.stopping:
        return f"stopped by {'q' if s.signum is None else exitcodes.signal_name(s.signum)} (code {code})"
    return f"exited with code {code}"


def _name(s: Session) -> str:
    try:
        return s.proc.name()
    except Exception:
        return "?"


def tagged_pids(s: Session) -> dict[int, str]:
    """The process tree the monitor has seen (pid, children), for the process table."""
    finder = s.monitor.finder
    with finder.lock:
        pids = set(finder.known)
    tag = TAG_RUN if s.mode == "run" else TAG_WATCH
    return {p: tag for p in pids}


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
        out.append(Text(f"verdict: {display_name(v)}: {v['evidence_text']}",
                        style="bold yellow" if v["class"] != "idle" else "bold"))
    return out


class CommandModel(TuiModel):
    """The model, with the command (or the watched pid) as the process the verdict diagnoses."""

    def __init__(self, config: TuiConfig, session: Session):
        config.sampler = session.monitor.sampler  # the Monitor samples; the app draws from it
        config.start_sampler = False  # the session started it
        self.session = session  # before the model: its live verdicts ask watched_pid() on the running sampler
        super().__init__(config)

    def watched_pid(self) -> int | None:
        return self.session.pid

    def tagged_pids(self) -> dict[int, str]:
        return tagged_pids(self.session)

    def header_parts(self, tick: dict | None) -> list[str]:
        parts = super().header_parts(tick)
        if self.session.doc is not None:
            parts.append("sampling stopped")
        return parts


class CommandApp(GputopApp):
    """The monitor, with a command (or a watched pid) as the process it diagnoses; with ``--profile``, w asks the
    command for a profiler window and a shows the latest in the monitor page's place (gputop/tui/attribution.py)."""

    BINDINGS = [Binding("w", "profile_window", "window", show=False),
                Binding("a", "attribution", "attribution", show=False)]

    def __init__(self, config: TuiConfig, session: Session):
        super().__init__(config, CommandModel(config, session))
        self.session = session
        self.panel = CommandPanel(id="command")
        self.attribution = AttributionPanel(id="attribution")
        self._window_seq: int | None = None  # the latest window announced
        self._rank_window: tuple = (None, None)  # (window, pids on the selected GPU): that GPU's rank's window
        self._window_read = float("-inf")
        self._window: dict | None = None
        self._window_reading = False
        self.analysis: dict | None = None
        self._analysis_t = float("-inf")
        self._analysis_cost = 0.0
        self._analysing = False
        self._finishing = False
        self._picked = False

    def on_mount(self) -> None:  # Textual then runs GputopApp.on_mount too
        self.mount(self.panel, after="#summary")
        self.attribution.display = False
        self.mount(self.attribution, after="#pages")

    def key_items(self) -> list[tuple[str, str]]:
        keys = super().key_items()
        return keys[:2] + [("w", "window"), ("a", "attribution")] + keys[2:] if self.session.profile else keys

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
        self._draw_attribution(now)

    def action_gpu(self, step: int) -> None:
        self._picked = True  # the user's choice: the command showing up on a GPU later does not undo it
        super().action_gpu(step)

    def _pick_gpu(self) -> None:
        """Once the command shows up on a GPU, show that GPU (unless g / G chose one first)."""
        if self._picked:
            return
        first, _ = self.session.monitor.finder.result()
        if first:
            self._picked = True
            self.model.select_position(min(first))  # the monitor judges that GPU afresh

    def _analyse(self) -> None:
        t = time.perf_counter()
        try:
            self.analysis = self.session.monitor.analyze()
        finally:
            self._analysis_cost = time.perf_counter() - t
            self._analysing = False

    def _finish(self) -> None:
        self.session.document()
        self.post_message(Redraw())

    def _draw_command(self) -> None:
        if not self.panel.is_mounted:
            return
        s = self.session
        index = self.model.nvml_index()
        rows = ROWS_SHORT if self.has_class("-short") else ROWS
        self.panel.set_lines(status_lines(s) + timeline_lines(s.doc or self.analysis, index, rows, s.doc is not None))

    def latest_window(self, now: float) -> dict | None:
        """The latest profiler window, read at most once a second on a thread (a GPU window's answer can be
        megabytes of kernel timeline); once the run is over and none was read, its document's."""
        if self.session.profile is None:
            return None
        if now - self._window_read >= 1.0 and not self._window_reading:
            self._window_read, self._window_reading = now, True
            self.run_worker(self._read_window, thread=True, group="window")
        return self._window

    def _read_window(self) -> None:
        try:
            win = self.session.profile.latest()
            if win is None and self.session.doc is not None:
                windows = (self.session.doc.get("attribution") or {}).get("windows") or []
                win = windows[-1] if windows else None
            self._window = win
        finally:
            self._window_reading = False

    def _draw_attribution(self, now: float) -> None:
        win = self.latest_window(now)
        if win is not None and win.get("seq") != self._window_seq:
            self._window_seq = win.get("seq")
            if not self.attribution.display:
                self.notify(f"profiler window {win['seq']} is in" + ("" if win.get("status") == "ok" else
                            f" empty: {win.get('why_none')}") + ": a shows it")
        if self.attribution.display and self.attribution.is_mounted:
            if win is not None and win.get("per_process"):  # a job's ranks: the selected GPU's own
                pids = self._pids_on_selected()
                if self._rank_window[0] != (id(win), frozenset(pids)):
                    self._rank_window = ((id(win), frozenset(pids)), {**win, **(window_for_gpu([win], pids) or {})})
                win = self._rank_window[1]
            self.attribution.show(win, seconds=self.session.profile.seconds if self.session.profile else None)

    def _pids_on_selected(self) -> set[int]:
        """The pids NVML last listed on the selected GPU in the last minute of ticks (a rank that has exited
        since: still its window)."""
        if not self.model.statics:
            return set()
        pos = self.model.positions[self.model.selected]
        procs = latest_processes(self.model.sampler.window(60.0), [pos], nonempty=True).get(pos) or []
        return {p.get("pid") for p in procs}

    def action_profile_window(self) -> None:
        """w: a profiler window now (--profile)."""
        s = self.session
        if s.profile is None:
            self.notify("profiler windows need --profile: gputop --tui --run --profile -- CMD"
                        + (" (a --watch PID cannot get gputop's loader)" if s.mode == "watch" else ""),
                        severity="warning")
        elif s.over:
            self.notify("the command has ended: no more windows", severity="warning")
        else:
            self.notify(s.profile.ask_now(time.monotonic() - s.t_start))

    def action_attribution(self) -> None:
        """a: the latest profiler window in the monitor page's place, and back."""
        if self.session.profile is None:
            self.action_profile_window()
            return
        shown = not self.attribution.display
        self.attribution.display = shown
        self.query_one("#pages").display = not shown
        self._window_read = float("-inf")
        self.redraw()

    def action_quit_clean(self) -> None:
        if self._quitting:
            return
        self._quitting = True
        if self.session.mode == "run" and not self.session.over:
            self.notify(f"stopping the command (SIGINT, killed after {self.session.grace_s:g} s)...")
        self.run_worker(self._stop_then_exit, thread=True, group="quit")

    def stop_for_signal(self, signum: int) -> None:
        """gputop got SIGINT/SIGTERM/SIGHUP: stop the command (the supervisor kills it on a second signal),
        then leave as q does; the exit code is 128+N (once the command has ended by itself, its report stands)."""
        self.stop_signal = self.stop_signal or signum
        self.session.stop(signum)
        self.action_quit_clean()

    def _stop_then_exit(self) -> None:
        if not self.session.stopping:  # a signal may have stopped it already: a second stop would kill at once
            self.session.stop()
        self.session.wait()
        self.session.document()
        self.model.controller.stop_all()
        self.call_from_thread(self.exit, self.session.exit_code)

    def on_unmount(self) -> None:  # before GputopApp.on_unmount closes the source
        if not self.session.over:  # the app ended without q (an error): do not leave the command running
            if not self.session.stopping:
                self.session.stop()
            self.session.wait()


def main_command_tui(args, command: list[str]) -> int:
    """``gputop --tui --run -- CMD ARGS...`` / ``gputop --tui --watch PID``; the exit code as headless."""
    import platform

    from gputop.session.command import check_command, check_watch, command_missing, start_failure, write_report
    from gputop.session.monitor import open_monitor

    watch = not command
    try:
        if watch:
            check_watch(args.spec, args.watch, output=args.output, record=args.record)
        else:
            check_command(args.spec, command, output=args.output, log=args.log, record=args.record)
        note = f"gputop --watch {args.watch}" if watch else "gputop --run -- " + shlex.join(command)
        mon = open_monitor(args.spec, note, args.record, active_ok=watch)  # NVML first: exit 3 before anything runs
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            mon.close()
            raise exitcodes.Failure(exitcodes.USAGE, "--tui needs a terminal; without --tui the diagnosis prints as text")
    except exitcodes.Failure as exc:
        return exitcodes.fail(exc.code, str(exc))
    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    missing = None if watch else command_missing(command)
    if missing:
        mon.close()
        return exitcodes.fail(exitcodes.USAGE, missing)
    log = args.log or (None if watch else os.path.abspath(f"gputop-cmd-{os.getpid()}.log"))
    profile = None
    if getattr(args, "profile", False) and not watch:
        from gputop.session.profiling import ProfileWindows

        profile = ProfileWindows(args.profile_seconds, max_steps=args.profile_steps)
    session = Session(mon, command or None, pid=args.watch if watch else None, log=log,
                      timeout=args.timeout, seconds=args.seconds, grace_s=args.grace, stdin=subprocess.DEVNULL,
                      err=io.StringIO(), profile=profile)
    try:
        try:
            session.start()
        except Exception as exc:  # OSError: cannot start or no log; psutil: the pid ended or is not ours
            mon.stop()
            if profile is not None:
                profile.close()
            failure = start_failure(exc, session)
            return exitcodes.fail(failure.code, str(failure))
        config = TuiConfig(source=mon.source, rate_hz=args.spec.rate_hz, hostname=platform.node(),
                           timeout=getattr(args, "timeout", None))
        try:
            CommandApp(config, session).run()
        finally:  # however the app ended (an error, a terminal gone), the command does not outlive it
            if not session.stopping:  # one already stopping keeps its grace period
                session.stop()
            session.wait()
        doc = session.document()
    finally:
        mon.close()
    return write_report(doc)
