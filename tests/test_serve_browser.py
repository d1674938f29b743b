"""``gputop --serve`` opened in a real headless Chromium (Debian's ``chromium``), driven through the
DevTools protocol: the page shows the monitor (what the page's websocket received, and a screenshot that
is not blank), the server runs a gputop for the session, and keys typed into the page work with
``--serve-control`` and are refused (with a notification) without it. Skips without chromium or
textual-serve (scripts/test installs both)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import psutil
import pytest

from export_util import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROOT = Path(__file__).resolve().parents[1]
aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("textual_serve")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")

# Runs in the page before its scripts: keeps what the terminal's websocket receives (the TUI's output)
HOOK = """
(() => {
  window.__out = "";
  const dec = new TextDecoder();
  const Native = window.WebSocket;
  function Hooked(url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    ws.addEventListener("message", (e) => {
      if (typeof e.data === "string") return;
      if (e.data instanceof ArrayBuffer) { window.__out += dec.decode(e.data, {stream: true}); }
      else { e.data.arrayBuffer().then((b) => { window.__out += dec.decode(b, {stream: true}); }); }
    });
    return ws;
  }
  Hooked.prototype = Native.prototype;
  Object.assign(Hooked, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  window.WebSocket = Hooked;
})();
"""
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "the server exited"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def png_distinct_bytes(png: bytes) -> int:
    """How many distinct byte values the decompressed pixel rows hold (a blank page: a handful)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat)))


