"""Reading a trace file (``--replay``, ``--recorded``), whatever the user names: a regular file, stdin (``-`` or
``/dev/stdin``, a pipe or a redirected file: ``zcat t.jsonl.gz | gputop --replay - --json``), a pipe or FIFO
(``--replay <(ssh node cat t.jsonl.gz)``), gzip or plain JSON lines by its first bytes, whatever its name.

Every way it can go wrong is one :class:`TraceError` line that names the input, and none of them hangs:

- not there, a folder, a terminal, a device (``/dev/zero``, ``/dev/null``): refused before a byte is read;
- a pipe or FIFO is read to its end, but at most :data:`IDLE_S` seconds without a byte (a FIFO nobody writes to)
  and at most :data:`MAX_STREAM_BYTES` in all;
- a line longer than :data:`MAX_LINE_BYTES` (a file of NULs) is not a trace;
- a corrupt gzip stream (a bad block, a CRC that does not match) is unreadable, not a partial trace.

A trace cut off while it was written (gputop killed, a disk that filled, a half-copied file) is read up to its last
complete line and says so: :attr:`Rows.truncated` (why, in words), which the replay's document and the TUI's label
carry. Stdin is read once per process (``--once`` may open a replay twice).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import select
import stat
import zlib

GZIP_MAGIC = b"\x1f\x8b"
STDIN_NAMES = ("-", "/dev/stdin")  # --replay -: the trace comes on stdin
IDLE_S = 10.0  # a pipe or FIFO that gives no byte for this long is given up on
MAX_STREAM_BYTES = 512 << 20  # what is read from a pipe, at most (a trace this size compressed is ~5 GB of JSON)
MAX_LINE_BYTES = 64 << 20  # a trace's lines are a few kB (a recorded run's document: a few MB)
_stdin_cache: bytes | None = None


class TraceError(ValueError):
    """An unreadable or invalid trace file (one line, names the file)."""


class Rows(list):
    """The rows of a trace, in file order; ``truncated``: why the file ends early (None: it is whole)."""

    truncated: str | None = None
    extra: list = []  # a trace's rows other than ticks and marks that its reader keeps (gputop/telemetry/trace.py)


def is_stdin(path) -> bool:
    return str(path) in STDIN_NAMES


def name_of(path) -> str:
    """How a message names the input: ``stdin`` for ``-``."""
    return "stdin" if is_stdin(path) else str(path)


def _kind(mode: int) -> str:
    return ("a terminal or character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def _read_stream(fd: int, name: str) -> bytes:
    """All of a pipe's bytes, each wait for more at most IDLE_S, MAX_STREAM_BYTES in all; raises TraceError."""
    chunks, total = [], 0
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if not poller.poll(IDLE_S * 1000):
            raise TraceError(f"{name}: nothing came for {IDLE_S:g} s (a pipe or FIFO that nobody writes to?)")
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise TraceError(f"{name}: cannot read: {exc.strerror or exc}") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            raise TraceError(f"{name}: more than {MAX_STREAM_BYTES >> 20} MiB came: not a gputop trace")


def _stdin_bytes() -> bytes:
    global _stdin_cache
    if _stdin_cache is None:
        try:
            mode = os.fstat(0).st_mode
        except OSError:
            raise TraceError("stdin: closed; pipe a trace into it (zcat t.jsonl.gz | gputop --replay - --json)") \
                from None
        if stat.S_ISREG(mode):
            with os.fdopen(os.dup(0), "rb") as f:
                _stdin_cache = f.read()
        elif stat.S_ISFIFO(mode):
            _stdin_cache = _read_stream(0, "stdin")
        elif os.isatty(0):
            raise TraceError("stdin: a terminal; pipe a trace into --replay - (zcat t.jsonl.gz | gputop --replay "
                             "- --json), or name the file")
        else:
            raise TraceError(f"stdin: {_kind(mode)}, not a trace; pipe one in or name the file")
    return _stdin_cache


