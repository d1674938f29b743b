"""A process's profile loader, from any gputop of the same user on the node: found by pid, asked for a window, its
answer read (the files of :mod:`gputop.runner.profile_loader.protocol`).

* :func:`find`: a process's loader (:class:`Target`), or one line why there is none: no such process, another
  user's, not Python, a loader of another protocol, or a Python process started without the loader (how to prepare
  it: ``gputop --profile-env``; on Python 3.14+ the loader is installed into it with ``sys.remote_exec``,
  :func:`attach`, where the kernel lets this user attach to it).
* :func:`of_run`: the loaders of the processes a ``gputop --run --profile`` started (``run`` in their
  ``loaded.json``).
* :class:`Asked`: one window asked of several processes at once (a job's ranks start it at the same time), each
  answer as it comes, and one line for a process that ended or went silent before answering.

gputop never creates a CUDA context: it only writes and reads files here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import protocol as P

PREPARE = ('start it with gputop\'s loader: eval "$(gputop --profile-env)" in the shell or job script that starts '
           "it (torchrun, srun, accelerate...), or gputop --run --profile -- CMD")
ATTACH_WAIT_S = 5.0  # sys.remote_exec runs the loader at the target's next safe point: this long, then one line
ANSWER_SLACK_S = 45.0  # past the window's due end (its wait for a step, its seconds, the summary): no answer


class Target:
    """One process's loader: ``pid``, its ``folder``, its ``loaded.json``."""

    def __init__(self, pid: int, folder: str, loaded: dict):
        self.pid, self.folder, self.loaded = pid, folder, loaded

    @property
    def frameworks(self) -> list[str]:
        return list(self.loaded.get("frameworks") or [])

    @property
    def cuda(self) -> bool:
        """torch has initialised CUDA in it (as its loader last said)."""
        return bool(self.loaded.get("cuda"))

    def alive(self) -> bool:
        start = P.process_start(self.pid)
        return start is not None and self.loaded.get("start") in (None, start)


