"""Every rank's Python stack, read from outside the program with py-spy (``py-spy dump --pid N --json``).

py-spy reads a CPython process's memory through ptrace (``process_vm_readv``), with no change to the program:
the way to see where a rank of a hung job is without having prepared it (PyTorch's flight recorder must be set up
before the job starts; its watchdog fires after 10 minutes). :func:`read_stacks` reads several processes at once,
each call bounded by ``timeout_s`` (a py-spy that hangs is killed, and the rank is reported unreadable), and
``--nonblocking`` by default: the process is not paused while its memory is read (a stalled rank's stack does not
move, so nothing is lost; on a running rank a frame may be torn, which the reader says). Where a stack cannot be
read, :attr:`Stack.why` says why in one line and what to grant:

* no py-spy: install it (``pip install py-spy``: a dependency of gputop);
* ptrace refused: another user's process, a container without ``SYS_PTRACE``, or Yama's ``ptrace_scope``;
* not Python, a process that exited mid-read, a zombie.

Pure data out (:class:`Stack`, :class:`Frame`); the judging is :mod:`gputop.analysis.rank_stacks`'s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field

PYSPY_TIMEOUT_S = 10.0  # one dump: py-spy reads a few hundred frames in ~10-50 ms; a hung ptrace must not hang us
PARALLEL = 16  # dumps at once (64 ranks: four rounds)
SOURCE_LINE_MAX = 120  # a frame's source line, as shown


@dataclass
class Frame:
    name: str  # the function ('work', 'DistributedDataParallel.forward')
    file: str  # the full path py-spy gives
    short: str  # the package-relative path ('torch/distributed/distributed_c10d.py', 'train.py')
    line: int | None
    code: str | None = None  # the source line, where the file is readable here

    def to_dict(self) -> dict:
        return {"name": self.name, "file": self.file, "short": self.short, "line": self.line, "code": self.code}

    @classmethod
    def from_dict(cls, d: dict) -> "Frame":
        return cls(d.get("name") or "?", d.get("file") or "", d.get("short") or d.get("file") or "",
                   d.get("line"), d.get("code"))

    def where(self) -> str:
        return f"{self.short}:{self.line}" if self.line else self.short


@dataclass
class Stack:
    """One process's stack: ``frames`` innermost first (its main thread, or the thread that holds the GIL), the
    other threads' in ``threads``; or ``why`` it could not be read."""

    pid: int
    frames: list[Frame] = field(default_factory=list)
    thread: str | None = None
    threads: dict[str, list[Frame]] = field(default_factory=dict)
    why: str | None = None
    read_s: float | None = None  # how long the dump took
    spawn_index: int | None = None  # torch.multiprocessing.spawn's index of this process (its rank by convention)

    @property
    def ok(self) -> bool:
        return self.why is None

    def to_dict(self) -> dict:
        return {"pid": self.pid, "thread": self.thread, "frames": [f.to_dict() for f in self.frames],
                "threads": {k: [f.to_dict() for f in v] for k, v in self.threads.items()},
                "why": self.why, "read_s": self.read_s, "spawn_index": self.spawn_index}

    @classmethod
    def from_dict(cls, d: dict) -> "Stack":
        return cls(int(d["pid"]), [Frame.from_dict(f) for f in d.get("frames") or []], d.get("thread"),
                   {k: [Frame.from_dict(f) for f in v] for k, v in (d.get("threads") or {}).items()},
                   d.get("why"), d.get("read_s"), d.get("spawn_index"))


def py_spy() -> str | None:
    """The py-spy program: beside this interpreter (a venv's bin/, the install's scripts folder), else on PATH."""
    names = ["py-spy"]
    for folder in (os.path.dirname(sys.executable), sysconfig.get_path("scripts")):
        for n in names:
            p = os.path.join(folder, n)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return shutil.which("py-spy")


def _source_line(path: str, line: int | None) -> str | None:
    if not line or not path or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    text = text.strip()
                    return text[:SOURCE_LINE_MAX] or None
    except OSError:
        return None
    return None