def open_binary(path) -> io.BufferedIOBase:
    """The input's bytes as a file object (a regular file open, a pipe's or stdin's read whole); raises TraceError
    for what is not there or cannot hold a trace."""
    if is_stdin(path):
        return io.BytesIO(_stdin_bytes())
    name = str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TraceError(f"{name}: no such file") from None
    except OSError as exc:
        raise TraceError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise TraceError(f"{name}: is a folder, not a file")
    try:
        if stat.S_ISREG(mode):
            return open(path, "rb")
        if stat.S_ISFIFO(mode):  # a FIFO, or <(command): opened without waiting for a writer, read with a deadline
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                return io.BytesIO(_read_stream(fd, name))
            finally:
                os.close(fd)
    except OSError as exc:
        raise TraceError(f"{name}: cannot read: {exc.strerror or exc}") from None
    raise TraceError(f"{name}: {_kind(mode)}, not a trace file")


def _text(raw: io.BufferedIOBase):
    """A text reader over ``raw``: through gzip when its first bytes say so."""
    head = raw.getvalue()[:2] if isinstance(raw, io.BytesIO) else raw.peek(2)[:2]
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if head == GZIP_MAGIC else raw
    return io.TextIOWrapper(stream, encoding="utf-8-sig", newline="\n")  # (a BOM an editor added is skipped)


def iter_lines(path, on_cut=None):
    """The lines of the trace at ``path`` (each with its newline, the last maybe without). ``on_cut(why)``: called
    when a gzip stream ends before its end-of-stream marker (the lines before it are given). Raises TraceError."""
    name = name_of(path)
    raw = open_binary(path)
    n = 0
    try:
        with _text(raw) as f:
            while True:
                try:
                    line = f.readline(MAX_LINE_BYTES + 1)
                except EOFError:  # "compressed file ended before the end-of-stream marker"
                    if on_cut is not None:
                        on_cut("its gzip stream ends early (cut off while it was written or copied)")
                    return
                if not line:
                    return
                n += 1
                if len(line) > MAX_LINE_BYTES:
                    raise TraceError(f"{name}: line {n} is longer than {MAX_LINE_BYTES >> 20} MiB: not a gputop trace")
                yield line
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise TraceError(f"{name}: a corrupt gzip stream ({exc}) after {n} line(s): the trace cannot be read") from None
    except UnicodeDecodeError:
        raise TraceError(f"{name}: line {n + 1} is not UTF-8 text: not a gputop trace") from None
    except OSError as exc:
        raise TraceError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        raw.close()


def read_rows(path) -> Rows:
    """Every JSON line of a trace: :class:`Rows`. A last line cut off mid-write is left out (``truncated`` says so);
    any other line that is not JSON raises TraceError at once (a file of text lines fails on its first)."""
    name = name_of(path)
    rows = Rows()
    cut: list[str] = []
    bad: tuple[int, str] | None = None
    for n, line in enumerate(iter_lines(path, cut.append), 1):
        if bad is not None:  # a bad line with another after it: not a cut-off last line
            raise TraceError(f"{name}: line {bad[0]} is not JSON ({bad[1]})")
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if n == 1:
                raise TraceError(f"{name}: line 1 is not JSON ({exc.msg}): not a gputop trace") from None
            if line.endswith("\n"):  # written whole (a line cut mid-write has no newline): not a cut, a bad line
                raise TraceError(f"{name}: line {n} is not JSON ({exc.msg})") from None
            bad = (n, exc.msg)
    if not rows and bad is None and not cut:
        raise TraceError(f"{name}: empty file, not a gputop trace")
    if bad is not None:
        rows.truncated = f"its last line (line {bad[0]}) is cut off"
    if cut:
        rows.truncated = cut[0]
    return rows


def read_first_row(path):
    """The first line of a trace file alone, parsed (its header); raises TraceError."""
    name = name_of(path)
    for line in iter_lines(path):
        try:
            return json.loads(line)
        except ValueError as exc:
            raise TraceError(f"{name}: not a gputop recording ({exc})") from None
    raise TraceError(f"{name}: empty file, not a gputop recording")
