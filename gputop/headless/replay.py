"""``gputop --replay FILE --json``: the run document of a recorded trace, diagnosed anywhere.

A trace recorded on a node (``gputop --record FILE --run -- CMD``) holds every GPU's ticks and the run's marks:
``started`` when gputop started the command (the trace's clock: seconds since then), ``on GPU n (how)`` when the
command first showed up on GPU n, ``exited N`` when it ended. The replay plays the ticks through the same
:class:`gputop.session.monitor.Monitor` a live ``--run`` uses, its GPUs found from those marks instead of live
process lists (the trace's pids belong to the machine it was recorded on), so the document is the one ``--run``
would have printed there: per-GPU timelines and verdicts, the job's GPUs judged together (comms, stalled
collectives, stragglers), the run's verdict. A trace without marks (a plain ``--record``): every GPU that did
any work is the job's, from the start of the trace.

Schema: ``gputop/schema/monitor.schema.json`` with ``mode`` "replay". (``gputop.evaluate.labelled.diagnose_trace``,
the labelled single-GPU traces' diagnosis for the calibration, finds the GPUs by the watched pid instead: a
torchrun job's ranks are other pids, so the marks are the job's record here.)
"""

from __future__ import annotations

import re

from gputop import exitcodes
from gputop.analysis.evidence import is_busy
from gputop.session.monitor import OOM_MARK, Monitor
from gputop.session.profiling import spans_from_marks
from gputop.session.report import build_document, render_text

ON_GPU = re.compile(r"^on GPU (\d+) \((.+)\)$")
EXITED = re.compile(r"^exited (-?\d+)$")


class MarksFinder:
    """The GPUs a recorded command used, from its trace's marks (what :class:`gputop.session.finder.GpuFinder`
    found live): ``result()`` is ({position: first seen t}, how)."""

    def __init__(self, marks: list[tuple[float, str]], static: list[dict], ticks: list[dict]):
        pos_of = {s.get("index", i): i for i, s in enumerate(static)}
        self.first: dict[int, float] = {}
        hows, listed = [], set()
        for t, label in marks:
            m = ON_GPU.match(label)
            if m and int(m.group(1)) in pos_of:
                self.first.setdefault(pos_of[int(m.group(1))], t)
                hows.append(m.group(2))
                if m.group(2) == "process list":
                    listed.add(pos_of[int(m.group(1))])
        self.how = ("process list" if "process list" in hows else hows[0]) if hows else "none"
        if listed:  # as the live finder: once the process list names the command's GPUs, a rise elsewhere (a
            # neighbour's job starting at the same moment) was not the command's
            self.first = {pos: t for pos, t in self.first.items() if pos in listed}
        if not self.first:  # no marks: the GPUs that did any work, from the start
            for pos in range(len(static)):
                if any(pos < len(tk["gpus"]) and is_busy(tk["gpus"][pos]) for tk in ticks):
                    self.first[pos] = ticks[0]["t"]
            self.how = "memory/activity rise" if self.first else "none"

    def __call__(self, tick: dict) -> None:  # a sampler listener, as GpuFinder: nothing to do on a replay
        pass

    def result(self) -> tuple[dict[int, float], str]:
        return dict(self.first), self.how


def replay_monitor(path: str) -> Monitor:
    """A Monitor that has played the whole trace at ``path`` (its ticks, its GPUs and start from the marks)."""
    from gputop.telemetry.trace import ReplaySource

    src = ReplaySource(path, speed=float("inf"))
    mon = Monitor(src)
    found = MarksFinder(src.marks, mon.static, src.ticks)
    mon.sampler.listeners = [found if fn is mon.finder else fn for fn in mon.sampler.listeners]
    mon.finder = found
    started = [t for t, label in src.marks if label == "started"]
    while not src.finished:
        mon.sampler.step()
    mon.t0 = started[0] if started else (src.ticks[0]["t"] if src.ticks else 0.0)
    mon.oom_times = [t for t, label in src.marks if label == OOM_MARK]
    pids = {k for t in src.ticks for k in ((t.get("host") or {}).get("procs") or {})}  # the command gputop watched
    mon.pid = int(next(iter(pids))) if len(pids) == 1 else None
    return mon


def replay_document(path: str) -> dict:
    """The run document of the trace at ``path`` (``--run``'s, with ``mode`` "replay")."""
    mon = replay_monitor(path)
    src = mon.source
    code = next((int(m.group(1)) for _, label in src.marks if (m := EXITED.match(label))), None)
    ticks = src.ticks
    wall = (ticks[-1]["t"] - mon.t0) if ticks else None
    # status: the command's, where the trace recorded its exit; a plain --record trace (no command): "ok", replayed
    facts = {"status": "error" if code else "ok", "pid": mon.pid,
             "exit_code": code, "command_exit_code": code,
             "ended": ("trace ended" if code is None else f"signal {code - 128}" if code > 128 else "exited"),
             "wall_s": round(wall, 3) if wall is not None else None, "signal": None, "errors": []}
    doc = build_document("replay", mon, facts, None, src.header.get("recorded_at"),
                         exclude=spans_from_marks(src.marks))  # where --profile's windows held the program
    doc["source"]["truncated"] = src.truncated  # why the file ends early (cut off while written), or None
    doc["host"] = {"hostname": src.header.get("hostname")}
    doc["recorded"] = {"note": src.header.get("note"), "rate_hz": src.header.get("rate_hz"),
                       "marks": [{"t": t, "label": label} for t, label in src.marks]}
    mon.close()
    return doc


def main_replay_json(path: str, *, json_mode: bool = True, output: str | None = None) -> int:
    """``gputop --replay FILE --json``: the run document of the trace at ``path`` (without ``json_mode``: the same
    diagnosis as text). A trace that cannot be read: one line, exit 2, and (``json_mode``) the monitor error
    document; a trace cut off while it was written: replayed up to its last complete line, said on stderr and in
    the document's ``source.truncated``."""
    from gputop.documents import emit, monitor_error_document
    from gputop.telemetry.trace import TraceError

    try:
        doc = replay_document(path)
    except TraceError as exc:
        message = f"cannot replay {exc}"
        exitcodes.say(message)
        if json_mode:
            err = monitor_error_document("replay", "bad_trace", message, exitcodes.USAGE)
            err["source"] = {"kind": "replay", "path": path}
            emit(err, json_mode=True)
        return exitcodes.USAGE
    if doc["source"]["truncated"]:
        exitcodes.say(f"{doc['source']['path']}: {doc['source']['truncated']}; replayed up to its last complete line")
    ok = emit(doc, json_mode=json_mode, output=output, render_text=render_text)
    return exitcodes.OK if ok else exitcodes.FAILED