def why_unreadable(stderr: str, pid: int) -> str:
    """py-spy's error, as one line that says what to do."""
    text = " ".join(stderr.split())
    low = text.lower()
    if not _alive(pid):
        return f"pid {pid} exited before its stack was read"
    if _zombie(pid):
        return f"pid {pid} is a zombie (it exited; its parent has not reaped it): no stack to read"
    if "permission denied" in low or "operation not permitted" in low or "eperm" in low:
        return (f"not allowed to read pid {pid}'s memory (ptrace): run gputop as the process's user or root; in a "
                "container add the SYS_PTRACE capability (docker run --cap-add SYS_PTRACE, or the pod's "
                "securityContext); or set kernel.yama.ptrace_scope=0")
    if "python version" in low or "python interpreter" in low or "not a python" in low or "libpython" in low:
        return f"pid {pid} is not a Python process py-spy can read"
    printable = "".join(c if c.isprintable() else "?" for c in text)
    return f"py-spy could not read pid {pid}: {printable[:160] or 'no reason given'}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def parse_dump(pid: int, text: str) -> Stack:
    """A :class:`Stack` from ``py-spy dump --json``'s output: the main thread's frames (else the thread that holds
    the GIL, else the first), innermost first; the other threads kept by name."""
    threads = json.loads(text)
    if not threads:
        return Stack(pid, why=f"py-spy found no Python thread in pid {pid}")

    def frames(t) -> list[Frame]:
        return [Frame(f.get("name") or "?", f.get("filename") or "", f.get("short_filename") or f.get("filename") or "",
                      f.get("line"), _source_line(f.get("filename") or "", f.get("line")))
                for f in t.get("frames") or []]

    main = next((t for t in threads if t.get("thread_name") == "MainThread"), None)
    spawn = None
    for t in threads:  # mp.spawn's _wrap(fn, i, ...) holds the process's index (with --locals only)
        for f in t.get("frames") or []:
            if f.get("name") == "_wrap" and "multiprocessing/spawn" in (f.get("filename") or ""):
                got = {v.get("name"): v.get("repr") for v in f.get("locals") or []}
                spawn = int(got["i"]) if str(got.get("i", "")).isdigit() else spawn
    main = main or next((t for t in threads if t.get("owns_gil")), None) or threads[0]
    others = {}
    for i, t in enumerate(threads):
        if t is not main:
            others[str(t.get("thread_name") or f"thread {t.get('thread_id', i)}")] = frames(t)
    return Stack(pid, frames(main), main.get("thread_name") or "MainThread", others, spawn_index=spawn)


def read_stack(pid: int, timeout_s: float = PYSPY_TIMEOUT_S, native: bool = False, nonblocking: bool = True,
               program: str | None = None, with_locals: bool = False) -> Stack:
    """One process's stack (:func:`parse_dump`), or a :class:`Stack` whose ``why`` says why not. Never raises for
    a process that cannot be read; a py-spy still running after ``timeout_s`` is killed. ``with_locals``: read the
    frames' local variables too (the process is paused meanwhile): how an mp.spawn rank's index is found."""
    program = program or py_spy()
    if program is None:
        return Stack(pid, why="py-spy is not installed (pip install py-spy): the ranks' stacks cannot be read")
    if not _alive(pid):
        return Stack(pid, why=f"pid {pid} is not running")
    cmd = [program, "dump", "--pid", str(pid), "--json"]
    if native:
        cmd.append("--native")
    if with_locals:
        cmd.append("--locals")
    if nonblocking and not native and not with_locals:  # --native and --locals need the process paused
        cmd.append("--nonblocking")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        return Stack(pid, why=f"py-spy could not start: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return Stack(pid, why=f"py-spy did not answer for pid {pid} within {timeout_s:g} s (killed)",
                     read_s=time.monotonic() - t0)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        return Stack(pid, why=why_unreadable(err.decode(errors="replace"), pid), read_s=took)
    try:
        stack = parse_dump(pid, out.decode(errors="replace"))
    except (ValueError, TypeError, AttributeError) as exc:
        return Stack(pid, why=f"py-spy's answer for pid {pid} could not be read: {exc}", read_s=took)
    stack.read_s = took
    return stack


