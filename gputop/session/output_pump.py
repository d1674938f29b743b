"""The output of a command gputop runs, copied as it comes and read for out-of-memory errors.

:class:`OutputPump` is one thread per pipe (the command's stderr; its stdout too where ``--json`` goes to a stream
without a file descriptor): bytes in, bytes out (no line buffering), ``on_oom`` called once when a chunk (with the
last 64 bytes before it) matches :data:`OOM_PATTERN`. A write that fails (a ``--log`` on a full disk) is kept in
``error`` and the copy goes on reading, so the command never blocks on a full pipe. :class:`TextSink` lets the bytes
go into a text stream (a test's StringIO).
"""

from __future__ import annotations

import os
import re
import threading

OOM_PATTERN = re.compile(rb"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
                         re.IGNORECASE)


class OutputPump(threading.Thread):
    """Copies the child's stderr to ``dst`` as it comes (bytes, no line buffering), spotting OOM errors."""

    def __init__(self, src, dst, on_oom):
        super().__init__(name="gputop-stderr", daemon=True)
        self.src, self.dst, self.on_oom = src, dst, on_oom
        self.oom = False
        self.error: OSError | None = None  # the first write to dst that failed (a --log on a full disk)

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
            except OSError as exc:
                self.error = self.error or exc
            except ValueError:
                pass
            if not self.oom and OOM_PATTERN.search(tail + chunk):
                self.oom = True
                self.on_oom()
            tail = chunk[-64:]


class TextSink:
    """Bytes into a text stream (a test's StringIO)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, b: bytes) -> None:
        self.stream.write(b.decode("utf-8", "replace"))

    def flush(self) -> None:
        self.stream.flush()
