"""A ``gputop --serve`` session from the browser's side of textual-serve's websocket (the protocol the page's
scripts speak: ``["stdin", keys]`` up, the terminal's bytes down), without a browser (a real one:
tests/test_serve_browser.py).

Specification: a session whose browser goes away (the websocket closes) stops its run as q does and its
gputop exits, while the server goes on; and the session's gputop starts when the server runs from the folder
that holds a clone named ``gputop`` under an editable install (it must not import the working directory).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from export_util import free_port
from fault_util import (PIDFILE_ENV, ROOT, Proc, Report, env, plain, read_pids, reaper,  # noqa: F401
                        wait_until)
from gputop.runner.recording import shipped
from gputop.runner.registry import Registry, workload_dirs
from gputop.tui.model.runs import with_recordings

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("textual_serve")

START_S = 60.0  # a session's gputop up and drawing, a run under way (2 busy cores)
END_S = 30.0  # the session gone once its browser is: the run's grace period (5 s) and more


class Server:
    """``ARGV --serve 127.0.0.1:PORT EXTRA...`` in ``cwd``; its output in files under ``folder``."""

    def __init__(self, argv: list[str], extra: list[str], folder: Path, cwd: Path, environ: dict):
        self.port = free_port()
        self.err_path = folder / "serve.stderr"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*argv, "--serve", f"127.0.0.1:{self.port}", *extra], cwd=cwd, env=environ,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        self.seen: list[Proc] = []

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        except OSError:
            return False

    def sessions(self) -> list[psutil.Process]:
        """The gputop of each browser session now (the ``--served`` processes under the server)."""
        out = []
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        for p in kids:
            try:
                if "--served" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def snapshot(self) -> None:
        known = {(p.pid, p.create_time) for p in self.seen}
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        for k in kids:
            try:
                p = Proc(k.pid, k.create_time(), f"under the server ({' '.join(k.cmdline())[:80]})")
            except psutil.Error:
                continue
            if (p.pid, p.create_time) not in known:
                self.seen.append(p)

    def kill(self) -> None:
        """Cleanup: the server's process group (its sessions are in it) and whatever was seen under it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait(10)
        for p in self.seen:
            p.kill()


@pytest.fixture
def servers():
    started: list[Server] = []
    try:
        yield started
    finally:
        for s in started:
            s.kill()


class Browser:
    """The page's side of the websocket: keys up, the terminal's output down (kept as plain text)."""

    def __init__(self, port: int, cols: int = 120, rows: int = 40):
        self.url = f"http://127.0.0.1:{port}/ws?width={cols}&height={rows}"
        self.out = bytearray()

    async def __aenter__(self):
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(self.url)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type == aiohttp.WSMsgType.BINARY:
                self.out += msg.data

    async def wait_text(self, text: str, timeout: float = START_S, since: int = 0) -> None:
        end = time.monotonic() + timeout
        while text not in plain(bytes(self.out[since:])):
            assert not self._reader.done(), f"the websocket closed before {text!r} came: {plain(bytes(self.out))[-600:]!r}"
            assert time.monotonic() < end, f"{text!r} never came: {plain(bytes(self.out))[-600:]!r}"
            await asyncio.sleep(0.05)

    def mark(self) -> int:
        return len(self.out)

    async def press(self, keys: str) -> None:
        await self.ws.send_json(["stdin", keys])

    async def close(self) -> None:
        """The page goes away: its websocket closes."""
        await self.ws.close()
        self._reader.cancel()
        await self.session.close()

    async def __aexit__(self, *exc):
        if not self.ws.closed:
            await self.close()
        else:
            await self.session.close()


def gputop_argv() -> list[str]:
    return [sys.executable, "-m", "gputop"]


def run_in_a_session(server: Server, pid_file: Path, names: list[str], end):
    """Open a session, start fault_tree in it, then ``end(page)`` (the page or the server goes away);
    returns the run's processes and the session's gputop."""

    async def browse():
        async with Browser(server.port) as page:
            await page.wait_text("SM activity")  # the monitor, from the demo trace
            since = page.mark()
            await page.press("2")
            await page.wait_text("runs on: CPU", since=since)
            since = page.mark()
            await page.press("\x1b[B" * names.index("fault_tree"))  # down to fault_tree
            await page.wait_text("pid_file", since=since)  # its form (the only workload with that parameter)
            await page.press("r")
            procs = await asyncio.to_thread(wait_until, lambda: read_pids(pid_file), START_S,
                                            "the workload's pid file", server.proc)
            server.snapshot()
            sessions = [Proc.of(p.pid, "the session's gputop") for p in server.sessions()]
            await end(page)
            return procs, [p for p in sessions if p]

    return asyncio.run(browse())


