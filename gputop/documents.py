"""gputop's JSON documents, in one place: schema versions, cleaning, error documents, and emitting one.

Kinds: ``run`` (``gputop --run NAME``), ``monitor`` (``--run -- CMD`` / ``--watch PID``), ``once``
(``--once``), ``cluster`` and ``doctor`` (``--doctor``); each has a JSON Schema in
``gputop/schema/<kind>.schema.json``. ``--json`` always writes exactly one document on stdout, an error document
too when the run could not start or go on.

:func:`emit` writes ``-o FILE`` first (so a closed terminal loses nothing), then stdout; a closed or
full stdout is one line on stderr and exit code 1, never a traceback (:func:`standard_streams`, first thing at
start: a stdout the shell closed reads as closed, and no file gputop opens takes its number).

The output rule (:func:`check_outputs`, which the command line checks once over every file it names): every file
gputop is asked to write can be written before anything runs, no two outputs name one file, none names an input or
stdout under ``--json``; a file that then cannot be written whole is said in one line and exits 1.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

import gputop
from gputop import exitcodes

SCHEMA_VERSIONS = {"run": 2, "monitor": 3, "once": 2, "cluster": 1, "doctor": 1}  # run, monitor 2: the one verdict shape,
# signal, errors; monitor 3: attribution (the profiler windows of --profile); once 2: exit_code and errors (an
# error document where no snapshot was taken)
SCHEMA_DIR = Path(__file__).resolve().parent / "schema"


def clean(obj):
    """Plain JSON types only (a deep copy): numpy scalars to numbers, NaN and infinities to None."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [clean(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return clean(jsonable(obj))


def jsonable(obj):
    """A value JSON has no type for, as one it has (``json.dumps(default=jsonable)``): a Verdict's dict,
    a numpy scalar's number, an array's list, else its text."""
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def dumps(doc: dict, indent: int | None = 2) -> str:
    """The document as strict JSON text."""
    return json.dumps(clean(doc), indent=indent, allow_nan=False)


def header(kind: str) -> dict:
    """The fields every document of ``kind`` starts with."""
    return {"schema_version": SCHEMA_VERSIONS[kind], "gputop_version": gputop.__version__}


def signal_fields(signum: int | None) -> dict:
    """``interrupted`` and ``signal`` of a document: which signal stopped gputop, if one did."""
    return {"interrupted": signum is not None, "signal": exitcodes.signal_name(signum) if signum else None}


def error(kind: str, message: str, detail: str = "") -> dict:
    return {"kind": kind, "message": message, "detail": detail}


def run_error_document(workload: str, kind: str, message: str, exit_code: int, params: dict | None = None,
                       device: str = "cuda", status: str = "error", signum: int | None = None) -> dict:
    """The run document of a workload run that never started (unknown workload, bad parameter, no GPU, a signal)."""
    return {
        **header("run"), "workload": workload, "status": status, **signal_fields(signum),
        "exit_code": exit_code, "child_exit_code": None,
        "started_at": None, "wall_time_s": 0.0, "command": [], "params": params or {},
        "device": {"kind": device, "nvml_index": None, "static": None, "peaks": None, "reported": None},
        "phases": [], "points": [], "results": {}, "telemetry": None, "verdict": None, "warnings": [],
        "errors": [error(kind, message)], "log": [],
    }


def monitor_error_document(mode: str, kind: str, message: str, exit_code: int, command: list[str] | None = None,
                           pid: int | None = None, started_at: str | None = None, signum: int | None = None) -> dict:
    """The monitor document of a ``--run -- CMD`` / ``--watch PID`` that could not start or go on."""
    return {
        **header("monitor"), "mode": mode, "status": "interrupted" if signum else "error", "command": command, "pid": pid, "exit_code": exit_code,
        "ended": "interrupted" if signum else "not started", "started_at": started_at, "wall_s": None,
        **signal_fields(signum), "source": {"kind": "live", "path": None}, "gpus_used": [], "gpu_detection": "none",
        "gpus": [], "verdict": None, "notes": [], "errors": [error(kind, message)],
    }


