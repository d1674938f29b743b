"""An internal error, logged: the traceback of an exception gputop did not handle, written to a file of its own, and
one line on stderr that names it (``exitcodes.INTERNAL_ERROR``, 70). The TUI's apps (gputop/tui/crash.py) and the
modes without a TUI (gputop/cli: a headless mode that dies of a bug) both end this way; with ``--json`` the mode's
error document says it too. No Textual here.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time

from gputop import exitcodes

SUMMARY_MAX = 200  # characters of the exception's own line kept in the one line


def log_folder() -> str:
    """``$XDG_STATE_HOME/gputop`` (``~/.local/state/gputop`` when it is unset)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "gputop")


def write_log(text: str) -> str:
    """``text`` with what gputop was running, in a new file of the log folder (else of the temporary folder); its
    path. OSError where neither can be written."""
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    from gputop import __version__

    head = (f"gputop {__version__}, Python {platform.python_version()}, textual {_version('textual')}, "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %z')}\ncommand line: {' '.join(sys.argv)}\n\n")
    last: OSError | None = None
    for folder in (log_folder(), tempfile.gettempdir()):
        path = os.path.join(folder, name)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
                f.write(head + text)
            return path
        except OSError as exc:
            last = exc
    raise last


def summary(text: str) -> str:
    """The exception's own line of a traceback, printable and cut to ``SUMMARY_MAX`` characters."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else "an exception"
    last = "".join(c if c.isprintable() else "?" for c in last)
    return last if len(last) <= SUMMARY_MAX else last[:SUMMARY_MAX - 1] + "…"


def report(text: str, what: str = "the TUI") -> int:
    """The crash logged and said in one line (``what`` stopped); its exit code."""
    exitcodes.say(line(text, what))
    return exitcodes.INTERNAL_ERROR


def line(text: str, what: str = "the TUI") -> str:
    """The crash logged; the one line that says so."""
    try:
        where = f"the traceback is in {write_log(text)}"
    except OSError as exc:
        where = f"its traceback could not be written ({exc.strerror or exc})"
    return f"{what} stopped on an internal error ({summary(text)}); {where}"


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"
