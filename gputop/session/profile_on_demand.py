"""Profiler windows asked of any prepared process on the node, from the monitor: the TUI's key on the selected GPU's
process and ``--export``'s ``POST /profile`` (gputop/export/profile_post.py). The process is found by its pid
(:func:`gputop.session.profile_target.find`: its loader's folder, or on Python 3.14+ the loader attached; else one
line on how to prepare it) and asked with the other processes of its job that hold a GPU (its job as
gputop/telemetry/process_job.py reads it: :func:`gputop.session.profile_whom.job_of`), which start the window at the
same time.

:class:`OnDemand` keeps the windows asked this way: :meth:`~OnDemand.latest` (the newest answered, analysed as a run's
windows are: ``--export``'s ``gputop_attribution_*`` series) and :meth:`~OnDemand.news` (a window newly answered,
in one line: the TUI's notice). Thread-safe: the TUI's frame timer and the HTTP server's threads call it.
"""

from __future__ import annotations

import threading
import time

from gputop.session import profile_target as PT
from gputop.session.profile_whom import job_of
from gputop.session.profiling import DEFAULT_MAX_STEPS, DEFAULT_SECONDS, window_from_answers, window_request


class OnDemand:
    """The windows this monitor asked of running processes."""

    def __init__(self, seconds: float = DEFAULT_SECONDS, max_steps: int = DEFAULT_MAX_STEPS):
        self.seconds, self.max_steps = seconds, max_steps
        self.asked: list[dict] = []  # {"seq", "reason", "t", "asked": PT.Asked}
        self._told: set[int] = set()
        self._latest: tuple | None = None
        self._lock = threading.Lock()

    def ask(self, pid: int, holders: set[int] | None = None, seconds: float | None = None) -> tuple[bool, str]:
        """Ask process ``pid`` (and its job's other GPU holders, of ``holders``) for a window: (asked, one line)."""
        target, why = PT.find(pid)
        if target is None:
            return False, why
        with self._lock:
            for a in self.asked:
                if pid in a["asked"].targets and not a["asked"].done:
                    return False, f"window {a['seq']} of pid {pid} is still being recorded"
            targets = [target]
            for other in sorted(job_of(pid, holders or set()) - {pid}):
                t, _why = PT.find(other, attach_ok=False)
                if t is not None:
                    targets.append(t)
            secs = self.seconds if seconds is None else seconds
            request = window_request(secs, self.max_steps, len(targets))
            asked = PT.Asked(targets, request)
            self.asked.append({"seq": len(self.asked) + 1, "reason": f"asked for pid {pid} from the monitor",
                               "t": 0.0, "asked": asked})
            seq = len(self.asked)
        pids = ", ".join(str(t.pid) for t in targets)
        joined = " (joined another gputop's)" if asked.joined else ""
        return True, f"asked for profiler window {seq} ({secs:g} s) of pid {pids}{joined}"

    def latest(self) -> dict | None:
        """The newest window answered, analysed (``ended_at``: when it was read), or None."""
        with self._lock:
            for a in reversed(self.asked):
                answers = list(a["asked"].answers().values())
                if not answers:
                    continue
                key = (a["seq"], len(answers))
                if self._latest is None or self._latest[0] != key:
                    self._latest = (key, {**window_from_answers(a, answers, True), "ended_at": time.time()})
                return self._latest[1]
            return None

    def news(self) -> list[str]:
        """One line for each window answered since the last call (its finding, or why there is none)."""
        out = []
        with self._lock:
            fresh = [a for a in self.asked if a["seq"] not in self._told and a["asked"].done]
        for a in fresh:
            self._told.add(a["seq"])
            w = window_from_answers(a, list(a["asked"].answers().values()), True)
            if w["status"] != "ok":
                out.append(f"profiler window {a['seq']}: {w['why_none']}")
                continue
            finding = (w.get("finding") or {}).get("text") or w.get("headline") or "recorded"
            out.append(f"profiler window {a['seq']} (pid {w['pid']}): {finding}")
        return out
