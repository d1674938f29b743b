"""The files ``gputop --run --profile -- CMD`` and its loader talk through: their names, the environment that
names the folder, what a request and an answer hold, and how each is written.

Stdlib only, and nothing of gputop: gputop's side (``gputop/session/profiling.py``) imports it as
``gputop.runner.profile_loader.protocol``; the loader (``sitecustomize.py`` in the command's Python processes, where
gputop itself may not be importable) loads it by its path.

The folder is gputop's own (``tempfile.mkdtemp``: mode 0700), named to the command by ``DIR_ENV``. Each file is
written whole under a hidden name (``.NAME.tmp``) and renamed into place (:func:`write_atomic`): the other side sees
it complete or not at all.

``loaded-PID``         each process that loads the loader, at its start: ``{"pid": PID}`` (:func:`write_loaded`).
``request-N``          gputop asks for window N (1, 2, ...; one at a time: N+1 once N is answered), one line
                       ``SECONDS MAX_STEPS START_AT`` (:class:`Request`, :func:`write_request`, :func:`read_request`).
``window-N-PID.json``  each process that carries the loader answers request N once (:func:`write_answer`): the
                       window's summary (``status`` "ok") or one line why not (``status`` "unavailable",
                       ``reason``); :data:`ANSWER_FIELDS` names every field. A program that ends with a request
                       pending answers at its exit.
"""

import glob
import json
import os
from typing import NamedTuple

DIR_ENV = "GPUTOP_PROFILE_DIR"  # the folder, in the command's environment
KEEP_TRACE_ENV = "GPUTOP_PROFILE_KEEP_TRACE"  # a folder: each window's chrome trace is kept there (validation)
OK, UNAVAILABLE = "ok", "unavailable"


class Request(NamedTuple):
    """What gputop asks of each process: a window that ends after ``seconds`` or ``max_steps`` steps (0: seconds
    only) and starts at the program's first module call or step after ``start_at`` (Unix time: a job's processes,
    asked at once, start at the same step)."""

    seconds: float = 3.0
    max_steps: int = 0
    start_at: float = 0.0

    def text(self) -> str:
        return "%g %d %.3f" % (self.seconds, self.max_steps, self.start_at)

    @classmethod
    def parse(cls, text: str) -> "Request":
        """The request's words (missing ones take the defaults; ValueError if one is not a number)."""
        words = text.split()
        return cls(float(words[0]) if words else cls._field_defaults["seconds"],
                   int(words[1]) if len(words) > 1 else cls._field_defaults["max_steps"],
                   float(words[2]) if len(words) > 2 else cls._field_defaults["start_at"])


# Every field of an answer (``window-N-PID.json``), each with what it holds.
ANSWER_FIELDS = {
    "status": '"ok": the window was recorded; "unavailable": it was not (``reason``)',
    "reason": "with status unavailable: why, one line",
    "seq": "the request answered (N)",
    "pid": "the answering process",
    "asked_at": "when the process read the request (Unix time)",
    "profiler": '"torch" (torch.profiler; the default where absent) or "cupti" (a CUDA program without torch)',
    "torch": "torch's version (None under CUPTI)",
    "cuda": "whether the program had initialised CUDA (no kernels otherwise)",
    "started_at": "the window's start (Unix time, the program's clock)",
    "wall_s": "the window's length, seconds",
    "stop_s": "how long the profiler's stop held the program's thread, seconds",
    "summary_s": "how long the loader's thread took to sum the events up (the program runs on meanwhile)",
    "summed_from": '"raw events" or "key_averages"',
    "gpu_busy_s": "the union of the kernels' times on the GPU in the window, seconds (None without CUDA)",
    "host_wall_s": "CUPTI: the window on the host's clock, seconds",
    "gpu_lag_s": "CUPTI: how far the GPU ran behind the host at the window's end, seconds",
    "steps": "the steps the window held (optimizer steps; forward passes in inference)",
    "step_kind": '"optimizer step" or "forward pass"',
    "ended_by": "why the window ended before its seconds or steps (the program's own profiler), or None",
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


def write_atomic(folder: str, name: str, text: str) -> None:
    """``folder/name`` holding ``text``, written under ``.name.tmp`` and renamed into place (OSError passes)."""
    tmp = os.path.join(folder, "." + name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(folder, name))


def loaded_name(pid: int) -> str:
    return "loaded-%d" % pid


def request_name(seq: int) -> str:
    return "request-%d" % seq


def answer_name(seq: int, pid: int) -> str:
    return "window-%d-%d.json" % (seq, pid)


def write_loaded(folder: str, pid: int) -> None:
    write_atomic(folder, loaded_name(pid), json.dumps({"pid": pid}))


def any_loaded(folder: str) -> bool:
    """Whether a process of the command has loaded the loader."""
    return bool(glob.glob(os.path.join(folder, "loaded-*")))


def write_request(folder: str, seq: int, request: Request) -> None:
    write_atomic(folder, request_name(seq), request.text())


def read_request(folder: str, seq: int):
    """Request ``seq`` (a :class:`Request`), or None before gputop asks (or if it cannot be read)."""
    try:
        with open(os.path.join(folder, request_name(seq))) as f:
            return Request.parse(f.read())
    except (OSError, ValueError):
        return None


def write_answer(folder: str, seq: int, pid: int, asked_at: float, doc: dict) -> None:
    """``doc`` (the window, or :func:`unavailable`) as process ``pid``'s answer to request ``seq``, read at
    ``asked_at``; ``doc`` gets ``seq``, ``pid`` and ``asked_at``."""
    doc.update(seq=seq, pid=pid, asked_at=asked_at)
    write_atomic(folder, answer_name(seq, pid), json.dumps(doc))


def answer_paths(folder: str, seq: int) -> list:
    """The answers to request ``seq`` written so far, sorted."""
    return sorted(glob.glob(os.path.join(folder, "window-%d-*.json" % seq)))


def read_answers(folder: str, seq: int) -> list:
    """The answers to request ``seq`` (those that cannot be read left out)."""
    answers = []
    for path in answer_paths(folder, seq):
        try:
            with open(path) as f:
                answers.append(json.load(f))
        except (OSError, ValueError):
            continue
    return answers
