"""The files gputop and its profile loader talk through: where a prepared process's folder is, what a request and
an answer hold, and how each is written and claimed.

Stdlib only, and nothing of gputop: gputop's side (``gputop/session/profile_target.py``) imports it as
``gputop.runner.profile_loader.protocol``; the loader (``agent.py`` in the program, where gputop itself may not be
importable) loads it by its path.

**Where.** Every process that loads the loader makes a folder of its own, ``BASE/PID`` (mode 0700, in a base of
mode 0700 that the user owns), found by any gputop of the same user on the node from the pid alone
(:func:`folder_of`): ``BASE`` is ``$GPUTOP_PROFILE_DIR`` where set, else ``$XDG_RUNTIME_DIR/gputop/profile``, else
``/tmp/gputop-UID/profile`` (:func:`bases`; gputop reads the process's own environment, /proc/PID/environ, so a
Slurm job's environment and an SSH shell's agree). A base another user owns, or that others may write, is refused.

**Files** (each written whole under a hidden name and renamed or linked into place: the other side sees it complete
or not at all):

``loaded.json``        the process, at its start (:func:`write_loaded`): ``protocol`` (:data:`PROTOCOL`), ``pid``,
                       ``start`` (its start time, /proc/PID/stat's 22nd field: a reused pid is told apart),
                       ``python``, ``loader`` (the loader's folder), ``run`` (``GPUTOP_PROFILE_RUN``: the
                       ``gputop --run`` that started it, if one did), ``frameworks`` (torch, cupy, jax... as the
                       program imports them) and ``cuda`` (torch has initialised CUDA in it): rewritten as they
                       change.
``request-N.json``     a gputop asks for window N (1, 2, ...; :class:`Request`): ``protocol``, ``seconds``,
                       ``max_steps``, ``start_at``, ``asker``. Claimed with a hard link (:func:`ask`): of two gputops
                       asking at once one writes N, the other joins it and reads the same answer.
``window-N.json``      the answer (:func:`write_answer`), once: the window's summary (``status`` "ok") or one line
                       why not (``status`` "unavailable", ``reason``); :data:`ANSWER_FIELDS` names every field. A
                       program that ends with a request pending answers at its exit. The loader keeps the last
                       :data:`KEEP` requests and answers.

A request of another protocol is answered with one line and no window; gputop reads ``loaded.json``'s protocol
first and asks no loader that speaks another (:data:`PROTOCOL`).
"""

import json
import os
import shutil
import time
from typing import NamedTuple

PROTOCOL = 2  # 1: gputop --run's private folder shared by the command's processes (request-N, window-N-PID.json)
BASE_ENV = "GPUTOP_PROFILE_DIR"  # the folder of the prepared processes' folders (tests, a site's own place)
RUN_ENV = "GPUTOP_PROFILE_RUN"  # set by ``gputop --run --profile``: its processes say which run they belong to
KEEP_TRACE_ENV = "GPUTOP_PROFILE_KEEP_TRACE"  # a folder: each window's chrome trace is kept there (validation)
OK, UNAVAILABLE = "ok", "unavailable"
LOADED = "loaded.json"
KEEP = 8  # requests (and answers) a process's folder keeps