class Page:
    """One Chromium tab over the DevTools protocol."""

    def __init__(self, ws):
        self.ws, self.n = ws, 0

    async def call(self, method: str, **params):
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=20)
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return msg.get("result", {})

    async def text(self) -> str:
        r = await self.call("Runtime.evaluate", expression="window.__out || ''", returnByValue=True)
        return ANSI.sub("", r["result"].get("value", ""))

    async def wait_text(self, want: str, timeout: float = 15.0, since: int = 0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = await self.text()
            if want in text[since:]:
                return text
            await asyncio.sleep(0.1)
        raise AssertionError(f"{want!r} never reached the page; it got: {(await self.text())[-600:]!r}")

    async def screenshot(self, turns: asyncio.Lock, timeout: float = 15.0) -> bytes:
        """The tab brought to the front and shot once xterm.js has painted the terminal: a tab in the
        background gets no animation frames, so what its websocket received may not be drawn yet. Tabs take
        turns (one lock) so each is in front while it waits."""
        async with turns:
            await self.call("Page.bringToFront")
            end = time.monotonic() + timeout
            while True:
                shot = await self.call("Page.captureScreenshot", format="png")
                png = base64.b64decode(shot["data"])
                if png_distinct_bytes(png) > 40 or time.monotonic() > end:
                    return png
                await asyncio.sleep(0.1)

    async def press(self, key: str) -> None:
        """A key typed into the terminal, as a person would: a click on it first (the focus), then the key."""
        for kind in ("mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent", type=kind, x=640, y=10, button="left", clickCount=1)
        code = f"Key{key.upper()}" if key.isalpha() else f"Digit{key}"
        vk = ord(key.upper())
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, text=key if kind == "keyDown" else "",
                            windowsVirtualKeyCode=vk, nativeVirtualKeyCode=vk)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium")
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1280,800",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    active = profile / "DevToolsActivePort"
    end = time.monotonic() + 20
    while not (active.exists() and active.read_text().count("\n") >= 1) and time.monotonic() < end:
        time.sleep(0.05)
    try:
        if not active.exists():
            pytest.skip("chromium did not start its DevTools endpoint")
        yield int(active.read_text().split()[0])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def serve(port: int, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "gputop", "--serve", f"127.0.0.1:{port}", "--demo", *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


async def open_page(devtools: int, url: str) -> tuple[Page, object, object]:
    session = aiohttp.ClientSession()
    async with session.put(f"http://127.0.0.1:{devtools}/json/new?about:blank") as r:
        target = await r.json(content_type=None)
    ws = await session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
    page = Page(ws)
    await page.call("Page.enable")
    await page.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
    await page.call("Page.navigate", url=url)
    return page, ws, session


async def session_in_browser(devtools: int, port: int, control: bool, turns: asyncio.Lock) -> dict:
    """Open the served page, check it shows the monitor, type keys; the page is closed at the end (its
    websocket with it, so the server ends that session's gputop)."""
    page, ws, session = await open_page(devtools, f"http://127.0.0.1:{port}/")
    try:
        await page.wait_text("SM activity", 30)  # the monitor, from the demo trace (an H200)
        await page.wait_text("DRAM bandwidth")
        out = {"png": await page.screenshot(turns)}
        n = len(await page.text())
        await page.press("2")  # the workloads page: keys reach the app
        out["after_2"] = await page.wait_text("2 workloads", since=n)
        n = len(out["after_2"])
        await page.press("c")
        want = "read-only view: cannot cancel a run" if not control else "nothing is running"
        out["after_c"] = (await page.wait_text(want, since=n))[n:]
        if not control:
            n = len(await page.text())
            await page.press("r")
            out["after_r"] = (await page.wait_text("read-only view: cannot run a workload", since=n))[n:]
        return out
    finally:
        try:
            await page.call("Page.close")
        finally:
            await ws.close()
            await session.close()


def served_gputops(server: subprocess.Popen) -> list[list[str]]:
    """The command lines of the gputop sessions the server runs now."""
    return [p.cmdline() for p in psutil.Process(server.pid).children(recursive=True) if "--served" in p.cmdline()]


@pytest.fixture(scope="module")
def browsed(chromium) -> dict:
    """Both servers (read-only, and --serve-control) at once, each opened in a tab."""
    ports = {False: free_port(), True: free_port()}
    servers = {c: serve(ports[c], *(["--serve-control"] if c else [])) for c in (False, True)}
    try:
        for c in servers:
            wait_port(ports[c], servers[c])

        async def both():
            turns = asyncio.Lock()  # the tabs take turns in front for their screenshots
            tasks = {c: asyncio.create_task(session_in_browser(chromium, ports[c], c, turns)) for c in (False, True)}
            # the server side: one gputop per browser session, with the right flags; each server's first seen is
            # kept (a session ends with its tab: on a loaded machine a later look may come after it)
            sessions = {c: [] for c in servers}
            end = time.monotonic() + 60
            while time.monotonic() < end:
                sessions = {c: sessions[c] or served_gputops(servers[c]) for c in servers}
                if all(sessions.values()) or all(t.done() for t in tasks.values()):
                    break
                await asyncio.sleep(0.05)
            outs = {c: await t for c, t in tasks.items()}
            for c in outs:
                outs[c]["sessions"] = sessions[c]
                outs[c]["pids"] = [p.pid for p in psutil.Process(servers[c].pid).children(recursive=True)]
            return outs

        outs = asyncio.run(both())
    finally:
        for server in servers.values():
            server.send_signal(signal.SIGINT)
        for server in servers.values():
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    for out in outs.values():  # nothing the server started outlives it
        out["left"] = [pid for pid in out["pids"] if psutil.pid_exists(pid)
                       and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    return outs


@pytest.mark.slow
def test_served_read_only_shows_the_monitor_and_refuses_run_and_cancel(browsed):
    out = browsed[False]
    assert png_distinct_bytes(out["png"]) > 40  # the rendered terminal, not a blank page
    assert out["sessions"] and "--serve-control" not in out["sessions"][0] and "--demo" in out["sessions"][0]
    assert "read-only" in out["after_2"]  # the header says so
    assert "nothing is running" not in out["after_c"]
    assert out["left"] == []


@pytest.mark.slow
def test_served_with_control_takes_the_keys(browsed):
    out = browsed[True]
    assert out["sessions"] and "--serve-control" in out["sessions"][0]
    assert "read-only" not in out["after_c"]
