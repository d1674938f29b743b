"""The tests' one pseudo-terminal: a program (or this process, through ``out``) writes to a pty of a given size; what
it wrote is kept, and waits look at its text without the escape sequences, failing with that text.

Why not pexpect: its spawn always makes the pty the child's stdin, stdout, stderr and controlling terminal, and its
expect matches the raw bytes, where Textual puts escape sequences between the words of a row. The tests need a pty
that is not the controlling terminal, one on stderr only, a hang-up (the master closed) with no signal sent, and
in-process writers (the early frame); the matching is on the text as drawn."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time

_CSI = re.compile(rb"\x1b\[[0-9;?<=>]*[ -/]*[@-~]"  # CSI (cursor moves, colours, modes)
                  rb"|\x1b[()][0-9A-Za-z]|\x1b[=>78cDEHMNOZ]"  # charset, keypad and other short ones
                  rb"|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")  # OSC (title, clipboard)

# Run as ``python -c CTTY PROGRAM ARGS``: makes the pty (stdin) the controlling terminal of the new session, as a
# terminal emulator, sshd or tmux does, then becomes PROGRAM (same pid). Closing the master side then hangs the tty
# up and the kernel itself sends the program SIGHUP and SIGCONT.
CTTY = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "os.execv(sys.argv[1], sys.argv[1:])")

PTY = object()  # spawn's default for each of stdin, stdout, stderr: the pty


def plain(data: bytes) -> str:
    """Terminal output without its escape sequences (the text that was drawn, in drawing order)."""
    return _CSI.sub(b"", data).decode("utf-8", errors="replace")


class Pty:
    """A pseudo-terminal of ``cols`` x ``rows``. Either :meth:`spawn` a program on it (a thread then reads
    everything it writes, so that it never blocks on a full pty), or write to :attr:`out` from this process and
    read what came with :meth:`read`."""

    def __init__(self, cols: int = 100, rows: int = 30):
        self.cols, self.rows = cols, rows
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.set_blocking(self.master, False)
        self.data = bytearray()
        self._read_to = 0  # what read() returned so far
        self._lock = threading.Lock()
        self._stop_reading = threading.Event()
        self._reader: threading.Thread | None = None
        self._out = None
        self.proc: subprocess.Popen | None = None

    # -- writers ----------------------------------------------------------------------------------------------
    @property
    def out(self):
        """A text file on the program's side, for a writer in this process."""
        if self._out is None:
            self._out = os.fdopen(os.dup(self.slave), "w", encoding="utf-8")
        return self._out

    def spawn(self, argv: list[str], *, env: dict | None = None, cwd=None, controlling: bool = False,
              stdin=PTY, stdout=PTY, stderr=PTY) -> subprocess.Popen:
        """Start ``argv`` in a session of its own with the pty as its stdin, stdout and stderr (each one can be
        given otherwise, as to Popen). With ``controlling`` the pty is its controlling terminal (what a real
        terminal gives it; ``argv[0]`` is then a path). TERM, COLUMNS and LINES say the pty's size."""
        env = dict(os.environ if env is None else env, TERM="xterm-256color", COLUMNS=str(self.cols),
                   LINES=str(self.rows))
        env.pop("TEXTUAL", None)
        if controlling:
            argv = [sys.executable, "-c", CTTY, *argv]
        fds = [self.slave if f is PTY else f for f in (stdin, stdout, stderr)]
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=fds[0], stdout=fds[1], stderr=fds[2],
                                     start_new_session=True, close_fds=True)
        self._close_slave()  # the program holds the only slave end: its exit ends the reads (EIO)
        self._reader = threading.Thread(target=self._read_all, daemon=True, name="pty-reader")
        self._reader.start()
        return self.proc

    def _close_slave(self) -> None:
        if self.slave >= 0:
            os.close(self.slave)
            self.slave = -1

    # -- what was written -------------------------------------------------------------------------------------
    def _read_all(self) -> None:
        while not self._stop_reading.is_set():
            try:
                ready, _, _ = select.select([self.master], [], [], 0.05)
                if not ready:
                    continue
                chunk = os.read(self.master, 65536)
            except (BlockingIOError, InterruptedError):
                continue
            except (OSError, ValueError):  # EIO: every slave end is closed
                break
            if not chunk:
                break
            with self._lock:
                self.data += chunk

    def _drain(self) -> None:
        """Without a reader thread: take what the pty holds now."""
        if self._reader is not None or self.master < 0:
            return
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self.data += chunk

    def output(self) -> bytes:
        """Everything written so far, escape sequences and all."""
        self._drain()
        with self._lock:
            return bytes(self.data)

    def read(self) -> str:
        """What was written since the last read (decoded, escape sequences and all)."""
        data = self.output()
        new, self._read_to = data[self._read_to:], len(data)
        return new.decode("utf-8", errors="replace")

    def text(self, since: int = 0) -> str:
        """What was drawn (since ``since``, a :meth:`mark`), without escape sequences."""
        return plain(self.output()[since:])

    def mark(self) -> int:
        """A position in the output; ``wait_text(..., since=mark)`` looks only at what came after it."""
        return len(self.output())

    def wait_text(self, text: str, timeout: float = 30.0, since: int = 0) -> str:
        """Wait until ``text`` was drawn (after ``since``); returns what was drawn. Fails after ``timeout`` s, or
        once the program has exited without drawing it, with what was drawn."""
        end = time.monotonic() + timeout
        while True:
            seen = self.text(since)
            if text in seen:
                return seen
            ended = self.proc is not None and self.proc.poll() is not None
            if ended and (self._reader is None or not self._reader.is_alive()):
                seen = self.text(since)
                if text in seen:
                    return seen
                raise AssertionError(f"the program exited (code {self.proc.returncode}) before {text!r} was drawn; "
                                     f"it drew:\n{seen[-3000:]}")
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {text!r} on the terminal; "
                                     f"it drew:\n{seen[-3000:]}")
            time.sleep(0.02)

    # -- the user's side ---------------------------------------------------------------------------------------
    def press(self, keys: str | bytes) -> None:
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def wait(self, timeout: float = 60.0) -> int:
        """The program's exit code, once it has exited and all it wrote is read. Fails after ``timeout`` s with
        what it drew."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.proc.args} still running after {timeout:g} s; it drew:\n"
                                 f"{self.text()[-3000:]}") from None
        if self._reader is not None and self.master >= 0:
            self._reader.join(5.0)  # the rest of the output (EIO once every slave end is closed)
        return code

    def hang_up(self) -> None:
        """Close the master side, as a terminal window closing, an SSH connection dropping or ``tmux
        kill-session`` does: the reader stops first (a read in progress would hold the master open), then the
        last reference to the master goes and the kernel hangs the tty up. No signal is sent here."""
        self._stop_reading.set()
        if self._reader is not None:
            self._reader.join(10.0)
            assert not self._reader.is_alive(), "the pty reader did not stop"
        os.close(self.master)
        self.master = -1

    def close(self) -> None:
        """Kill the program (and its session) if it still runs; close both ends."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self._stop_reading.set()
        if self._reader is not None:
            self._reader.join(5.0)
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass
            self._out = None
        self._close_slave()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