class Request(NamedTuple):
    """What gputop asks of a process: a window that ends after ``seconds`` or ``max_steps`` steps (0: seconds
    only) and starts at the program's first module call or step after ``start_at`` (Unix time: a job's processes,
    asked at once, start at the same step), or from the loader's thread where no step comes (see the loader).
    ``asker``: the gputop's pid; ``protocol``: the asker's. ``min_seconds``: a window that ends at its steps lasts
    at least this long (a job's ranks: their start skew small beside it; 0 for one process)."""

    seconds: float = 3.0
    max_steps: int = 0
    start_at: float = 0.0
    asker: int = 0
    protocol: int = PROTOCOL
    min_seconds: float = 0.0

    def text(self) -> str:
        return json.dumps(self._asdict())

    @classmethod
    def parse(cls, text: str) -> "Request":
        """The request's fields (missing ones take the defaults); ValueError if it is not a request."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("a request is a JSON object")
        d = cls._field_defaults
        return cls(float(doc.get("seconds", d["seconds"])), int(doc.get("max_steps", d["max_steps"])),
                   float(doc.get("start_at", d["start_at"])), int(doc.get("asker", 0)),
                   int(doc.get("protocol", 0)), float(doc.get("min_seconds", 0.0)))


# Every field of an answer (``window-N.json``), each with what it holds.
ANSWER_FIELDS = {
    "status": '"ok": the window was recorded; "unavailable": it was not (``reason``)',
    "reason": "with status unavailable: why, one line",
    "protocol": "the loader's protocol (PROTOCOL)",
    "seq": "the request answered (N)",
    "pid": "the answering process",
    "asked_at": "when the process read the request (Unix time)",
    "profiler": '"torch" (torch.profiler; the default where absent) or "cupti" (a CUDA program without torch)',
    "torch": "torch's version (None under CUPTI)",
    "cuda": "whether the program had initialised CUDA (no kernels otherwise)",
    "started_at": "the window's start (Unix time, the program's clock)",
    "started_by": '"step" (a module call or optimizer step on a program\'s thread) or "time" (the loader\'s thread: '
                  'no step came within the window\'s seconds)',
    "ops_threads": '"all" (every thread\'s host ops: torch\'s profile_all_threads) or "one" (the thread the window '
                   'started on); kernels and copies are the whole process\'s either way (CUPTI)',
    "wall_s": "the window's length, seconds",
    "stop_s": "how long the profiler's stop held the program's thread, seconds",
    "summary_s": "how long the loader's thread took to sum the events up (the program runs on meanwhile)",
    "summed_from": '"raw events" or "key_averages"',
    "gpu_busy_s": "the union of the kernels' times on the GPU in the window, seconds (None without CUDA)",
    "host_wall_s": "CUPTI: the window on the host's clock, seconds",
    "gpu_lag_s": "CUPTI: how far the GPU ran behind the host at the window's end, seconds",
    "steps": "the steps the window held (optimizer steps; forward passes in inference)",
    "step_kind": '"optimizer step" or "forward pass"',
    "ended_by": "why the window ended before its seconds or steps (the program's own profiler, its exit), or None",
    "kernels": "[{name, count, device_us}] each kernel (copies and fills named as torch.profiler names them)",
    "ops": "[{name, count, self_cpu_us, cpu_us, device_us}] each host op (empty under CUPTI)",
    "kernel_spans": "each kernel's stream, start, end and launch (kernel_spans.py), or None",
    "kernel_spans_why": "why there are no kernel_spans, one line",
    "kernel_spans_truncated": "whether kernel_spans was cut at its limit",
    "kernel_spans_from": '"raw events", "events" or "chrome trace"',
}


def unavailable(reason: str, **fields) -> dict:
    """An answer that says why there is no window."""
    return {"status": UNAVAILABLE, "reason": reason, **fields}


# -- where -------------------------------------------------------------------------------------------------------
def bases(environ=None) -> list:
    """The folders a process with ``environ`` may have its own folder in, in the order the loader tries them."""
    env = os.environ if environ is None else environ
    if env.get(BASE_ENV):
        return [env[BASE_ENV]]
    out = []
    run = env.get("XDG_RUNTIME_DIR")
    if run and os.path.isabs(run):
        out.append(os.path.join(run, "gputop", "profile"))
    out.append(os.path.join("/tmp", "gputop-%d" % os.getuid(), "profile"))
    return out


class Refused(Exception):
    """A base folder that is not the user's alone (one line)."""


def _private(path: str) -> None:
    """``path`` made (mode 0700) or checked: a folder, not a link, the user's, no one else may write it."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass
    st = os.lstat(path)
    import stat

    if not stat.S_ISDIR(st.st_mode):
        raise Refused("%s is not a folder" % path)
    if st.st_uid != os.getuid():
        raise Refused("%s belongs to another user (uid %d)" % (path, st.st_uid))
    if st.st_mode & 0o022:
        raise Refused("others may write %s (mode %o)" % (path, st.st_mode & 0o777))


def make_base(environ=None) -> str:
    """The first base of :func:`bases` that can be made the user's own (OSError/Refused: none)."""
    env = os.environ if environ is None else environ
    err = None
    for base in bases(env):
        try:
            if not env.get(BASE_ENV):  # the default places: gputop's folder in them is the user's alone too
                _private(os.path.dirname(base))
            _private(base)
            return base
        except (OSError, Refused) as exc:
            err = exc
    raise err if err else Refused("no folder for gputop's profile loader")


def process_start(pid: int):
    """Process ``pid``'s start time (clock ticks after boot, /proc/PID/stat's 22nd field), or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            text = f.read().decode("ascii", "replace")
        return text[text.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def environ_of(pid: int):
    """Process ``pid``'s environment at its start (/proc/PID/environ), or None where it cannot be read."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def make_folder(pid: int, environ=None) -> str:
    """The process's own folder, made afresh (a folder left by a process that had the same pid is removed)."""
    folder = os.path.join(make_base(environ), str(pid))
    if os.path.lexists(folder):
        shutil.rmtree(folder, ignore_errors=True)
    os.mkdir(folder, 0o700)
    return folder


