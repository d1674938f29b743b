"""Profiler windows of a command gputop runs (``--run --profile -- CMD``) or a process it watches (``--watch PID
--profile``): whom to ask, when, and what came back.

gputop gives the command's Python processes a loader (:mod:`gputop.runner.profile_loader`: a folder first on their
PYTHONPATH whose ``sitecustomize`` starts an agent on a daemon thread); a watched process has it where it was started
prepared (``gputop --profile-env``) or, on Python 3.14+, gets it then (:mod:`gputop.session.profile_target`). Each
process's loader has a folder of its own, found by its pid; a window is asked by writing a request there.

Whom (:mod:`gputop.session.profile_whom`): the processes that hold a GPU (NVML's process list, in the monitor's
ticks), whatever launched them (torchrun, mp.spawn, a Pool, a shell script...); where NVML lists none of them (before
the first kernel, another PID namespace, a CPU machine) those in which torch initialised CUDA, else those that have
imported torch or a CUDA library and launched none of the others. A process that holds no GPU and imported none
(multiprocessing's resource tracker, a launcher) is never asked. When it is time to ask and no process holds a GPU
or has initialised CUDA, gputop waits ``HOLD_S`` for one, ``CUDA_WAIT_S`` where the node has GPUs and the command
has imported torch (it is starting up); and a job's ranks not all on their GPUs yet are waited for ``HOLD_S``. The
processes asked together are given one start time ``START_LEAD_S`` ahead: a job's ranks start their windows at the
same step.

When (:meth:`ProfileWindows.poll`, from the session's loop):

* by default, once the live verdict (:class:`gputop.analysis.live.LiveVerdict` over the monitor's ticks on the GPU
  the command was found on) has held one class for ``HOLD_S``, and again each time another class has held that
  long, at most ``MAX_WINDOWS`` windows, one at a time; a watched process also at once (``first_at`` 0);
* ``first_at`` (``GPUTOP_PROFILE_AT`` seconds after the start, for tests and machines without a verdict): the first
  window at that time, whatever the verdict;
* whenever a frontend asks (:meth:`ProfileWindows.ask_now`: the TUI's key, an HTTP POST).

A command that is not Python never answers: :meth:`ProfileWindows.result` says so in one line.
"""

from __future__ import annotations

import os
import re
import secrets
import time

from gputop.analysis import thresholds as T
from gputop.analysis.attribution import attribute, job_categories
from gputop.analysis.live import LiveVerdict
from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import protocol as P
from gputop.session import profile_target as PT
from gputop.session.profile_whom import choose, gpu_pids, late_mates

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
# Their windows still begin some milliseconds apart (the profiler's own start), and the first to begin counts the
# wait in its next collective: a job's window that ends at its steps lasts at least this long, so the skew stays a
# few percent of it (accelerate's DDP on 2 H200s: ranks 11 ms apart in a 10-step window of 0.05 s, whose
# communication share read 54% against the program's own profile's 39%; tensor parallel on 4 H100s, 2026-11-27:
# 136 ms apart in a 0.5 s window, 8.3 pt, 0 ms apart 1.5 pt). Longer costs the program more: a window's stop holds
# it ~0.25 s at 0.5 s of DDP steps (bench/experiments/profiler_stop_cost.py: 2.8 s at 3 s of GPT-2's)
JOB_MIN_SECONDS = 1.5
HOLD_S = 5.0  # a live class held this long (a confirmed regime, not a blip) is worth a window
MAX_WINDOWS = 4
AT_ENV = "GPUTOP_PROFILE_AT"  # seconds after the start: the first window then (tests)
CHECK_EVERY_S = 1.0
NO_LOADER = ("--profile attributes Python programs only, and the command is not a Python program (or it runs "
             "python -S / -I, which skip gputop's loader): no profiler window")
NO_ANSWER = "the command ended before its loader answered"
NO_TARGET = ("no process to ask yet: none of the command's Python processes holds a GPU or has imported torch or a "
             "CUDA library")
