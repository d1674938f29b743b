"""gputop's start-up before Textual: the source opened and its first tick read on a thread while the main
thread imports Textual, and that tick painted at once as an early frame.

Importing Textual and composing the monitor take a few tenths of a second; the numbers are ready before
that. ``EarlyStart`` opens the source the command line asks for (``config_from_args``), reads the first
tick with the sampler the app will use, and, on a terminal, paints it in plain ANSI in the alternate
screen: the header, the GPU strip (more than one GPU), and the selected GPU's device panel, in the
monitor's own words (``view``). A GPU with GPM has no GPM rates in its first tick (they need two samples): its
rows say so ("…") and, if Textual is not ready within a sampling interval, the frame is painted again with the
second tick. Textual then draws over it in the same alternate screen. Nothing is painted without a GPU (the
monitor's "no GPU" page says why), nor under ``--serve`` (a browser), nor once Textual is ready.

No Textual here: the point is to draw before it is imported (``charts`` brings Rich's text, which Textual
imports anyway).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from gputop.telemetry.sampler import Sampler
from gputop.tui.config import TuiConfig, config_from_args
from gputop.tui.model import view
from gputop.tui.widgets import charts

ALT_SCREEN, CURSOR_OFF, HOME_CLEAR = "\x1b[?1049h", "\x1b[?25l", "\x1b[H\x1b[2J"
LEAVE = "\x1b[?25h\x1b[?1049l"
MAX_WAIT_S = 0.15  # for a second tick (GPM), at most, before Textual is ready
PENDING = "… (the next sample)"  # a GPM row of the first tick: its rates need two samples
BOLD, REVERSE, DIM, PLAIN = "\x1b[1m", "\x1b[1;7m", "\x1b[2m", "\x1b[0m"
LABEL_W = 15  # as the device panel's (panels.DevicePanel)
SHORT_H = 32  # under this many rows the monitor merges related rows (app.SHORT_H)


def frame_lines(config: TuiConfig, tick: dict, rate_hz: float, cols: int, rows: int, waiting: bool = False) -> list[str]:
    """The early frame's lines (with their ANSI styles) for the first tick, ``cols`` x ``rows`` at most. ``waiting``:
    GPM's numbers come with the next sample, and its rows say "…" meanwhile (not n/a)."""
    source = config.source
    all_static = source.static()
    positions = config.gpus if config.gpus is not None else list(range(len(all_static)))
    statics = view.shown_statics([all_static[p] for p in positions])
    parts = view.source_header(source, statics, rate_hz, config.hostname, False)  # as the app's header
    tail = "  [1 monitor]"
    body = view.fit_parts(parts, max(10, cols - 9 - len(tail)))
    out = [f"{REVERSE} gputop {PLAIN} {body}{BOLD}{tail}{PLAIN}"]  # then the panels, a column in (Textual's padding)
    gpus = tick.get("gpus") or []
    samples = [gpus[p] if p < len(gpus) else None for p in positions]
    if len(statics) > 1:
        out += [(REVERSE if i == 0 else "") + (" ▶ " if i == 0 else "   ") + view.summary_line(st, s) + PLAIN
                for i, (st, s) in enumerate(zip(statics, samples))]
    st, s = statics[0], samples[0]
    out.append(f" {BOLD}{view.gpu_title(st)}{PLAIN}")
    if s is None:
        return out
    na = view.na_reasons_for(st, source.na_reasons)
    bar_w = max(0, min(24, cols - LABEL_W - 36))
    for r in view.device_rows(st, view.peaks_for(all_static[positions[0]]), s, na, compact=rows < SHORT_H):
        bar = charts.hbar(r.fraction, bar_w) + " " if bar_w >= 6 else ""
        text = DIM + (PENDING if waiting else r.text) + PLAIN if r.level == "na" else r.text
        out.append(f" {BOLD}{r.label:<{LABEL_W}}{PLAIN}{bar}{text}")
    out.append(" " + view.host_line(tick.get("host")))
    return out[:rows]


def fit(line: str, cols: int) -> str:
    """``line`` cut to ``cols`` visible characters (its escape sequences kept)."""
    kept, n, i = [], 0, 0
    while i < len(line) and n < cols:
        if line[i] == "\x1b":
            j = line.index("m", i) + 1
            kept.append(line[i:j])
            i = j
            continue
        kept.append(line[i])
        n += 1
        i += 1
    return "".join(kept) + PLAIN


