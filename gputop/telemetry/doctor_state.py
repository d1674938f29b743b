"""The last ``gputop --doctor`` of each GPU, kept on disk: one small JSON file per GPU UUID, which ``--export``
publishes (``gputop_doctor_*`` series) and the TUI's device panel shows ("doctor: degraded 2 h ago: ...").

Where: ``$GPUTOP_DOCTOR_DIR`` when set (the only folder then, written and read); otherwise the doctor writes to
``/var/lib/gputop/doctor`` when it can (root: a Slurm prolog, a Kubernetes init container), else to
``$XDG_STATE_HOME/gputop/doctor`` (``~/.local/state/gputop/doctor``), and the readers take the newest of the two for
each GPU. Files are written whole (a temporary file renamed) and readable by everyone (0644): an exporter running as
another user reads what a root prolog wrote.

A file (``<UUID>.json``)::

    {"format": "gputop-doctor-state", "version": 1, "time": ISO-8601, "unix_time", "hostname", "gputop_version",
     "mode": "full" | "quick" | "passive", "index", "uuid", "name", "status": "ok" | "degraded" | "failed",
     "figures": {figure: value}, "findings": [the GPU's findings other than ok], "counts": {status: n}}
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FORMAT, VERSION = "gputop-doctor-state", 1
ENV = "GPUTOP_DOCTOR_DIR"
SYSTEM_DIR = Path("/var/lib/gputop/doctor")
REFRESH_S = 10.0  # LastDoctor looks at the folders at most this often


def user_dir(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gputop" / "doctor"


def state_dirs(env: dict | None = None) -> list[Path]:
    """The folders read, in order (``$GPUTOP_DOCTOR_DIR`` alone when set)."""
    env = os.environ if env is None else env
    if env.get(ENV):
        return [Path(env[ENV])]
    return [SYSTEM_DIR, user_dir(env)]


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def write_states(states: list[dict], env: dict | None = None) -> tuple[list[str], str | None]:
    """Write each GPU's state (``states``: dicts with ``uuid``) to the first folder that can be written; returns
    (the paths written, why nothing or not everything was written)."""
    folder = next((d for d in state_dirs(env) if _writable_dir(d)), None)
    if folder is None:
        return [], "no folder to keep the doctor's results in: " + ", ".join(map(str, state_dirs(env)))
    written, why = [], None
    for st in states:
        uuid = st.get("uuid")
        if not uuid or "/" in uuid or uuid.startswith("."):
            why = f"GPU {st.get('index')}: no usable UUID, its result is not kept"
            continue
        path = folder / f"{uuid}.json"
        tmp = folder / f".{uuid}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump({"format": FORMAT, "version": VERSION, **st}, f, allow_nan=False)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            written.append(str(path))
        except (OSError, ValueError) as exc:
            why = f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
            try:
                tmp.unlink()
            except OSError:
                pass
    return written, why


def _load(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def read_last(uuid: str | None, env: dict | None = None) -> dict | None:
    """The newest state kept for the GPU ``uuid`` (None: none, or it cannot be read)."""
    if not uuid:
        return None
    docs = [d for d in (_load(folder / f"{uuid}.json") for folder in state_dirs(env)) if d is not None]
    return max(docs, key=lambda d: d.get("unix_time") or 0) if docs else None


def read_all(env: dict | None = None) -> dict[str, dict]:
    """{uuid: its newest state} of every GPU kept in the folders."""
    out: dict[str, dict] = {}
    for folder in state_dirs(env):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            doc = _load(folder / name)
            uuid = (doc or {}).get("uuid")
            if uuid and (uuid not in out or (doc.get("unix_time") or 0) > (out[uuid].get("unix_time") or 0)):
                out[uuid] = doc
    return out


def _age(seconds: float) -> str:
    if seconds < 90:
        return "just now"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} d ago"


def summary(state: dict | None, now: float | None = None) -> tuple[str, str] | None:
    """(status, one line) of a kept state: "degraded 2 h ago (quick): DRAM bandwidth 2.71 TB/s: 14% below ..."."""
    if not state:
        return None
    now = time.time() if now is None else now
    status = state.get("status") or "n/a"
    bad = [f for f in state.get("findings") or [] if f.get("status") == status]
    line = f"{status} {_age(max(0.0, now - (state.get('unix_time') or now)))} ({state.get('mode') or '?'})"
    if bad:
        line += f": {bad[0].get('message', '')}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")
    return status, line


class LastDoctor:
    """Each GPU's last doctor, read again at most every ``REFRESH_S`` (and only when a folder changed): what a
    frame or a scrape asks for costs a dictionary look-up."""

    def __init__(self, env: dict | None = None, refresh_s: float = REFRESH_S):
        self.env, self.refresh_s = env, refresh_s
        self._states: dict[str, dict] = {}
        self._seen: tuple | None = None
        self._at = -float("inf")

    def _stamp(self) -> tuple:
        out = []
        for folder in state_dirs(self.env):
            try:
                out.append(os.stat(folder).st_mtime_ns)
            except OSError:
                out.append(None)
        return tuple(out)

    def states(self) -> dict[str, dict]:
        now = time.monotonic()
        if now - self._at >= self.refresh_s:
            self._at = now
            stamp = self._stamp()
            if stamp != self._seen:
                self._seen, self._states = stamp, read_all(self.env)
        return self._states

    def get(self, uuid: str | None) -> dict | None:
        return self.states().get(uuid) if uuid else None