def once_error_document(kind: str, message: str, exit_code: int, source: dict | None = None) -> dict:
    """The ``--once`` document where no snapshot could be taken (no GPU, an unreadable trace, a bad ``--gpu``)."""
    from datetime import datetime, timezone

    return {
        **header("once"), "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source or {"kind": "live", "path": None}, "host": {}, "gpus": [], "na_reasons": {},
        "exit_code": exit_code, "errors": [error(kind, message)],
    }


def doctor_error_document(kind: str, message: str, exit_code: int, mode: str = "full") -> dict:
    """The ``--doctor`` document where no check could run (no NVML, a bad ``--gpu``, a missing dependency)."""
    import platform
    from datetime import datetime, timezone

    return {**header("doctor"), "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "hostname": platform.node(), "mode": mode, "status": None, "exit_code": exit_code,
            **signal_fields(None), "wall_s": 0.0, "counts": {}, "gpus": [], "pairs": [], "findings": [],
            "xid_log": None, "fleet": None, "errors": [error(kind, message)]}


def usage_error_document(mode: str, message: str, workload: str | None = None, command: list[str] | None = None,
                         path: str | None = None) -> dict | None:
    """The error document of a command line that was refused (exit 2) in a mode that writes one with ``--json``:
    ``once``, ``run`` (a workload), ``run-command`` (``--run -- CMD``), ``watch``, ``replay`` (``--replay FILE
    --json``: ``path``), ``list`` or ``doctor``; None for any other mode."""
    from gputop.exitcodes import USAGE

    if mode == "doctor":
        return doctor_error_document("bad_usage", message, USAGE)
    if mode == "once":
        return once_error_document("bad_usage", message, USAGE)
    if mode == "run":
        return run_error_document(workload or "", "bad_usage", message, USAGE)
    if mode in ("run-command", "watch", "replay"):
        doc = monitor_error_document({"run-command": "run"}.get(mode, mode), "bad_usage", message, USAGE,
                                     command=command)
        if mode == "replay":
            doc["source"] = {"kind": "replay", "path": path}
        return doc
    if mode == "list":
        return list_error_document(message, USAGE)
    return None


def list_error_document(message: str, exit_code: int) -> dict:
    """What ``--list --json`` writes where it cannot list: an object, not the listing's array (nothing reads an
    error as an empty listing), with its ``exit_code`` and ``errors``."""
    return {"gputop_version": gputop.__version__, "workloads": None, "exit_code": exit_code,
            "errors": [error("bad_usage", message)]}


def check_writable(path: str | None, flag: str) -> None:
    """Raise a usage Failure before anything runs when ``path`` cannot be created or written."""
    if not path:
        return
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        raise exitcodes.Failure(exitcodes.USAGE, f"{flag} {path}: no such folder {folder}")
    if os.path.isdir(full):
        raise exitcodes.Failure(exitcodes.USAGE, f"{flag} {path}: is a folder")
    target = full if os.path.exists(full) else folder
    if not os.access(target, os.W_OK):
        raise exitcodes.Failure(exitcodes.USAGE, f"{flag} {path}: not writable")


def _identity(path: str):
    """What a path names, to tell two names of one file apart from two files: the file's (device, inode) where it
    exists (a link, ``/dev/stdout``), else its resolved absolute path."""
    try:
        st = os.stat(path)
        return ("file", st.st_dev, st.st_ino), stat.S_ISCHR(st.st_mode)
    except OSError:
        return ("path", os.path.realpath(os.path.abspath(path))), False