def gpm_pending(config: TuiConfig, tick: dict) -> bool:
    """The first GPU shown has GPM but this tick has no GPM numbers yet (the first sample only opens GPM's window)."""
    statics = config.source.static()
    pos = config.gpus[0] if config.gpus else 0
    gpus = tick.get("gpus") or []
    return pos < len(statics) and pos < len(gpus) and bool(statics[pos].get("gpm_supported")) \
        and gpus[pos].get("sm_active_pct") is None


class EarlyStart:
    """``config_from_args(args)``, a sampler, its first tick, and (``paint``, on a terminal, with a GPU) that tick
    drawn as an early frame, all on a thread started here; ``config()`` waits for it."""

    def __init__(self, args, paint: bool = True, out=None):
        self.args = args
        self.out = out if out is not None else sys.__stderr__  # where Textual's driver writes
        self.paint = paint and self.out is not None and self.out.isatty()
        self.painted = False
        self._config: TuiConfig | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()  # config() was called: Textual is imported, no more waiting here
        self._first = threading.Event()  # the first tick painted, or nothing to paint (an error, no GPU, no TTY)
        self._lock = threading.Lock()  # a paint and leave() one after the other; none after leave()
        self._left = False
        self._thread = threading.Thread(target=self._start, name="gputop-early-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._open_and_paint()
        finally:
            self._first.set()

    def first_painted(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until the first tick is painted or there is nothing to paint; True if painted.
        ``main_tui`` imports Textual after this: both are Python work under one GIL, so in parallel the early
        frame only came when Textual's did (0.47 s on an H100 host, nvitop's at 0.33 s)."""
        self._first.wait(timeout)
        return self.painted

    def _open_and_paint(self) -> None:
        try:
            config = config_from_args(self.args)
            sampler = config.sampler = Sampler(config.source, rate_hz=config.rate_hz)
            t0 = time.monotonic()
            tick = sampler.step()
            self._config = config
        except BaseException as exc:  # SourceError, a rate out of range: raised again by config()
            self._error = exc
            return
        if not (self.paint and tick is not None and config.source.static()) or self._ready.is_set():
            return  # nothing to paint, or Textual is ready and draws the first frame
        waiting = gpm_pending(config, tick)  # GPM's rates need a second sample
        self._paint(config, tick, waiting)  # at once: the numbers NVML has now
        self._first.set()
        if waiting:
            wait = min(MAX_WAIT_S, config.source.delay(sampler.interval)) - (time.monotonic() - t0)
            if not self._ready.wait(max(0.0, wait)):  # Textual not ready yet: the frame again, with GPM's numbers
                tick = sampler.step()
                if tick is not None:
                    self._paint(config, tick, False)

    def _paint(self, config: TuiConfig, tick: dict, waiting: bool) -> None:
        try:
            cols, rows = os.get_terminal_size(self.out.fileno())
            lines = frame_lines(config, tick, config.sampler.rate_hz, cols, rows, waiting)
            text = ALT_SCREEN + CURSOR_OFF + HOME_CLEAR + "\r\n".join(fit(ln, cols) for ln in lines)
            with self._lock:
                if self._left:
                    return
                self.painted = True
                self.out.write(text)
                self.out.flush()
        except Exception:  # no size, a closed terminal, a record it cannot show: no early frame, Textual's is the
            pass  # first (it shows the same tick, or says what is wrong with it)

    def config(self) -> TuiConfig:
        """The TuiConfig (its sampler holding the ticks read); raises what opening the source raised. Called
        once Textual is imported: a second tick not read by then is not waited for (nor the early frame)."""
        self._ready.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._config

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread without hurrying it (tests: the early frame as it comes when Textual is slow)."""
        self._thread.join(timeout)

    def hand_over(self, app) -> None:
        """Before the app samples: the ticks read here, which its Sticky did not see, observed."""
        for tick in self._config.sampler.window():
            app.model.sticky.observe(tick)

    def leave(self) -> None:
        """gputop ends before Textual took the terminal over (an error, ^C): back to the normal screen if painted,
        and nothing painted from now on."""
        with self._lock:
            self._left = True
            if self.painted:
                self.painted = False
                try:
                    self.out.write(LEAVE)
                    self.out.flush()
                except (OSError, ValueError):
                    pass
