"""The one child supervisor: every process gputop starts (a workload, ``--run -- CMD``) runs through it.

Policy, the same everywhere:

* the child gets its own session and process group, so a terminal's Ctrl-C or hang-up reaches gputop
  only, and gputop decides;
* ``stop()``: SIGINT (to the child alone for a gputop workload, whose API stops cleanly on it; to the
  whole group for a user's command, as a terminal's Ctrl-C would), then SIGKILL to the group after the
  grace period; a second ``stop()`` (or ``kill()``) kills at once; ``timeout`` stops it the same way;
* when the child has exited, whatever is left of its process group is SIGKILLed (grandchildren would
  otherwise hold the GPU, and the pipes, open);
* a kill reaches the child's descendants that left its group too: ``torchrun`` starts each worker in a
  session of its own, so a SIGKILL to the group alone would orphan them. Before the group is killed, the
  tree under the child is read from /proc and each descendant's own group is killed with it; and since a child
  that exits by itself leaves such descendants orphaned (no longer under it: torchrun stopped by SIGINT, a
  worker still in NCCL's teardown), the tree is read every ``TREE_EVERY_S`` while the child lives, and the ones
  that left its group and are still alive (the same process: pid and start time) are killed when it ends;
* a watchdog process (its own session, a few lines of Python) holds a pipe from gputop: if gputop
  dies without releasing it — even SIGKILLed — the pipe closes and the watchdog kills the group (and,
  the same way, the descendants that left it).

One thread per child waits for it (without reaping it before the group is killed, so the group id
cannot be reused meanwhile), enforces the deadlines and calls ``on_exit(returncode)`` once.
"""

from __future__ import annotations

import inspect
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

GRACE_S = 5.0
POLL_S = 0.05
GONE_WAIT_S = 2.0  # after its kills, how long the supervisor waits for what they reached to be torn down
TREE_EVERY_S = 2.0  # how often the child's tree is read for descendants that left its group (about 1 ms / 100 procs)


def tree_under(pid):
    """Every process under ``pid`` now (children, their children, ...), from each one's parent in /proc."""
    kids = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open("/proc/" + e + "/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(e))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def start_time(pid):
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): a pid seen again is the same
    process only if this is too. None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _running(pid, t0):
    """Whether ``pid`` is still the process that started at ``t0`` and not a zombie."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return t0 is not None and int(fields[19]) == t0 and fields[0] != b"Z"
    except (OSError, ValueError, IndexError):
        return False


def kill_tree(pgid):
    """SIGKILL every process under ``pgid`` (the leader), with the process group each one leads."""
    for p in tree_under(pgid):
        try:
            g = os.getpgid(p)
            if g != os.getpgrp():
                os.killpg(g, signal.SIGKILL)
            else:
                os.kill(p, signal.SIGKILL)
        except OSError:
            pass


# Runs as ``python -I -S -c WATCHDOG PGID``: waits for EOF on stdin; unless gputop wrote "done" first,
# the group (and the descendants that left it) is killed. It ignores the signals a terminal sends, and
# lives in its own session.
WATCHDOG = """
import os, signal, sys
""" + inspect.getsource(tree_under) + inspect.getsource(kill_tree) + """
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP):
    signal.signal(s, signal.SIG_IGN)
pgid, data = int(sys.argv[1]), b""
while True:
    try:
        chunk = os.read(0, 64)
    except InterruptedError:
        continue
    except OSError:
        chunk = b""
    if not chunk:
        break
    data += chunk