def read_stacks(pids: list[int], timeout_s: float = PYSPY_TIMEOUT_S, native: bool = False,
                nonblocking: bool = True) -> dict[int, Stack]:
    """The stacks of ``pids``, read ``PARALLEL`` at a time on threads (each bounded by ``timeout_s``)."""
    program = py_spy()
    out: dict[int, Stack] = {}
    lock = threading.Lock()
    todo = list(dict.fromkeys(int(p) for p in pids))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                pid = todo.pop(0)
            got = read_stack(pid, timeout_s, native, nonblocking, program)
            if got.ok and rank_of(pid) is None and any(f.name == "_wrap" and "multiprocessing/spawn" in f.file
                                                       for f in got.frames):
                again = read_stack(pid, timeout_s, native, False, program, with_locals=True)
                got.spawn_index = again.spawn_index if again.ok else None  # its index; the first read's frames
            with lock:
                out[pid] = got

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(PARALLEL, len(todo)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {p: out[p] for p in dict.fromkeys(int(p) for p in pids)}


def rank_of(pid: int) -> int | None:
    """The process's rank as its launcher set it (``RANK``, else ``LOCAL_RANK`` in /proc/PID/environ); None where
    not set or not readable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return None
    for key in (b"RANK", b"LOCAL_RANK"):
        try:
            return int(env[key])
        except (KeyError, ValueError):
            continue
    return None


STACKS_EVERY_S = 10.0  # while a job stays stalled, its ranks' stacks are read again this often


class StackWatch:
    """Reads the stacks of the pids it is asked about, on a thread of its own, never more than one read at a time
    and at most once every ``every_s`` for the same pids (a stalled job's stacks hardly move): what a live verdict
    (gputop/analysis/live.py's ``LiveNode``, fed on the sampler's thread) asks for without waiting. ``latest()``:
    {pid: {"stack": Stack.to_dict(), "rank": int or None}} of the last read, and ``read_at`` when it ended
    (monotonic). ``ask(pids, force=True)``: read now, whenever the last read was (a person asked: the TUI's stack
    view). ``close()``: no read starts any more (a run that ended: its ranks are gone or going)."""

    def __init__(self, every_s: float = STACKS_EVERY_S, timeout_s: float = PYSPY_TIMEOUT_S):
        self.every_s, self.timeout_s = every_s, timeout_s
        self._lock = threading.Lock()
        self._busy = False
        self._asked: tuple = ()
        self._asked_at: float | None = None
        self._latest: dict[int, dict] = {}
        self.read_at: float | None = None
        self.reads = 0
        self.read_s: list[float] = []  # each read's wall time (all its pids; the cost, for the document)
        self.closed = False

    def ask(self, pids, force: bool = False) -> bool:
        """Read these pids' stacks soon (at once if they changed, the last read is older than ``every_s``, or
        ``force``); False where no read starts (one in flight, a recent one of the same pids, closed)."""
        pids = tuple(sorted({int(p) for p in pids}))
        if not pids:
            return False
        now = time.monotonic()
        with self._lock:
            if self.closed or self._busy or (not force and pids == self._asked and self._asked_at is not None
                                             and now - self._asked_at < self.every_s):
                return False
            self._busy, self._asked, self._asked_at = True, pids, now
        threading.Thread(target=self._read, args=(pids,), name="gputop-stacks", daemon=True).start()
        return True

    def busy(self) -> bool:
        with self._lock:
            return self._busy

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def _read(self, pids: tuple) -> None:
        t0 = time.monotonic()
        try:
            got = read_stacks(list(pids), self.timeout_s)
            out = {}
            for pid, st in got.items():
                rank = rank_of(pid)
                out[pid] = {"stack": st.to_dict(), "rank": rank if rank is not None else st.spawn_index}
            with self._lock:
                self._latest, self.read_at = out, time.monotonic()
                self.reads += 1
                self.read_s.append(round(self.read_at - t0, 3))
        finally:
            with self._lock:
                self._busy = False

    def latest(self, t: float | None = None) -> dict[int, dict]:
        """The last read ({pid: {"stack", "rank"}}; ``t``, the tick time asking, matters to a recording only)."""
        with self._lock:
            return dict(self._latest)

    def wait(self, timeout_s: float) -> bool:
        """Block until no read is in flight (tests, and a run's last look before its document); True if none is."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self._lock:
                if not self._busy:
                    return True
            time.sleep(0.02)
        return False


class RecordedStacks:
    """The stacks a recorded trace holds (its ``stacks`` rows, gputop/telemetry/trace.py), in the place of a
    :class:`StackWatch` on a replay: ``latest(t)`` is the last read recorded at or before tick time ``t`` of the
    replay (``source.stacks_at``), ``read_at`` its time; asking reads nothing (the ranks were another machine's)."""

    closed = False

    def __init__(self, source):
        self.source = source
        self.read_at: float | None = None
        self.reads = 0

    def ask(self, pids, force: bool = False) -> bool:
        return False

    def busy(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def latest(self, t: float | None = None) -> dict[int, dict]:
        row = self.source.stacks_at(t) if t is not None else None
        if row is None:
            return {}
        if row["t"] != self.read_at:
            self.read_at, self.reads = row["t"], self.reads + 1
        return {int(pid): got for pid, got in (row.get("stacks") or {}).items()}