# On a node with GPUs, a program that has imported torch and holds none yet is starting (building its model, its
# launcher's ranks importing): a window then records its start-up, not its GPU work (on 2 H100s, 2026-11-27, GPT-2
# decoding and accelerate's ranks made their CUDA contexts 17 s after their start; windows asked at 11 s recorded
# no kernel, one of them of accelerate's launcher). Asked from then only once this long has passed.
CUDA_WAIT_S = 30.0
NO_CUDA_YET = ("no process to ask yet: the command's Python processes have imported torch but none holds a GPU or "
               "has initialised CUDA")
MATES_LATE = "waiting for the job's other ranks to hold a GPU (pid %s)"


def first_at_from_env() -> float | None:
    try:
        v = float(os.environ.get(AT_ENV, ""))
    except ValueError:
        return None
    return v if v >= 0 else None


def watchable(pid: int) -> str | None:
    """None where process ``pid`` or one of its descendants carries gputop's loader (on Python 3.14+ the loader is
    installed into ``pid`` if none does); else one line: why not, and how to prepare it."""
    t, why = PT.find(pid)
    if t is not None:
        return None
    if any(PT.find(p, attach_ok=False)[0] is not None for p in ProfileWindows._tree(pid)[1:]):
        return None  # a launcher (torchrun, a shell script) whose Python processes carry it
    return why


def profile_env_line(environ: dict | None = None) -> str:
    """The shell line that prepares the processes a shell or job script starts (``gputop --profile-env``): gputop's
    loader first on their PYTHONPATH (and the folder this gputop finds them in, where it is not the default)."""
    env = os.environ if environ is None else environ

    def dq(text: str) -> str:
        return re.sub(r'(["\\$`])', r"\\\1", text)
    words = [f'PYTHONPATH="{dq(LOADER_DIR)}${{PYTHONPATH:+:$PYTHONPATH}}"', 'KINETO_LOG_LEVEL="${KINETO_LOG_LEVEL:-6}"']
    if env.get(P.BASE_ENV):
        words.append(f'{P.BASE_ENV}="{dq(env[P.BASE_ENV])}"')
    return "export " + " ".join(words)


def window_request(seconds: float, max_steps: int, processes: int) -> P.Request:
    """The request for a window of ``processes`` processes asked at once (a job's ranks: START_LEAD_S,
    JOB_MIN_SECONDS)."""
    return P.Request(seconds, max_steps, time.time() + START_LEAD_S, os.getpid(),
                     min_seconds=JOB_MIN_SECONDS if processes > 1 else 0.0)


