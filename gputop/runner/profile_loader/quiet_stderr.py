"""The program's stderr (file descriptor 2) passed through a pipe for a moment, less one line Kineto prints.

Kineto, started for the first time in a process on a thread other than the one that imported torch (the loader's
own thread, or a server's worker thread), prints "ERROR: External init callback must run in same thread as
registerClient" on fd 2 and goes on (it skips an empty client init). That line is not the program's: around such
a start the loader sends fd 2 through a pipe whose reader thread writes every other byte back to the program's
stderr (:class:`DroppingLine`). Output the program writes meanwhile comes out a few milliseconds late, in order. A
process forked meanwhile keeps the pipe as its stderr: the reader stays and forwards it for as long as it is open.

Stdlib only (the loader loads it by path).
"""

import os
import threading

KINETO_THREAD_LINE = b"External init callback must run in same thread as registerClient"


def _write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        except OSError:
            return
        data = data[n:]


class DroppingLine:
    """``with DroppingLine():`` fd 2's lines that hold ``marker`` are dropped, the rest passed on."""

    def __init__(self, marker=KINETO_THREAD_LINE):
        self.marker = marker
        self.saved = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._restored = False

    def __enter__(self):
        try:
            self.saved = os.dup(2)
            r, w = os.pipe()
        except OSError:
            self.saved = None
            return self
        try:
            os.dup2(w, 2)
        except OSError:
            os.close(r)
            os.close(w)
            os.close(self.saved)
            self.saved = None
            return self
        os.close(w)
        self._reader = threading.Thread(target=self._pump, args=(r,), name="gputop-stderr-filter", daemon=True)
        self._reader.start()
        return self

    def _pass_on(self, final=False):
        """Write the complete lines held (all of them at ``final``), less the dropped one."""
        with self._lock:
            data = self._buffer
            if not final and b"\n" not in data:
                return
            cut = len(data) if final else data.rindex(b"\n") + 1
            self._buffer = data[cut:]
            lines = data[:cut].splitlines(keepends=True)
            out = b"".join(line for line in lines if self.marker not in line)
            if out and self.saved is not None:
                _write_all(self.saved, out)

    def _pump(self, r):
        while True:
            try:
                chunk = os.read(r, 65536)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            with self._lock:
                self._buffer += chunk
            if self._restored:
                self._pass_on()
        os.close(r)
        self._pass_on(final=True)
        saved, self.saved = self.saved, None
        if saved is not None:
            os.close(saved)

    def __exit__(self, *exc):
        if self.saved is None:
            return False
        try:
            os.dup2(self.saved, 2)  # the pipe's last write end closes here: the reader ends once it is drained
        except OSError:
            pass
        self._restored = True
        self._reader.join(2.0)  # a child forked meanwhile keeps the pipe open: the reader then stays, passing on
        if self._reader.is_alive():
            self._pass_on()
        return False