def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def python_of(pid: int) -> tuple[bool, str | None, str | None]:
    """(is it Python, its version "3.12" where it shows, its executable) from /proc/PID/exe and its mapped
    libraries."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = None
    name = os.path.basename(exe or "")
    version = None
    if name.startswith("python"):
        version = name[len("python"):].rstrip("dmu") or None
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                i = line.find("libpython")
                if i >= 0:
                    version = version or line[i + 9:].split(".so")[0].rstrip("dmu") or None
                    return True, version, exe
    except OSError:
        pass
    return name.startswith("python"), version, exe


def _version_tuple(version: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (version or "").split(".")[:2])
    except ValueError:
        return ()


def find(pid: int, attach_ok: bool = True) -> tuple[Target | None, str | None]:
    """(process ``pid``'s loader, None), or (None, one line why not). ``attach_ok``: on Python 3.14+ a process
    without the loader gets it through sys.remote_exec (:func:`attach`)."""
    if P.process_start(pid) is None:
        return None, f"pid {pid}: no such process"
    uid = _uid(pid)
    if uid is not None and uid != os.getuid():
        return None, f"pid {pid} belongs to another user (uid {uid}): gputop asks only your own processes"
    folder, loaded = P.folder_of(pid)
    if folder is not None:
        if loaded.get("protocol") != P.PROTOCOL:
            return None, (f"pid {pid} carries the profile loader of another gputop (protocol {loaded.get('protocol')}"
                          f", {loaded.get('loader')}); this gputop speaks protocol {P.PROTOCOL}: ask with that "
                          f"gputop, or restart the program with this one's loader")
        return Target(pid, folder, loaded), None
    is_py, version, exe = python_of(pid)
    if not is_py:
        return None, f"pid {pid} is not a Python program ({exe or 'unknown executable'}): profiler windows are " \
                     f"for Python programs"
    shown = f"Python {version}" if version else "Python"
    if _version_tuple(version) >= (3, 14) and attach_ok:
        why = attach(pid, exe)
        if why is None:
            folder, loaded = P.folder_of(pid)
            if folder is not None:
                return Target(pid, folder, loaded), None
            why = "the loader did not start in it"
        return None, f"pid {pid} ({shown}) has no gputop loader and attaching one failed ({why}): {PREPARE}"
    later = "" if _version_tuple(version) >= (3, 14) else " (Python 3.14+ can be attached to without it)"
    return None, f"pid {pid} ({shown}) was not started with gputop's profile loader: {PREPARE}{later}"


ATTACH_SCRIPT = """\
import importlib.util, sys
if "_gputop_agent" not in sys.modules:
    spec = importlib.util.spec_from_file_location("_gputop_agent", {agent!r})
    agent = importlib.util.module_from_spec(spec)
    sys.modules["_gputop_agent"] = agent
    spec.loader.exec_module(agent)
sys.modules["_gputop_agent"].start(remote=True)
"""
REMOTE_EXEC = ("import sys\nf = getattr(sys, 'remote_exec', None)\n"
               "if f is None:\n    sys.exit('this Python has no sys.remote_exec (3.14+ has)')\n"
               "f(int(sys.argv[1]), sys.argv[2])\n")


def attach(pid: int, exe: str | None, wait_s: float = ATTACH_WAIT_S) -> str | None:
    """Install the loader into running Python process ``pid`` with ``sys.remote_exec`` (PEP 768), run by the
    target's own interpreter ``exe``; None once its folder is there, else why not (one line)."""
    if not exe or sys.platform != "linux":
        return "no interpreter to attach with"
    base = P.make_base()
    script = os.path.join(base, f".attach-{pid}.py")
    with open(script, "w") as f:
        f.write(ATTACH_SCRIPT.format(agent=os.path.join(LOADER_DIR, "agent.py")))
    try:
        r = subprocess.run([exe, "-I", "-c", REMOTE_EXEC, str(pid), script], capture_output=True, text=True,
                           timeout=wait_s + 5)
        if r.returncode != 0:
            lines = [x for x in (r.stderr or "").strip().splitlines() if x.strip()]
            return lines[-1] if lines else f"exit {r.returncode}"
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            if P.folder_of(pid)[0] is not None:
                return None
            time.sleep(0.05)
        return f"it did not run the loader within {wait_s:g} s (its main thread busy outside Python?)"
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        try:
            os.remove(script)
        except OSError:
            pass


def of_run(token: str) -> list[Target]:
    """The loaders of the processes started by the ``gputop --run --profile`` whose token is ``token``."""
    out = []
    for base in P.bases():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.isdigit():
                continue
            folder = os.path.join(base, name)
            loaded = P.read_json(os.path.join(folder, P.LOADED))
            if loaded and loaded.get("run") == token and loaded.get("pid") == int(name):
                out.append(Target(int(name), folder, loaded))
    return out


def remove_ended(targets: list[Target]) -> None:
    """Remove the folders of the targets whose process has ended (their answers read)."""
    for t in targets:
        if not t.alive():
            shutil.rmtree(t.folder, ignore_errors=True)


class Asked:
    """One window asked of ``targets`` together: ``seqs`` {pid: request number}, ``joined`` the pids whose pending
    request (another gputop's) this one joined, ``answers()`` {pid: answer} so far; ``done`` once every process has
    answered or is known not to."""

    def __init__(self, targets: list[Target], request: P.Request):
        self.targets = {t.pid: t for t in targets}
        self.request = request
        self.seqs: dict[int, int] = {}
        self.joined: set[int] = set()
        self._answers: dict[int, dict] = {}
        for t in targets:
            try:
                seq, joined = P.ask(t.folder, request)
            except OSError:
                self._answers[t.pid] = P.unavailable("the process ended before it was asked", pid=t.pid)
                continue
            self.seqs[t.pid] = seq
            if joined:
                self.joined.add(t.pid)
        self.due = max(request.start_at, time.time()) + 2 * request.seconds + ANSWER_SLACK_S

    def answers(self) -> dict[int, dict]:
        """Each process's answer so far: its own, or one line once it has ended or gone silent past ``due``."""
        for pid, seq in self.seqs.items():
            if pid in self._answers:
                continue
            t = self.targets[pid]
            got = P.read_answer(t.folder, seq)
            if got is not None:
                self._answers[pid] = got
            elif not t.alive():
                got = P.read_answer(t.folder, seq)  # written as it exited
                self._answers[pid] = got or P.unavailable(
                    "the process ended before it answered (killed, or it exited without running its exit handlers)",
                    pid=pid, seq=seq)
            elif time.time() > self.due:
                self._answers[pid] = P.unavailable(
                    f"no answer within {self.due - self.request.start_at:.0f} s (the process stopped, or its "
                    f"interpreter held by code outside Python)", pid=pid, seq=seq)
        return dict(self._answers)

    @property
    def done(self) -> bool:
        return len(self.answers()) >= len(self.targets)