def folder_of(pid: int, environ=None):
    """(folder, loaded) of process ``pid``'s loader, or (None, None) where it has none (not prepared, ended, or a
    folder left by an earlier process with the same pid)."""
    envs = [environ] if environ is not None else [e for e in (environ_of(pid), dict(os.environ)) if e is not None]
    start = process_start(pid)
    seen = set()
    for env in envs:
        for base in bases(env):
            folder = os.path.join(base, str(pid))
            if folder in seen:
                continue
            seen.add(folder)
            loaded = read_json(os.path.join(folder, LOADED))
            if loaded and loaded.get("pid") == pid and (start is None or loaded.get("start") in (None, start)):
                return folder, loaded
    return None, None


# -- files -------------------------------------------------------------------------------------------------------
def write_atomic(folder: str, name: str, text: str) -> None:
    """``folder/name`` holding ``text``, written under ``.name.tmp`` and renamed into place (OSError passes)."""
    tmp = os.path.join(folder, ".%s.%s.tmp" % (name, os.urandom(6).hex()))
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(folder, name))


def read_json(path: str):
    try:
        with open(path) as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None


def request_name(seq: int) -> str:
    return "request-%d.json" % seq


def answer_name(seq: int) -> str:
    return "window-%d.json" % seq


def write_loaded(folder: str, info: dict) -> None:
    write_atomic(folder, LOADED, json.dumps(dict(info, protocol=PROTOCOL)))


def requests(folder: str) -> list:
    """The request numbers in ``folder``, sorted."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for n in names:
        if n.startswith("request-") and n.endswith(".json"):
            try:
                out.append(int(n[8:-5]))
            except ValueError:
                pass
    return sorted(out)


def read_request(folder: str, seq: int):
    """Request ``seq`` (a :class:`Request`), or None (not there, or not a request)."""
    try:
        with open(os.path.join(folder, request_name(seq))) as f:
            return Request.parse(f.read())
    except (OSError, ValueError, TypeError):
        return None


def read_answer(folder: str, seq: int):
    return read_json(os.path.join(folder, answer_name(seq)))


def ask(folder: str, request: Request):
    """Ask the process whose folder this is for a window: ``(seq, joined)``. Where a request is still unanswered
    (another gputop's), it is joined (``joined`` True: its answer is this one's too) rather than queued. OSError
    passes (the folder is gone: the process ended)."""
    for _ in range(20):
        seqs = requests(folder)
        if seqs and not os.path.exists(os.path.join(folder, answer_name(seqs[-1]))):
            return seqs[-1], True
        seq = (seqs[-1] if seqs else 0) + 1
        tmp = os.path.join(folder, ".request-%d.%s.tmp" % (seq, os.urandom(6).hex()))
        with open(tmp, "w") as f:
            f.write(request.text())
        try:
            os.link(tmp, os.path.join(folder, request_name(seq)))  # fails where another gputop claimed seq first
            return seq, False
        except FileExistsError:
            continue
        finally:
            os.unlink(tmp)
    raise OSError("could not claim a request in %s" % folder)


def write_answer(folder: str, seq: int, pid: int, asked_at: float, doc: dict) -> None:
    """``doc`` (the window, or :func:`unavailable`) as the answer to request ``seq``, read at ``asked_at``; ``doc``
    gets ``seq``, ``pid``, ``asked_at`` and ``protocol``. Requests and answers older than :data:`KEEP` go."""
    doc.update(seq=seq, pid=pid, asked_at=asked_at, protocol=PROTOCOL)
    write_atomic(folder, answer_name(seq), json.dumps(doc))
    for old in requests(folder):
        if old <= seq - KEEP:
            for name in (request_name(old), answer_name(old)):
                try:
                    os.remove(os.path.join(folder, name))
                except OSError:
                    pass


def stale(folder: str, older_than_s: float = 600.0) -> bool:
    """Whether ``folder`` (BASE/PID) belongs to no running process and was last written over ``older_than_s``
    ago (its answers then read by whoever asked)."""
    loaded = read_json(os.path.join(folder, LOADED))
    try:
        pid = int(os.path.basename(folder))
        age = time.time() - os.stat(folder).st_mtime
    except (OSError, ValueError):
        return False
    running = process_start(pid)
    alive = running is not None and (loaded is None or loaded.get("start") in (None, running))
    return not alive and age > older_than_s
