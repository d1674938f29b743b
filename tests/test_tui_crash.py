"""A TUI that dies of an exception: every App gputop runs (the monitor, the command TUI, the cluster page, a
``--serve`` session) exits ``exitcodes.INTERNAL_ERROR``, says so in one line that names a log file, prints no
traceback on the terminal, and the log file holds the traceback.

The exception is a real one in a real gputop process on a real pseudo-terminal: tests/crash_inject/sitecustomize.py
(first on PYTHONPATH, ``GPUTOP_TEST_CRASH=1``) makes the help screens raise when they are composed, and the test
presses ``?``. The log goes under ``$XDG_STATE_HOME/gputop`` (a folder of the test's).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest

from fault_util import PY, TREE_CMD, Report, Terminal, env, plain, read_pids, reaper, wait_until  # noqa: F401
from gputop import exitcodes
from test_cluster_prometheus import cluster  # noqa: F401 (fixture: a real Prometheus over gputop and dcgm exporters)

INJECT = Path(__file__).parent / "crash_inject"
MESSAGE = "raised on purpose by tests/crash_inject"
START_S = 60.0  # up and drawing (2 busy cores)
END_S = 30.0
LINE = re.compile(r"gputop: the TUI stopped on an internal error \(RuntimeError: " + re.escape(MESSAGE)
                  + r"\); the traceback is in (\S+\.log)")


def crash_env(state: Path, fake_nvml: bool = False) -> dict:
    e = env(fake_nvml=fake_nvml, GPUTOP_TEST_CRASH="1", XDG_STATE_HOME=str(state))
    e["PYTHONPATH"] = os.pathsep.join([str(INJECT), e["PYTHONPATH"]])
    return e


def check_crash(text: str, state: Path, rep: Report, where: str) -> None:
    """One line naming the log, no traceback in ``text``; the log (under ``state``) holds it."""
    lines = [ln.strip() for ln in text.splitlines() if "internal error" in ln]
    rep.expect(len(lines) == 1, f"{len(lines)} lines about the error in {where}, expected one: {text[-1500:]!r}")
    rep.no_traceback(text, where)
    m = LINE.search(text)
    if not rep.expect(m is not None, f"no line naming the log in {where}: {text[-1500:]!r}"):
        return
    log = Path(m.group(1))
    rep.expect(log.parent == state / "gputop", f"the log is {log}, not under $XDG_STATE_HOME/gputop")
    if rep.expect(log.is_file(), f"{log} does not exist"):
        body = log.read_text()
        rep.expect("Traceback (most recent call last)" in body and f"RuntimeError: {MESSAGE}" in body
                   and "compose" in body, f"the log holds no traceback: {body[:1500]!r}")
        rep.expect(oct(log.stat().st_mode & 0o777) == oct(0o600), f"the log's mode is {oct(log.stat().st_mode)}")


def test_the_monitor_that_dies_of_an_exception_exits_70_with_one_line_and_a_log(tmp_path: Path, reaper):
    term = Terminal(["--demo"], crash_env(tmp_path), cols=80, rows=24)
    reaper.gputops.append(term)
    term.wait_text("SM activity", START_S)
    term.press("?")
    rc = term.wait(END_S)
    rep = Report("--demo, ? raising in the help screen")
    rep.exit_code(rc, exitcodes.INTERNAL_ERROR)
    rep.expect(term.restored(), "the terminal was not restored (no ESC[?1049l after the last ESC[?1049h)")
    check_crash(plain(term.output()), tmp_path, rep, "the terminal")
    rep.finish()


@pytest.mark.slow
def test_the_command_tui_that_dies_stops_its_command_and_exits_70(tmp_path: Path, reaper):
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(["--tui", "--log", str(tmp_path / "cmd.log"), "--run", "--", PY, str(TREE_CMD), str(pid_file),
                     "hang"], crash_env(tmp_path, fake_nvml=True))
    reaper.gputops.append(term)
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the command's pid file", term.proc)
    child = next(p for p in procs if p.role == "child")
    term.wait_text(f"pid {child.pid}", START_S)
    term.press("?")
    rc = term.wait(END_S)
    rep = Report("--tui --run -- CMD, ? raising in the help screen")
    rep.exit_code(rc, exitcodes.INTERNAL_ERROR)
    rep.gone(procs, what="the command's processes, as gputop exited")
    check_crash(plain(term.output()), tmp_path, rep, "the terminal")
    rep.finish()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus binary on PATH")
def test_the_cluster_page_that_dies_exits_70_with_one_line_and_a_log(tmp_path: Path, reaper, cluster):
    term = Terminal(["--source", f"prometheus={cluster['url']}"], crash_env(tmp_path), cols=80, rows=24)
    reaper.gputops.append(term)
    term.wait_text("dcgm-a", START_S)
    term.press("?")
    rc = term.wait(END_S)
    rep = Report("the cluster page, ? raising in its help screen")
    rep.exit_code(rc, exitcodes.INTERNAL_ERROR)
    rep.expect(term.restored(), "the terminal was not restored")
    check_crash(plain(term.output()), tmp_path, rep, "the terminal")
    rep.finish()


@pytest.mark.slow
def test_a_served_session_that_dies_exits_70_and_the_server_shows_its_one_line(tmp_path: Path):
    pytest.importorskip("aiohttp")
    pytest.importorskip("textual_serve")
    from test_serve_session import Browser, Server

    server = Server([PY, "-m", "gputop"], ["--demo"], tmp_path, Path(__file__).resolve().parents[1],
                    crash_env(tmp_path))
    try:
        wait_until(server.listening, START_S, "the server listening", server.proc)

        async def browse():
            async with Browser(server.port) as page:
                await page.wait_text("SM activity")
                sessions = server.sessions()
                await page.press("?")
                for p in sessions:
                    await asyncio.to_thread(p.wait, END_S)
                return sessions

        sessions = asyncio.run(browse())
        assert len(sessions) == 1
        # the session's stderr reaches the server's output once the session has ended
        wait_until(lambda: LINE.search(server.stderr), END_S, "the session's line in the server's output")
        rep = Report("--serve --demo, ? raising in a session's help screen")
        check_crash(server.stderr, tmp_path, rep, "the server's output")
        rep.expect(server.proc.poll() is None, "the server ended with its session")
        rep.finish()
    finally:
        server.kill()


def test_a_headless_mode_that_dies_exits_70_with_one_line_its_log_and_its_json_document(tmp_path: Path):
    """Not only the TUI: ``--replay F --json`` dying of a bug (its document never built) is the same one line, the
    traceback in the log, exit 70, and stdout still holds its mode's one document, which says so."""
    import json
    import subprocess

    import jsonschema

    e = crash_env(tmp_path, fake_nvml=True)
    e["GPUTOP_TEST_CRASH"] = "headless"
    demo = Path(__file__).resolve().parents[1] / "gputop" / "data" / "demo.jsonl.gz"
    p = subprocess.run([PY, "-m", "gputop", "--replay", str(demo), "--json"], env=e, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == exitcodes.INTERNAL_ERROR == 70, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    m = re.fullmatch(r"gputop: gputop stopped on an internal error \(RuntimeError: " + re.escape(MESSAGE)
                     + r"\); the traceback is in (\S+\.log)", lines[0])
    assert m, lines[0]
    body = Path(m.group(1)).read_text()
    assert "Traceback (most recent call last)" in body and "replay_document" in body
    doc = json.loads(p.stdout)
    assert doc["exit_code"] == 70 and doc["errors"][0]["kind"] == "internal_error"
    assert doc["errors"][0]["message"] == lines[0].removeprefix("gputop: ")
    schema = Path(__file__).resolve().parents[1] / "gputop" / "schema" / "monitor.schema.json"
    jsonschema.validate(doc, json.loads(schema.read_text()))


def test_the_exit_code_is_in_the_readme_table():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"| {exitcodes.INTERNAL_ERROR} |" in readme and exitcodes.INTERNAL_ERROR in exitcodes.TABLE
