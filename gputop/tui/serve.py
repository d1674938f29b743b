"""``gputop --serve [HOST:]PORT``: the TUI in a browser, through textual-serve.

textual-serve runs a web server; each browser that opens the page gets its own gputop process (the
command :func:`child_command` builds: this gputop, with the same source flags, ``--demo``, ``--replay
FILE``, ``--gpu N``..., and the hidden ``--served``), whose screen it streams to the page. The server
binds 127.0.0.1 unless told another host. The served TUI is read-only unless ``--serve-control``: the
keys that start, cancel or save a run are refused there with a notification (the monitor, the pages,
the help, the tour and the results still work). A page that closes (its websocket: textual-serve then
tells the session to quit) or a server that goes away ends the session as a closed terminal does: its runs
stopped as q stops them, within their grace period (``tui/terminal.ServedDriver``).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys

import psutil

from gputop import exitcodes

# flags passed on to the gputop each browser session runs: (attribute, flag, takes a value)
PASSED = [("demo", "--demo", False), ("replay", "--replay", True), ("speed", "--speed", True),
          ("rate", "--rate", True), ("device", "--device", True), ("timeout", "--timeout", True),
          ("grace", "--grace", True), ("source", "--source", True), ("no_color", "--no-color", False),
          ("tour", "--tour", False), ("quick", "--quick", False)]
DEFAULTS = {"speed": 1.0, "device": "cuda"}  # (--rate has none on the command line: unset, the session's is the same)


# The session's gputop must not import from its working directory (``python -m`` puts it first on sys.path):
# served from the folder that holds a clone named ``gputop``, the clone would be imported as a namespace package
# ahead of an editable install (whose finder comes after the path's), with no ``__version__``. ``-P`` (3.11+)
# leaves the working directory off the path; on 3.10 the module runs with the path's first entry removed.
if sys.version_info >= (3, 11):
    PYTHON_GPUTOP = [sys.executable, "-P", "-m", "gputop"]
else:
    PYTHON_GPUTOP = [sys.executable, "-c", "import runpy, sys; del sys.path[0]; "
                     "runpy.run_module('gputop', run_name='__main__', alter_sys=True)"]


def child_command(args) -> list[str]:
    """The gputop command line textual-serve runs for each browser session."""
    cmd = [*PYTHON_GPUTOP, "--served"]
    if getattr(args, "serve_control", False):
        cmd.append("--serve-control")
    for attr, flag, valued in PASSED:
        v = getattr(args, attr, None)
        if v is None or v is False or (attr in DEFAULTS and v == DEFAULTS[attr]):
            continue
        cmd += [flag, str(v)] if valued else [flag]
    for g in getattr(args, "gpu", None) or []:
        cmd += ["--gpu", str(g)]
    for path in getattr(args, "recorded", None) or []:
        cmd += ["--recorded", os.path.abspath(path)]
    return cmd


def public_url(host: str, port: int) -> str:
    """The address the page's scripts connect back to (all interfaces: this machine's name)."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def main_serve(args) -> int:
    host, port = args.serve_address  # parsed and checked by cli.parse
    try:
        from textual_serve.server import Server
    except ImportError:
        return exitcodes.fail(exitcodes.MISSING_DEPENDENCY,
                              "gputop --serve needs textual-serve: pip install 'gputop[serve]'")
    try:  # the address first: a port in use (or a host not ours) is exit 2 before the banner, as for --export
        socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET).close()
    except OSError as exc:
        return exitcodes.fail(exitcodes.USAGE, f"--serve {args.serve}: cannot listen on {host}:{port}: "
                                               f"{exc.strerror or exc}")
    command = shlex.join(child_command(args))
    server = Server(command, host=host, port=port, title="gputop", public_url=public_url(host, port))
    mode = "with control (run, cancel, save)" if args.serve_control else "read-only (--serve-control to allow runs)"
    exitcodes.say(f"serving the TUI at {public_url(host, port)} {mode}; Ctrl+C stops")
    try:
        server.serve()
    except OSError as exc:  # the port is taken, or the host is not one of ours
        return exitcodes.fail(exitcodes.USAGE, f"--serve {args.serve}: cannot listen: {exc.strerror or exc}")
    finally:
        stop_sessions()
    return exitcodes.OK


def stop_sessions(grace_s: float = 5.0) -> None:
    """No browser session's gputop outlives the server: SIGINT (gputop stops its runs and exits), then
    SIGKILL for one still there after ``grace_s``."""
    kids = [p for p in psutil.Process().children(recursive=True) if _is_session(p)]
    for p in kids:
        try:
            p.send_signal(signal.SIGINT)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kids, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def _is_session(p) -> bool:
    try:
        return "--served" in p.cmdline()
    except psutil.Error:
        return False