def check_outputs(outputs: list[tuple[str, str]], inputs: list[tuple[str, str]] = (),
                  json_stdout: bool = False) -> None:
    """The output rule, checked once over a whole command line before anything runs (``outputs``: (flag, path) of
    every file gputop is asked to write; ``inputs``: of every file it reads): each can be written
    (:func:`check_writable`); no two name one file (``--record-run X -o X`` would leave X holding only the
    document), none names a file gputop reads (``--replay X -o X``), and with ``--json`` none is stdout itself,
    where the one document goes. A device such as /dev/null may take several outputs. Raises a usage Failure."""
    for flag, path in outputs:
        if not path:
            raise exitcodes.Failure(exitcodes.USAGE, f"{flag} needs a file name (got an empty one)")
        check_writable(path, flag)
    seen: dict = {}
    stdout = None
    if json_stdout:
        try:
            st = os.fstat(1)
            stdout = ("file", st.st_dev, st.st_ino)
        except OSError:
            pass
    for flag, path in list(inputs) + list(outputs):
        ident, device = _identity(path)
        if (flag, path) in outputs and stdout is not None and ident == stdout:
            raise exitcodes.Failure(exitcodes.USAGE, f"{flag} {path} is stdout, where --json writes its document; "
                                                     "give one")
        if ident in seen and not device:
            other_flag, other_path = seen[ident]
            same = f"{other_flag} {other_path} and {flag} {path} name one file"
            why = "gputop would overwrite what it reads" if (other_flag, other_path) in inputs else "give each its own"
            raise exitcodes.Failure(exitcodes.USAGE, f"{same}: {why}")
        seen.setdefault(ident, (flag, path))


def writable(path: str | None) -> bool:
    """True when ``path`` can be written (an error document then goes there too)."""
    try:
        check_writable(path, "")
        return bool(path)
    except exitcodes.Failure:
        return False


def write_file(path: str, text: str) -> bool:
    """Write ``text`` to ``path``; False (and one line on stderr) when that fails."""
    try:
        with open(path, "w") as f:
            f.write(text)
        return True
    except OSError as exc:
        exitcodes.say(f"cannot write {path}: {exc.strerror or exc}")
        return False


def write_stdout(text: str) -> bool:
    """``text`` on stdout; on a closed or full stdout one line on stderr and False (no traceback later)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except (OSError, ValueError, AttributeError) as exc:
        why = "closed" if isinstance(exc, (BrokenPipeError, AttributeError)) else (getattr(exc, "strerror", None)
                                                                                   or str(exc))
        exitcodes.say(f"cannot write to stdout ({why}); output lost")
        silence_stdout()
        return False


class ClosedStdout:
    """``sys.stdout`` where the shell closed it (``gputop >&-``): a write says so (as a closed pipe does), so that
    :func:`write_stdout` reports the loss in one line; nothing else fails (flush at exit, isatty)."""

    closed = False
    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 1  # /dev/null, held there so that no file gputop opens takes the number


def standard_streams() -> None:
    """Descriptors 0, 1 and 2 open, on /dev/null where the shell closed one (``gputop >&- 2>&-``), so that no file
    gputop opens takes their number (a trace opened as descriptor 1 would get the command's output); a closed
    stdout becomes :class:`ClosedStdout` (its loss said in one line), a closed stderr is silent."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            closed.append(fd)
    if 1 in closed or sys.stdout is None:
        sys.stdout = ClosedStdout()
    if 2 in closed or sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    if 0 in closed or sys.stdin is None:
        sys.stdin = open(os.devnull)


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit does not print a traceback."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def emit(doc: dict, *, json_mode: bool, output: str | None = None,
         render_text: Callable[[dict], str] | None = None) -> bool:
    """Write the document: ``-o FILE`` first, then stdout (JSON, or ``render_text(doc)``). False if a write failed."""
    doc = clean(doc)
    text = dumps(doc) + "\n"
    ok = write_file(output, text) if output else True
    if json_mode:
        ok = write_stdout(text) and ok
    elif render_text is not None:
        ok = write_stdout(render_text(doc)) and ok
    return ok


@lru_cache(maxsize=None)
def load_schema(kind: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())


def validate(doc: dict, kind: str = "run") -> None:
    """Raise ``jsonschema.ValidationError`` when ``doc`` does not follow its schema (needs jsonschema)."""
    import jsonschema

    jsonschema.Draft202012Validator(load_schema(kind)).validate(doc)
