"""Profiler windows of a command gputop runs (``--run --profile -- CMD``): when to ask, and what came back.

gputop gives the command's Python processes a loader (:mod:`gputop.runner.profile_loader`: a folder first on
their PYTHONPATH whose ``sitecustomize`` waits on a daemon thread) and a private folder of its own
(``GPUTOP_PROFILE_DIR``). It asks for a window by writing ``request-N`` there; each process that carries the
loader answers ``window-N-PID.json`` (the files and their fields: :mod:`gputop.runner.profile_loader.protocol`).

When to ask (:meth:`ProfileWindows.poll`, from the session's loop):

* by default, once the live verdict (:class:`gputop.analysis.live.LiveVerdict` over the monitor's ticks on
  the GPU the command was found on) has held one class for ``HOLD_S``, and again each time another class
  has held that long, at most ``MAX_WINDOWS`` windows, one at a time;
* ``first_at`` (``GPUTOP_PROFILE_AT`` seconds after the start, for tests and machines without a verdict):
  the first window at that time, whatever the verdict.

A command that is not Python never answers: :meth:`ProfileWindows.result` says so in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time

from gputop.analysis import thresholds as T
from gputop.analysis.attribution import attribute, job_categories
from gputop.analysis.live import LiveVerdict
from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import protocol as P

DEFAULT_SECONDS = 3.0
# A window also ends after this many steps (optimizer steps; in inference, forward passes): a profile's cost to the
# program (the profiler's stop and the summary, on the program's own process) grows with its events; a few steps show
# the kernel mix as well as many (torch.profiler's schedule records 1-5 "active" steps). GPT-2 training on an H100
# (bench/experiments/profiler_stop_cost.py): 3 s = 48 steps, 474k events, the stop held the program 2.8 s; 5 steps
# 49k events, 0.22 s.
DEFAULT_MAX_STEPS = 10
# A window starts this long after it is asked for, at every process's first module call or step after that: each
# loader has read the request by then (it looks every 0.2 s), so a job's ranks profile the same steps (a rank
# profiled alone is slowed by its profiler, and the others wait for it in their collectives: DDP's ranks on 2 H100s
# read NCCL 57% and 84% of their windows' kernel time, started apart)
START_LEAD_S = 0.5
HOLD_S = 5.0  # a live class held this long (a confirmed regime, not a blip) is worth a window
MAX_WINDOWS = 4
AT_ENV = "GPUTOP_PROFILE_AT"  # seconds after the start: the first window then (tests)
CHECK_EVERY_S = 1.0
NO_LOADER = ("--profile attributes Python programs only, and the command is not a Python program (or it runs "
             "python -S / -I, which skip gputop's loader): no profiler window")
NO_ANSWER = "the command ended before its loader answered"


def first_at_from_env() -> float | None:
    try:
        v = float(os.environ.get(AT_ENV, ""))
    except ValueError:
        return None
    return v if v >= 0 else None


class ProfileWindows:
    """The windows of one command; ``env(base)`` is the command's environment with the loader in it."""

    def __init__(self, seconds: float | None = None, first_at: float | None = None, max_steps: int | None = None):
        self.seconds = DEFAULT_SECONDS if seconds is None else float(seconds)
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)  # 0: seconds only
        self.first_at = first_at_from_env() if first_at is None else first_at
        self.folder = tempfile.mkdtemp(prefix="gputop-profile-")  # 0700: ours alone
        self.asked: list[dict] = []  # {"seq", "reason", "t"}
        self.live = LiveVerdict()
        self._held_class: str | None = None
        self._asked_classes: list[str] = []
        self._next_check = 0.0
        self._latest: tuple | None = None  # (the answer files read, the window): latest()'s cache

    def env(self, base: dict) -> dict:
        out = dict(base)
        out["PYTHONPATH"] = os.pathsep.join([LOADER_DIR] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
        out[P.DIR_ENV] = self.folder
        out.setdefault("KINETO_LOG_LEVEL", "6")  # torch's profiler prints a line at each start and stop below it
        # (CUPTI's teardown after a window: the loader asks for it around its own stop only, see its _tearing_down)
        return out

    @property
    def pending(self) -> bool:
        """A window asked for and not answered yet."""
        return bool(self.asked) and not P.answer_paths(self.folder, self.asked[-1]["seq"])

    def ask(self, reason: str, t: float) -> None:
        seq = len(self.asked) + 1
        P.write_request(self.folder, seq, P.Request(self.seconds, self.max_steps, time.time() + START_LEAD_S))
        self.asked.append({"seq": seq, "reason": reason, "t": t})

    def ask_now(self, t_since_start: float) -> str:
        """The user asks for a window (the TUI's key): asked unless one is pending; what happened, one line."""
        if not self._loaded():
            return "no profiler window: no process of the command carries gputop's loader (not Python, or not yet)"
        if self.pending:
            return f"window {self.asked[-1]['seq']} is still being recorded"
        self.ask("asked for by the user", t_since_start)
        return f"asked for window {self.asked[-1]['seq']} ({self.seconds:g} s)"

    def poll(self, t_since_start: float, monitor) -> None:
        """Ask for a window when it is time (looks at most once a CHECK_EVERY_S)."""
        if t_since_start < self._next_check:
            return
        self._next_check = t_since_start + CHECK_EVERY_S
        first, _how = monitor.finder.result()
        pos = min(first, key=first.get) if first else None
        window = monitor.sampler.window(T.LIVE_MAX_S) if pos is not None else []
        self.consider(t_since_start, window, *((monitor.static[pos], monitor.peaks[pos], pos, monitor.pid)
                                               if pos is not None else (None, None, None, None)))

    def consider(self, t_since_start: float, window: list[dict], static, peaks, pos, pid) -> None:
        """The decision of :meth:`poll`, on the last ``LIVE_MAX_S`` of ticks of the command's first GPU
        (``pos`` None: not on a GPU yet)."""
        if len(self.asked) >= MAX_WINDOWS or self.pending:
            return
        if not self.asked and self.first_at is not None:
            if t_since_start >= self.first_at:
                self.ask(f"{AT_ENV}={self.first_at:g}", t_since_start)
            return
        if pos is None or not window:
            return
        v = self.live.update(window, static, peaks, pos, pid)
        if v is None or self.live.previous:
            return
        start = self.live.segment_start if self.live.segment_start is not None else window[0]["t"]
        cls = v.cls if window[-1]["t"] - start >= HOLD_S else None
        if cls is None or cls == "idle" or cls in self._asked_classes[-1:]:
            return
        self._asked_classes.append(cls)
        why = "the live verdict held" if len(self._asked_classes) == 1 else "the live verdict changed to"
        self.ask(f"{why} {cls} for {HOLD_S:g} s", t_since_start)

    def _answers(self, seq: int) -> list[dict]:
        return P.read_answers(self.folder, seq)

    def _loaded(self) -> bool:
        return P.any_loaded(self.folder)

    def latest(self) -> dict | None:
        """The newest window answered (analysed as in :meth:`result`), with ``ended_at`` (epoch seconds: when it
        was written); None before the first answer. For the TUI's panel and ``--export``, from any thread: the
        files are read once per new answer."""
        if not os.path.isdir(self.folder):  # closed: the last one read
            return self._latest[1] if self._latest else None
        for a in reversed(list(self.asked)):
            paths = P.answer_paths(self.folder, a["seq"])
            if not paths:
                continue
            key = (a["seq"], tuple(paths))
            if self._latest is None or self._latest[0] != key:
                try:
                    ended = max(os.path.getmtime(p) for p in paths)
                except OSError:
                    return self._latest[1] if self._latest else None
                win = window_from_answers(a, self._answers(a["seq"]), True)
                self._latest = (key, {**win, "ended_at": ended})
            return self._latest[1]
        return None

    def result(self) -> dict:
        """The ``attribution`` part of the document: each window asked for, analysed (see analysis.attribution)."""
        windows = [window_from_answers(a, self._answers(a["seq"]), self._loaded()) for a in self.asked]
        why = None
        if not self._loaded():
            why = NO_LOADER  # no Python process of the command loaded it, whether a window was asked for or not
        elif not self.asked:
            why = "no window was asked for (the live verdict never held a busy class long enough)"
        elif all(w["status"] == "unavailable" for w in windows):
            why = windows[0]["why_none"]
        return {"seconds": self.seconds, "max_steps": self.max_steps, "windows": windows, "why_none": why}

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


SETTLE_S = 1.0  # after a window's stop and summary, the program takes this long to be itself again
PROFILED_MARK = "profiler held the program for"  # a trace's mark at a held span's start: "... 5.2034 s"
_PROFILED = re.compile(re.escape(PROFILED_MARK) + r" ([0-9.]+) s$")


def spans_from_marks(marks: list[tuple[float, str]]) -> list[tuple[float, float]]:
    """The held spans a recorded trace's marks say (:data:`PROFILED_MARK`), in its clock."""
    return [(t, t + float(m.group(1))) for t, label in marks if t is not None and (m := _PROFILED.match(label))]


def held_spans(result: dict | None, unix_minus_monotonic: float) -> list[tuple[float, float]]:
    """The spans (monotonic clock, as the monitor's ticks) in which the windows of ``result`` held the program: from
    each window's start through its stop and the summary beside it, and ``SETTLE_S`` more."""
    spans = []
    for w in (result or {}).get("windows", []):
        if w.get("status") != "ok" or w.get("started_at") is None:
            continue
        a = w["started_at"] - unix_minus_monotonic
        spans.append((a, a + (w.get("wall_s") or 0.0) + (w.get("stop_s") or 0.0) + (w.get("summary_s") or 0.0)
                      + SETTLE_S))
    return spans


def window_from_answers(asked: dict, answers: list[dict], loaded: bool) -> dict:
    """One window: the answer with the most device time (then the most host time) of the command's processes."""
    base = {"seq": asked["seq"], "asked_because": asked["reason"], "asked_at_s": round(asked["t"], 3)}
    ok = [a for a in answers if a.get("status") == P.OK]
    if not ok:
        reason = answers[0].get("reason") if answers else (NO_ANSWER if loaded else NO_LOADER)
        return {**base, "status": "unavailable", "why_none": reason, "pid": answers[0].get("pid") if answers else None}

    def weight(a):
        return (sum(k["device_us"] for k in a["kernels"]), sum(o["self_cpu_us"] for o in a["ops"]))

    best = max(ok, key=weight)
    out = {**base, "status": "ok", "pid": best["pid"], "processes": len(answers),
           "profiler": best.get("profiler", "torch"), "torch": best.get("torch"), **attribute(best)}
    if len(ok) > 1:  # a job's ranks: each GPU's verdict takes its own rank's window (attribution.window_for_gpu)
        ranks = sorted(ok, key=lambda a: a.get("pid") or 0)
        out["per_process"] = [{"pid": a.get("pid"), **attribute(a)} for a in ranks]
        out["job_categories"] = job_categories(out["per_process"])
    return out