class ProfileWindows:
    """The windows of one command (``env(base)`` is its environment with the loader in it) or of a watched process
    tree (``watch``: its pid)."""

    def __init__(self, seconds: float | None = None, first_at: float | None = None, max_steps: int | None = None,
                 watch: int | None = None):
        self.seconds = DEFAULT_SECONDS if seconds is None else float(seconds)
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)  # 0: seconds only
        self.watch = watch
        default_first = 0.0 if watch is not None else None  # a running job: a window at once
        self.first_at = first_at if first_at is not None else (first_at_from_env() if first_at_from_env() is not None
                                                               else default_first)
        self.token = f"{os.getpid()}-{secrets.token_hex(4)}"  # the run its command's loaders say they belong to
        self.asked: list[dict] = []  # {"seq", "reason", "t", "asked": PT.Asked | None, "why": line | None}
        self.live = LiveVerdict()
        self.holders: set[int] = set()  # the GPU holders in the latest ticks seen
        self.seen: dict[int, PT.Target] = {}  # every loader of the command (or the watched tree) seen
        self._held_class: str | None = None
        self._asked_classes: list[str] = []
        self._next_check = 0.0
        self._latest: tuple | None = None  # (the answers read, the window): latest()'s cache
        self.why_not_asked: str | None = None  # it was time to ask, and no process could be (one line)
        self._fallback_at: float | None = None  # no GPU holder when it was time: those with torch asked from then
        self._mates_at: float | None = None  # a job's ranks not all on their GPUs when it was time: asked from then
        self.node_gpus = 0  # the GPUs the node has (the monitor's): a program with torch and none held is starting
        self.closed = False

    def env(self, base: dict) -> dict:
        out = dict(base)
        out["PYTHONPATH"] = os.pathsep.join([LOADER_DIR] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else []))
        out[P.RUN_ENV] = self.token
        out.setdefault("KINETO_LOG_LEVEL", "6")  # torch's profiler prints a line at each start and stop below it
        return out

    # -- whom -------------------------------------------------------------------------------------------------------
    def targets(self) -> list[PT.Target]:
        """The loaders of the command's processes (or of the watched process and its descendants) now."""
        if self.watch is None:
            found = PT.of_run(self.token)
        else:
            found = []
            for pid in self._tree(self.watch):
                t, _why = PT.find(pid, attach_ok=False)
                if t is not None:
                    found.append(t)
        found = [t for t in found if t.alive()]
        self.seen.update({t.pid: t for t in found})
        return found

    @staticmethod
    def _tree(pid: int) -> list[int]:
        try:
            import psutil

            return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except Exception:
            return [pid]

    def _loaded(self) -> bool:
        return bool(self.seen) or bool(self.targets())

    # -- when -------------------------------------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        """A window asked for and not answered yet."""
        last = self.asked[-1] if self.asked else None
        return last is not None and last["asked"] is not None and not last["asked"].done

    def ask(self, reason: str, t: float, pids: set[int] | None = None, wait: bool = False) -> str | None:
        """Ask the chosen processes (``pids``: these, where they carry the loader) for a window; None, or one line
        why no process was asked. ``wait``: where none of them holds a GPU yet, wait up to ``HOLD_S`` for one to
        (a job's ranks start after its launcher) before asking those that imported torch or a CUDA library."""
        found = self.targets()
        if pids is None and wait and not any(x.pid in self.holders or x.cuda for x in found):
            torch = self.node_gpus > 0 and any("torch" in x.frameworks for x in found)
            self._fallback_at = t + (CUDA_WAIT_S if torch else HOLD_S) if self._fallback_at is None \
                else self._fallback_at
            if t < self._fallback_at:
                return NO_CUDA_YET if torch else NO_TARGET
        chosen = [x for x in found if x.pid in pids] if pids is not None else choose(found, self.holders)
        if not chosen:
            return NO_TARGET if pids is None else "none of pids %s carries gputop's profile loader" % sorted(pids)
        late = late_mates(chosen, found) if pids is None and wait and (
            any(x.pid in self.holders or x.cuda for x in chosen)) else []
        if late:
            self._mates_at = t + HOLD_S if self._mates_at is None else self._mates_at
            if t < self._mates_at:
                return MATES_LATE % ", ".join(str(p) for p in late)
        request = window_request(self.seconds, self.max_steps, len(chosen))
        self.asked.append({"seq": len(self.asked) + 1, "reason": reason, "t": t, "asked": PT.Asked(chosen, request)})
        return None

    def ask_now(self, t_since_start: float, pids: set[int] | None = None) -> str:
        """The user asks for a window (the TUI's key, an HTTP POST): asked unless one is pending; what happened, one
        line."""
        if not self._loaded():
            return "no profiler window: no process of the command carries gputop's loader (not Python, or not yet)"
        if self.pending:
            return f"window {self.asked[-1]['seq']} is still being recorded"
        why = self.ask("asked for by the user", t_since_start, pids)
        if why:
            return f"no profiler window: {why}"
        last = self.asked[-1]
        shown = ", ".join(str(p) for p in sorted(last["asked"].seqs))
        joined = " (joined another gputop's)" if last["asked"].joined else ""
        return f"asked for window {last['seq']} ({self.seconds:g} s) of pid {shown}{joined}"

    def poll(self, t_since_start: float, monitor) -> None:
        """Ask for a window when it is time (looks at most once a CHECK_EVERY_S)."""
        if t_since_start < self._next_check:
            return
        self._next_check = t_since_start + CHECK_EVERY_S
        ticks = monitor.sampler.window(T.LIVE_MAX_S)
        self.holders = gpu_pids(ticks[-20:])
        self.node_gpus = len(monitor.static)
        first, _how = monitor.finder.result()
        pos = min(first, key=first.get) if first else None
        window = ticks if pos is not None else []
        self.consider(t_since_start, window, *((monitor.static[pos], monitor.peaks[pos], pos, monitor.pid)
                                               if pos is not None else (None, None, None, None)))

    def consider(self, t_since_start: float, window: list[dict], static, peaks, pos, pid) -> None:
        """The decision of :meth:`poll`, on the last ``LIVE_MAX_S`` of ticks of the command's first GPU
        (``pos`` None: not on a GPU yet)."""
        if len(self.asked) >= MAX_WINDOWS or self.pending:
            return
        if not self.asked and self.first_at is not None:
            if t_since_start >= self.first_at:
                self.why_not_asked = self.ask(f"{AT_ENV}={self.first_at:g}" if self.watch is None
                                              else "asked at the watch's start", t_since_start,
                                              wait=self.watch is None)
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
        why = "the live verdict held" if not self._asked_classes else "the live verdict changed to"
        self.why_not_asked = self.ask(f"{why} {cls} for {HOLD_S:g} s", t_since_start, wait=self.watch is None)
        if self.why_not_asked is None:
            self._asked_classes.append(cls)

    # -- what came back ---------------------------------------------------------------------------------------------
    def _answers(self, a: dict) -> list[dict]:
        return [] if a["asked"] is None else list(a["asked"].answers().values())

    def latest(self) -> dict | None:
        """The newest window answered (analysed as in :meth:`result`), with ``ended_at`` (epoch seconds: when it
        was read); None before the first answer. For the TUI's panel and ``--export``, from any thread: analysed
        once per new answer."""
        for a in reversed(list(self.asked)):
            answers = self._answers(a)
            if not answers:
                continue
            key = (a["seq"], len(answers))
            if self._latest is None or self._latest[0] != key:
                win = window_from_answers(a, answers, True)
                self._latest = (key, {**win, "ended_at": time.time()})
            return self._latest[1]
        return None

    def result(self) -> dict:
        """The ``attribution`` part of the document: each window asked for, analysed (see analysis.attribution)."""
        loaded = self._loaded()
        windows = [window_from_answers(a, self._answers(a), loaded) for a in self.asked]
        why = None
        if not loaded:
            why = NO_LOADER  # no Python process of the command loaded it, whether a window was asked for or not
        elif not self.asked:
            why = self.why_not_asked or "no window was asked for (the live verdict never held a busy class long enough)"
        elif all(w["status"] == "unavailable" for w in windows):
            why = windows[0]["why_none"]
        return {"seconds": self.seconds, "max_steps": self.max_steps, "windows": windows, "why_none": why}

    def close(self) -> None:
        """The folders of the command's processes that have ended go (a watched process keeps its own)."""
        self.closed = True
        if self.watch is None:
            PT.remove_ended(list(self.seen.values()) + PT.of_run(self.token))


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
           "profiler": best.get("profiler", "torch"), "torch": best.get("torch"), **attribute(best),
           **_how(best)}
    if len(ok) > 1:  # a job's ranks: each GPU's verdict takes its own rank's window (attribution.window_for_gpu)
        ranks = sorted(ok, key=lambda a: a.get("pid") or 0)
        out["per_process"] = [{"pid": a.get("pid"), **attribute(a), **_how(a)} for a in ranks]
        out["job_categories"] = job_categories(out["per_process"])
    return out


def _how(answer: dict) -> dict:
    """How a window was taken: started at a step or on time, whose host ops it holds, and when the process read the
    request (Unix time: the request's lead, then the wait for a step, to ``started_at``)."""
    return {"started_by": answer.get("started_by"), "ops_threads": answer.get("ops_threads"),
            "request_read_at": answer.get("asked_at")}
