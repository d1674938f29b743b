"""Helpers of the fault matrix (tests/test_faults_*.py): a real gputop process, real signals, and the
processes of a run (which must all be gone when gputop is).

Every gputop runs as ``python -m gputop ...`` from the repository root, in its own session (a signal the
test sends reaches gputop only), stdin /dev/null, stdout and stderr in files (not pipes: a leaked
grandchild holding a pipe would hang the test). Synchronisation is on files with a deadline, never on
a fixed sleep: the pid file a fault workload/command writes once its grandchild runs, and the fake
pynvml's sample mark (tests/fake_pynvml/pynvml.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pty_util import Pty, plain  # noqa: F401  (plain: the fault tests' too)

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FAULT_WORKLOADS = TESTS / "fault_workloads"
TREE_WORKLOADS = FAULT_WORKLOADS / "tree"  # fault_tree.py, apart from the five that other tests count
FAULT_CMDS = TESTS / "fault_cmds"
FAKE_PYNVML = TESTS / "fake_pynvml"
TREE_CMD = FAULT_CMDS / "tree_cmd.py"
PY = sys.executable
PIDFILE_ENV = "GPUTOP_TEST_PIDFILE"  # read by tests/fault_workloads/fault_tree.py when pid_file is not given

ALT_SCREEN_ON, ALT_SCREEN_OFF = b"\x1b[?1049h", b"\x1b[?1049l"


def env(fake_nvml: bool = False, **extra: str) -> dict:
    """gputop's environment: this worktree first on PYTHONPATH (the fake pynvml before it with
    ``fake_nvml``), the fault workloads (tests/fault_workloads and its tree/) on GPUTOP_WORKLOADS_PATH."""
    e = dict(os.environ)
    for k in ("NO_COLOR", PIDFILE_ENV, "GPUTOP_FAKE_NVML_MARK", "GPUTOP_FAKE_NVML_STATIC", "PYTHONFAULTHANDLER"):
        e.pop(k, None)
    path = [str(ROOT)]
    if fake_nvml:
        path.insert(0, str(FAKE_PYNVML))
    # then what the caller's PYTHONPATH held (a GPU machine's carried wheels: textual, plotext, ...)
    path += [p for p in (e.get("PYTHONPATH") or "").split(os.pathsep) if p and p not in path]
    e["PYTHONPATH"] = os.pathsep.join(path)
    e["GPUTOP_WORKLOADS_PATH"] = os.pathsep.join([str(FAULT_WORKLOADS), str(TREE_WORKLOADS)])
    e.update(extra)
    return e


def wait_until(cond, timeout: float, what: str, proc: subprocess.Popen | None = None, poll: float = 0.02):
    """Poll ``cond()`` until it is true; fail after ``timeout`` s, or as soon as ``proc`` has exited."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            v = cond()
            if v:
                return v
            raise AssertionError(f"gputop exited (code {proc.returncode}) before {what}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


# -- the processes of a run -------------------------------------------------------------------------------
class Proc:
    """A pid with its creation time (so that a reused pid is not mistaken for it)."""

    def __init__(self, pid: int, create_time: float | None, role: str):
        self.pid, self.create_time, self.role = pid, create_time, role

    @classmethod
    def of(cls, pid: int, role: str) -> "Proc | None":
        try:
            return cls(pid, psutil.Process(pid).create_time(), role)
        except psutil.Error:
            return None

    def _process(self) -> psutil.Process | None:
        try:
            p = psutil.Process(self.pid)
            if self.create_time is not None and abs(p.create_time() - self.create_time) > 0.05:
                return None  # another process got the pid
            return p
        except psutil.Error:
            return None

    def alive(self) -> bool:
        """Running (or stopped): a zombie is dead; its parent (init, once gputop is gone) reaps it."""
        p = self._process()
        if p is None:
            return False
        try:
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def describe(self) -> str:
        p = self._process()
        try:
            what = " ".join(p.cmdline())[:120] if p else "gone"
            status = p.status() if p else ""
        except psutil.Error:
            what, status = "gone", ""
        return f"{self.role} pid {self.pid} ({status}: {what})"

    def kill(self) -> None:
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"Proc({self.role}, {self.pid})"


def read_pids(path: Path) -> list[Proc] | None:
    """The pids a fault workload/command wrote (None while the file is not there yet)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    return [Proc(pid, ctime, role) for role, (pid, ctime) in data.items()]


def started(p, needle: bytes, timeout: float = 30.0):
    """``p`` (a Popen) once its exec is done: its command line holds ``needle`` (Popen returns when the kernel has
    closed the child's close-on-exec files, a moment before the new program's command line and environment are in
    place; /proc/PID/environ reads empty in between)."""
    from export_util import wait_for

    wait_for(lambda: needle in cmdline(p.pid), timeout, f"process {p.pid} to exec {needle!r}", step=0.01)
    return p


def cmdline(pid: int) -> bytes:
    """A process's command line as /proc has it, its arguments joined by spaces (b"" where it is gone); between
    fork and exec it is its parent's."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ")
    except OSError:
        return b""


def sigkill(pids) -> None:
    """SIGKILL each of ``pids`` that is still there."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def descendants(pid: int) -> list[Proc]:
    """Every process under ``pid`` now (the run's processes, gputop's own helpers)."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            out.append(Proc(k.pid, k.create_time(), f"descendant of gputop ({k.name()})"))
        except psutil.Error:
            pass
    return out


def others(procs: list[Proc], known: list[Proc]) -> list[Proc]:
    """``procs`` less those in ``known`` (same pid and creation time)."""
    ids = {(p.pid, p.create_time) for p in known}
    return [p for p in procs if (p.pid, p.create_time) not in ids]


def survivors(procs: list[Proc]) -> list[Proc]:
    return [p for p in procs if p.alive()]


def assert_none_alive(procs: list[Proc], within: float = 0.0, what: str = "") -> None:
    """Every process in ``procs`` is gone now (``within`` = 0) or within ``within`` seconds."""
    end = time.monotonic() + within
    while True:
        left = survivors(procs)
        if not left or time.monotonic() >= end:
            break
        time.sleep(0.02)
    assert not left, (f"still alive {'after ' + format(within, 'g') + ' s ' if within else ''}once gputop was gone"
                      f"{' (' + what + ')' if what else ''}: " + "; ".join(p.describe() for p in left))


# -- gputop itself ----------------------------------------------------------------------------------------
class _Watched:
    """A gputop process (``pid``) and the processes seen under it (``seen``)."""

    pid: int
    seen: list

    def snapshot(self) -> None:
        """Remember every process under gputop now (they must be gone after it)."""
        known = {(p.pid, p.create_time) for p in self.seen}
        self.seen += [p for p in descendants(self.pid) if (p.pid, p.create_time) not in known]

    def send(self, sig: int) -> None:
        self.snapshot()
        os.kill(self.pid, sig)


class Gputop(_Watched):
    """``python -m gputop ARGS`` in its own session, output in files under ``folder``."""

    def __init__(self, args: list[str], folder: Path, env: dict, stdout=None, name: str = "gputop"):
        self.args = list(args)
        self.folder = Path(folder)
        self.out_path = self.folder / f"{name}.stdout"
        self.err_path = self.folder / f"{name}.stderr"
        self._out = open(self.out_path, "wb") if stdout is None else None
        self._err = open(self.err_path, "wb")
        try:
            self.proc = subprocess.Popen([PY, "-m", "gputop", *self.args], cwd=ROOT, env=env,
                                         stdin=subprocess.DEVNULL, stdout=self._out if stdout is None else stdout,
                                         stderr=self._err, start_new_session=True)
        finally:
            if self._out is not None:
                self._out.close()
            self._err.close()
        self.pid = self.proc.pid
        self.seen: list[Proc] = []  # descendants seen while it ran

    def wait(self, timeout: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"gputop {' '.join(self.args)} still running after {timeout:g} s\n"
                                 f"stderr: {self.stderr[-2000:]}") from None

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def kill(self) -> None:
        """Cleanup: SIGKILL gputop and its process group (a session of its own: only its run's processes)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


class Reaper:
    """What a test started; ``cleanup()`` (the fixture's teardown) kills whatever is still alive."""

    def __init__(self):
        self.gputops: list = []  # Gputop / Terminal
        self.procs: list[Proc] = []
        self.pid_files: list[Path] = []
        self.popens: list[subprocess.Popen] = []

    def cleanup(self) -> None:
        for g in self.gputops:
            if g.proc.poll() is None:
                g.snapshot()
            g.kill()
            close = getattr(g, "close", None)
            if close:
                close()
        procs = list(self.procs)
        for g in self.gputops:
            procs += g.seen
        for f in self.pid_files:
            procs += read_pids(f) or []
        for p in procs:
            p.kill()
        for p in self.popens:
            if p.poll() is None:
                p.kill()
                p.wait(10)


# -- documents --------------------------------------------------------------------------------------------
def one_json(text: str, where: str) -> dict:
    """``text`` is exactly one JSON document (json.loads rejects anything before or after it)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise AssertionError(f"{where} is not one JSON document ({exc}): {text[:300]!r}") from None
    assert isinstance(doc, dict), f"{where}: a JSON {type(doc).__name__}, not an object"
    return doc


def stderr_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


# -- a pseudo-terminal ------------------------------------------------------------------------------------
class Terminal(_Watched):
    """gputop on a pseudo-terminal of ``cols`` x ``rows`` (pty_util.Pty: a thread reads everything it writes).
    With ``controlling`` the pty is gputop's controlling terminal (what a real terminal gives it)."""

    def __init__(self, args: list[str], env: dict, cols: int = 100, rows: int = 30, controlling: bool = False):
        self.args = list(args)
        self.env = env
        self.pty = Pty(cols, rows)
        self.proc = self.pty.spawn([PY, "-m", "gputop", *self.args], env=env, cwd=ROOT, controlling=controlling)
        self.pid = self.proc.pid
        self.seen: list[Proc] = []

    def hang_up(self) -> None:
        """Close the master side (:meth:`Pty.hang_up`), having noted every process under gputop first."""
        self.snapshot()
        self.pty.hang_up()

    def output(self) -> bytes:
        return self.pty.output()

    def mark(self) -> int:
        """A position in the output; ``wait_text(..., since=mark)`` looks only at what came after it."""
        return self.pty.mark()

    def wait_text(self, text: str, timeout: float = 30.0, since: int = 0) -> None:
        self.pty.wait_text(text, timeout, since)

    def press(self, keys: str | bytes) -> None:
        self.pty.press(keys)

    def wait(self, timeout: float = 60.0) -> int:
        return self.pty.wait(timeout)

    def restored(self) -> bool:
        """The output ends by leaving the alternate screen: a 1049l after the last 1049h."""
        out = self.output()
        on = out.rfind(ALT_SCREEN_ON)
        return on >= 0 and out.find(ALT_SCREEN_OFF, on) > on

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        self.kill()
        self.pty.close()


# -- checking a cell --------------------------------------------------------------------------------------
class Report:
    """Collects every way a cell differs from the specification, then fails once listing them all (so a
    failing cell says at once which exit code it saw, what survived, and what the document lacked)."""

    def __init__(self, what: str):
        self.what = what
        self.problems: list[str] = []

    def expect(self, ok: bool, message: str) -> bool:
        if not ok:
            self.problems.append(message)
        return ok

    def exit_code(self, got: int, want: int) -> None:
        self.expect(got == want, f"exit code {got}{_signal_note(got)}, expected {want}")

    def gone(self, procs: list[Proc], within: float = 0.0, what: str = "") -> None:
        try:
            assert_none_alive(procs, within, what)
        except AssertionError as exc:
            self.problems.append(str(exc))

    def no_traceback(self, text: str, where: str) -> None:
        self.expect("Traceback" not in text,
                    f"a Python traceback on {where}: ...{text[text.find('Traceback'):][:600]!r}")

    def document(self, text: str, where: str, *, code: int, status: str | None = None, interrupted: bool = False,
                 sig: str | None = None, errors: bool = False, validate=None) -> dict | None:
        """The document in ``text`` (exactly one JSON object), checked against the specification."""
        try:
            doc = one_json(text, where)
        except AssertionError as exc:
            self.problems.append(str(exc))
            return None
        self.expect(doc.get("exit_code") == code, f"{where}: exit_code {doc.get('exit_code')!r}, expected {code}")
        if status is not None:
            self.expect(doc.get("status") == status, f"{where}: status {doc.get('status')!r}, expected {status!r}")
        if interrupted:
            self.expect(doc.get("interrupted") is True,
                        f"{where}: interrupted {doc.get('interrupted')!r}, expected true")
            self.expect(doc.get("signal") == sig, f"{where}: signal {doc.get('signal')!r}, expected {sig!r}")
        else:
            self.expect(not doc.get("interrupted"),
                        f"{where}: interrupted {doc.get('interrupted')!r}, expected false")
        if errors:
            errs = doc.get("errors")
            self.expect(isinstance(errs, list) and len(errs) > 0,
                        f"{where}: errors {errs!r}, expected a non-empty list")
        if validate is not None:
            try:
                validate(doc)
            except Exception as exc:  # jsonschema.ValidationError
                self.problems.append(f"{where}: not valid against its schema: {str(exc).splitlines()[0]}")
        return doc

    def finish(self) -> None:
        assert not self.problems, f"{self.what}:\n  - " + "\n  - ".join(self.problems)


def _signal_note(code: int) -> str:
    if code < 0:
        try:
            return f" (gputop was killed by {signal.Signals(-code).name})"
        except ValueError:
            return ""
    return ""


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name


@pytest.fixture
def reaper():
    """A Reaper whose cleanup runs however the test ends (nothing a test started is left behind)."""
    r = Reaper()
    try:
        yield r
    finally:
        r.cleanup()