def serve_fault_workloads(tmp_path: Path, servers, reaper) -> tuple[Server, Path, list[str]]:
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    environ = env(**{PIDFILE_ENV: str(pid_file)})
    server = Server(gputop_argv(), ["--demo", "--device", "cpu", "--serve-control"], tmp_path, ROOT, environ)
    servers.append(server)
    wait_until(server.listening, START_S, "the server listening", server.proc)
    names = [s.name for s in with_recordings(list(Registry(workload_dirs(environ))), shipped())[0]]
    return server, pid_file, names


@pytest.mark.slow
def test_a_session_whose_browser_goes_away_stops_its_run_and_exits(tmp_path: Path, servers, reaper):
    server, pid_file, names = serve_fault_workloads(tmp_path, servers, reaper)

    async def close_the_page(page):
        await page.close()

    procs, sessions = run_in_a_session(server, pid_file, names, close_the_page)
    rep = Report("--serve --serve-control, fault_tree running in a session, the page closed")
    rep.expect(len(sessions) == 1, f"{len(sessions)} session gputop(s) under the server, expected one")
    rep.gone(sessions + procs + server.seen, within=END_S,
             what="the session's gputop, its run and everything under the server")
    rep.expect(server.proc.poll() is None, f"the server exited (code {server.proc.returncode}) with the session")
    rep.no_traceback(server.stderr, "the server's output")
    rep.finish()


@pytest.mark.slow
def test_a_session_whose_server_dies_stops_its_run_and_exits(tmp_path: Path, servers, reaper):
    """The server killed (SIGKILL: nothing of it says goodbye): the session's input ends and its writes fail."""
    server, pid_file, names = serve_fault_workloads(tmp_path, servers, reaper)

    async def kill_the_server(page):
        server.proc.kill()  # the server alone, not its process group
        server.proc.wait(10)

    procs, sessions = run_in_a_session(server, pid_file, names, kill_the_server)
    rep = Report("--serve --serve-control, fault_tree running in a session, the server killed")
    rep.expect(len(sessions) == 1, f"{len(sessions)} session gputop(s) under the server, expected one")
    rep.gone(sessions + procs + server.seen, within=END_S,
             what="the session's gputop, its run and everything that was under the server")
    rep.finish()


FINDER = '''"""An editable install's finder, as setuptools writes one: on sys.meta_path after the path's own finder."""
import importlib.util
import sys

SOURCE = {source!r}


class EditableFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "gputop":
            return None
        return importlib.util.spec_from_file_location(name, SOURCE + "/__init__.py",
                                                      submodule_search_locations=[SOURCE])


def install():
    sys.meta_path.append(EditableFinder)
'''
ENTRY_POINT = '''#!{python}
import sys
from gputop.cli import main
sys.exit(main())
'''


def editable_venv(folder: Path) -> Path:
    """A virtual environment where gputop is this checkout, installed editable (a finder in a .pth, as
    ``pip install -e`` does; no PYTHONPATH), with the test venv's packages (textual-serve, psutil) beside it;
    returns the ``gputop`` entry point in it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    py = folder / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    import textual_serve

    (site / "test_deps.pth").write_text(str(Path(textual_serve.__file__).parents[1]) + "\n")
    (site / "gputop_editable_finder.py").write_text(FINDER.format(source=str(ROOT / "gputop")))
    (site / "gputop_editable.pth").write_text("import gputop_editable_finder; gputop_editable_finder.install()\n")
    entry = folder / "bin" / "gputop"
    entry.write_text(ENTRY_POINT.format(python=py))
    entry.chmod(0o755)
    return entry


def test_serving_from_the_folder_holding_a_clone_named_gputop_starts_sessions(tmp_path: Path, servers):
    entry = editable_venv(tmp_path / "venv")
    work = tmp_path / "work"
    clone = work / "gputop"  # a checkout as `git clone` names it: the package inside, no __init__.py at its top
    (clone / "gputop").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'gputop'\n")
    (clone / "README.md").write_text("a clone\n")
    environ = {k: v for k, v in env().items() if k not in ("PYTHONPATH", "GPUTOP_WORKLOADS_PATH")}
    server = Server([str(entry)], ["--demo"], tmp_path, work, environ)
    servers.append(server)
    wait_until(server.listening, START_S, "the server listening", server.proc)

    async def browse():
        async with Browser(server.port) as page:
            await page.wait_text("SM activity")  # the session's gputop started and draws the monitor
            return [p.cmdline() for p in server.sessions()]

    sessions = asyncio.run(browse())
    assert sessions and sessions[0][1:2] in (["-P"], ["-c"]), sessions  # the working directory kept off its path
    assert "__version__" not in server.stderr and "Traceback" not in server.stderr, server.stderr[-2000:]
