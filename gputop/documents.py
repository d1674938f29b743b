"""gputop's JSON documents, in one place: schema versions, cleaning, error documents, and emitting one.

Kinds: ``run`` (``gputop --run NAME``), ``monitor`` (``--run -- CMD`` / ``--watch PID``), ``once``
(``--once``), ``cluster`` and ``doctor`` (``--doctor``); each has a JSON Schema in
``gputop/schema/<kind>.schema.json``. ``--json`` always writes exactly one document on stdout, an error document
too when the run could not start or go on.

:func:`emit` writes ``-o FILE`` first (so a closed terminal loses nothing), then stdout; a closed or
full stdout is one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
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


def usage_error_document(mode: str, message: str, workload: str | None = None,
                         command: list[str] | None = None) -> dict | None:
    """The error document of a command line that was refused (exit 2) in a mode that writes one with ``--json``:
    ``once``, ``run`` (a workload), ``run-command`` (``--run -- CMD``), ``watch`` or ``doctor``; None for any other
    mode."""
    from gputop.exitcodes import USAGE

    if mode == "doctor":
        return doctor_error_document("bad_usage", message, USAGE)
    if mode == "once":
        return once_error_document("bad_usage", message, USAGE)
    if mode == "run":
        return run_error_document(workload or "", "bad_usage", message, USAGE)
    if mode in ("run-command", "watch"):
        return monitor_error_document("run" if mode == "run-command" else "watch", "bad_usage", message, USAGE,
                                      command=command)
    return None


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
    except (OSError, ValueError) as exc:
        why = "closed" if isinstance(exc, BrokenPipeError) else (getattr(exc, "strerror", None) or str(exc))
        exitcodes.say(f"cannot write to stdout ({why}); output lost")
        silence_stdout()
        return False


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