if b"done" not in data:
    kill_tree(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


def _start_watchdog(pgid: int) -> subprocess.Popen | None:
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", WATCHDOG, str(pgid)], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def _release_watchdog(wd: subprocess.Popen | None) -> None:
    if wd is None:
        return
    try:
        wd.stdin.write(b"done")
        wd.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        wd.wait(2.0)
    except subprocess.TimeoutExpired:
        wd.kill()
        wd.wait()


class Child:
    """A process started with :meth:`start` (``subprocess.Popen`` keyword arguments pass through).

    ``interrupt``: "leader" (SIGINT to the child alone) or "group" (to its whole process group).
    After it ended: ``returncode`` (negative for a signal), ``timed_out``, ``killed`` (SIGKILL after a grace
    period or a second stop), ``stop_asked`` (stop() or the timeout was used), ``t_start``/``t_end``.
    """

    def __init__(self, argv: list[str], *, interrupt: str = "group", grace_s: float = GRACE_S,
                 timeout: float | None = None, on_exit: Callable[[int], None] | None = None, **popen):
        if interrupt not in ("leader", "group"):
            raise ValueError(f"interrupt must be 'leader' or 'group' (got {interrupt!r})")
        self.argv, self.interrupt, self.grace_s, self.timeout = list(argv), interrupt, grace_s, timeout
        self.on_exit = on_exit
        self.popen = popen
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.t_start = self.t_end = None
        self.timed_out = self.killed = self.stop_asked = False
        self.kill_asked = False  # a second stop() or kill(), not the grace period running out
        self._kill_at: float | None = None
        self._stop_early = False
        self._watchdog: subprocess.Popen | None = None
        self._lock = threading.RLock()  # re-entrant: a second signal's handler may interrupt the first's
        self._done = threading.Event()
        self._escaped: dict[int, int | None] = {}  # descendants seen in groups of their own: pid -> start time

    # -- start ---------------------------------------------------------------------------------------
    def start(self) -> "Child":
        """Launch (raises OSError when it cannot start: not found, not executable)."""
        self.proc = subprocess.Popen(self.argv, start_new_session=True, **self.popen)
        self.t_start = time.monotonic()
        self._watchdog = _start_watchdog(self.proc.pid)
        threading.Thread(target=self._supervise, daemon=True, name=f"gputop-child-{self.proc.pid}").start()
        if self._stop_early:
            self.stop()
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- stop ----------------------------------------------------------------------------------------
    def stop(self, grace_s: float | None = None) -> None:
        """SIGINT now, SIGKILL to the group after the grace period; asked again, SIGKILL now."""
        with self._lock:
            if self.proc is None:  # asked before the launch: start() stops it at once
                self._stop_early = True
                return
            if self._done.is_set():
                return
            self.stop_asked = True
            now = time.monotonic()
            if self._kill_at is not None:
                self.kill_asked, self._kill_at = True, now
                return
            self._kill_at = now + (self.grace_s if grace_s is None else grace_s)
        self._signal(signal.SIGINT, group=self.interrupt == "group")

    def kill(self) -> None:
        """SIGKILL to the group at the supervisor's next look (within POLL_S)."""
        with self._lock:
            if self.proc is None or self._done.is_set():
                return
            self.stop_asked = self.kill_asked = True
            self._kill_at = time.monotonic()

    def send(self, sig: int, group: bool = False) -> None:
        """Send one signal now (the TUI's forwarding of a key, a test)."""
        if self.proc is not None and not self._done.is_set():
            self._signal(sig, group)

    def _signal(self, sig: int, group: bool) -> None:
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                os.kill(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- supervise -----------------------------------------------------------------------------------
    def _exited(self) -> bool:
        """True once the child has exited; it stays a zombie (its pid and group id reserved) until reaped."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _note_escaped(self) -> None:
        """Remember the descendants in process groups of their own (pid: start time)."""
        for p in tree_under(self.proc.pid):
            try:
                if os.getpgid(p) != self.proc.pid and p not in self._escaped:
                    self._escaped[p] = start_time(p)
            except OSError:
                pass

    def _kill_escaped(self) -> None:
        for p, t0 in self._escaped.items():
            if t0 is None or start_time(p) != t0:  # gone, or the pid is another process's now
                continue
            try:
                g = os.getpgid(p)
                if g != os.getpgrp() and g == p:
                    os.killpg(g, signal.SIGKILL)
                else:
                    os.kill(p, signal.SIGKILL)
            except OSError:
                pass

    def _supervise(self) -> None:
        next_tree = time.monotonic()
        try:
            while not self._exited():
                time.sleep(POLL_S)
                now = time.monotonic()
                if now >= next_tree:
                    self._note_escaped()
                    next_tree = now + TREE_EVERY_S
                if self.timeout and not self.timed_out and now - self.t_start > self.timeout:
                    self.timed_out = True
                    self.stop()
                with self._lock:
                    kill = self._kill_at is not None and now >= self._kill_at and not self.killed
                    self.killed = self.killed or kill
                if kill:
                    kill_tree(self.proc.pid)  # the leader is alive: its tree is still under it
                    self._signal(signal.SIGKILL, group=True)
        finally:
            self.t_end = time.monotonic()
            self._signal(signal.SIGKILL, group=True)  # leftovers of the group
            self._kill_escaped()  # and the descendants that had left it (orphaned now, if the child exited)
            self.returncode = self.proc.wait()
            self._wait_gone()
            _release_watchdog(self._watchdog)
            self._done.set()
            if self.on_exit is not None:
                self.on_exit(self.returncode)

    def _wait_gone(self) -> None:
        """Until the group and the descendants that left it are gone, for GONE_WAIT_S at most: a SIGKILLed process
        ends when the kernel has torn it down, not when kill() returns (beside two test suites a grandchild still
        read "sleeping" just after its group's kill), and an orphan's zombie waits for init. ``done``: gone."""
        end = time.monotonic() + GONE_WAIT_S
        while time.monotonic() < end:
            try:
                os.killpg(self.proc.pid, 0)
                group = True
            except OSError:  # no process left in the group (the leader is reaped: its id is not reused meanwhile)
                group = False
            if not group and not any(_running(p, t0) for p, t0 in self._escaped.items()):
                return
            time.sleep(0.01)

    # -- results -------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """True once the child has ended and been reaped (its group killed, the watchdog released)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> int | None:
        """The return code once the child has ended; None if ``timeout`` passed first."""
        if self.proc is None:
            return None
        self._done.wait(timeout)
        return self.returncode if self._done.is_set() else None
