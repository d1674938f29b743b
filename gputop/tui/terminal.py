"""Losing the terminal (or the browser): the TUI stops its runs as q does and exits, whatever goes first.

A terminal goes away when its window closes, an SSH connection drops or ``tmux kill-session`` runs: the
kernel hangs the tty up and sends SIGHUP and SIGCONT to gputop; from then on every write fails (EIO) and
every read returns end-of-file. Textual's own driver does not survive that: its SIGCONT handler (there to
come back from Ctrl+Z) restarts application mode on the dead tty, with a new writer thread that dies at its
first failed write; the writer's queue holds 30 writes, so the 31st blocks the event loop for good (SIGTERM,
handled on that loop, is then never acted on), while the new input thread spins on end-of-file at a full
core. The same block follows any failed write, with or without SIGHUP.

The drivers here (chosen by ``GputopApp.get_driver_class``) keep the app's loop running instead:

- :class:`TerminalDriver` (a terminal): a write that fails is dropped, and so is every later one (the writer
  never blocks); SIGCONT restarts application mode only on a terminal that is still there; a read that fails
  ends input;
- :class:`ServedDriver` (``gputop --served``, a browser session of ``--serve``): textual-serve's ``quit``
  (the page's websocket closed), the end of its input (the server gone) and a write that fails all count as
  the browser going away.

Each then posts :class:`TerminalLost` once, and the app's lifecycle stops as on SIGHUP (``stop_for_signal``:
runs stopped through their supervisor, exit 129); the kernel's own SIGHUP, which comes with the loss, is
the same event, not a second stop (a second stop would kill the runs without their grace period). Once the
terminal is gone, gputop's stdout and stderr point at /dev/null: what gputop prints on its way out (a
report, a last line, Python's flush at exit) has nowhere to go and must not fail it.
"""

from __future__ import annotations

import os
import sys
import threading

from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

from gputop.tui.messages import TerminalLost


def driver_for(base: type) -> type:
    """The driver gputop runs on in place of Textual's ``base`` (others unchanged: tests' headless driver)."""
    if base is LinuxDriver:
        return TerminalDriver
    if base is WebDriver:
        return ServedDriver
    return base


def detach_output() -> None:
    """Point stdout and stderr at /dev/null (the terminal behind them is gone)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in (1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


class _Lost:
    """What both drivers share: the loss, noticed once."""

    _lost_lock = threading.RLock()  # one driver per process; re-entered by a signal handler interrupting it
    lost: str | None = None  # why, once the terminal is gone

    def lose(self, reason: str, detach: bool = True) -> None:
        """Noticed on any thread (the writer's, the input's, a signal handler's): once, the app told."""
        with self._lost_lock:
            if self.lost is not None:
                return
            self.lost = reason
        if detach:
            detach_output()
        self.exit_event.set()  # the input thread ends (on a hung-up tty select() says readable forever)
        try:
            self.send_message(TerminalLost(reason))
        except RuntimeError:  # the app's loop has closed: it is exiting anyway
            pass


class GuardedFile:
    """The file Textual's writer thread writes to: the first write or flush that fails reports the loss
    and drops it, and every later one is dropped (so the thread lives on, and its queue keeps draining)."""

    def __init__(self, file, lost):
        self._file, self._lost, self.failed = file, lost, False

    def write(self, text: str) -> None:
        if not self.failed:
            self._do(self._file.write, text)

    def flush(self) -> None:
        if not self.failed:
            self._do(self._file.flush)

    def _do(self, fn, *args) -> None:
        try:
            fn(*args)
        except (OSError, ValueError) as exc:  # EIO on a hung-up tty, ValueError on a closed file
            self.failed = True
            self._lost(f"a write to the terminal failed: {exc}")

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return True


class TerminalDriver(_Lost, LinuxDriver):
    """Textual's Linux driver, surviving the loss of its terminal."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._file = GuardedFile(self._file or sys.__stderr__, self.lose)

    def _sigcont_application(self, *_) -> None:
        """SIGCONT: back from Ctrl+Z on a terminal that is still there; on a hung-up one (the kernel sends
        SIGCONT with SIGHUP) there is nothing to restart."""
        if self.lost is None and os.isatty(self.fileno):
            super()._sigcont_application()
        else:
            self.lose("the terminal hung up")

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        except OSError as exc:  # EIO: the tty is gone
            self.lose(f"a read from the terminal failed: {exc}")


class ServedDriver(_Lost, WebDriver):
    """Textual's web driver (a ``--serve`` browser session), ending its runs when the browser goes away."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._write = self._guarded_write

    def _guarded_write(self, data: bytes) -> None:
        try:
            os.write(self.fileno, data)
        except OSError as exc:  # EPIPE: the server is gone (then stdout is /dev/null: later writes succeed)
            self.lose(f"a write to the server failed: {exc}")

    def on_meta(self, packet_type: str, payload: dict) -> None:
        if packet_type == "quit":  # textual-serve: the page's websocket closed (or the server stops)
            self.lose("the browser went away", detach=False)
        else:
            super().on_meta(packet_type, payload)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # the input ended before the app did: the server is gone
            self.lose("the server closed the session's input")
