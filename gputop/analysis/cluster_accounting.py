"""Each job's GPU-hours by class over a range, and what a fix would win back (pure; the queries are
``fleet/accounting.py``'s).

:class:`JobHours` holds one job's GPU-hours by (class, subclass) and its recoverable GPU-hours by class (the share
of its time a fix of each bottleneck would recover: ``analysis/cluster_winback.py``'s rules). :func:`account` sums
entries into jobs, the jobs ordered by what a fix would win back (then by their wasted GPU-hours).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.cluster import WAITING
from gputop.analysis.cluster_winback import ALL_OF_IT, METHOD, window_share


@dataclass
class JobHours:
    """One job's GPU-hours over the range, by (class, subclass); ``recoverable``: by class, the GPU-hours a fix
    would win back (``cluster_winback``)."""

    job: str | None  # None: GPUs no job held
    hours: dict[tuple[str, str | None], float] = field(default_factory=dict)
    recoverable: dict[str, float] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> float:
        return sum(self.hours.values())

    @property
    def wasted_gpu_hours(self) -> float:
        return sum(h for (c, _), h in self.hours.items() if c in WAITING)

    @property
    def win_back_gpu_hours(self) -> float:
        return sum(self.recoverable.values())

    @property
    def win_back_share(self) -> float:
        """The share of the job's GPU time a fix would recover (a speedup of 1 / (1 - share))."""
        return min(1.0, self.win_back_gpu_hours / self.gpu_hours) if self.gpu_hours else 0.0

    def shares(self) -> list[tuple[str, str | None, float, float]]:
        """(class, subclass, GPU-hours, share 0-1), the largest first."""
        total = self.gpu_hours or 1.0
        order = sorted(self.hours.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))
        return [(c, s, h, h / total) for (c, s), h in order]

    def class_hours(self, cls: str) -> float:
        return sum(h for (c, _), h in self.hours.items() if c == cls)

    def to_dict(self) -> dict:
        win = sorted(((c, h) for c, h in self.recoverable.items() if h > 0), key=lambda ch: -ch[1])
        return {"job": self.job, "gpu_hours": self.gpu_hours, "wasted_gpu_hours": self.wasted_gpu_hours,
                "win_back_gpu_hours": self.win_back_gpu_hours, "win_back_share": round(self.win_back_share, 4),
                "classes": [{"class": c, "subclass": s, "gpu_hours": h, "share": share}
                            for c, s, h, share in self.shares()],
                "win_back": [{"class": c, "gpu_hours": h, "of_class_gpu_hours": self.class_hours(c),
                              "method": METHOD[c]} for c, h in win]}


def account(entries, recovered=()) -> list[JobHours]:
    """``(job, class, subclass, GPU-hours)`` entries and ``(job, class, recoverable GPU-hours)`` ``recovered`` ->
    one :class:`JobHours` per job, the most a fix would win back first (then the most wasted, the most GPU-hours).
    Stalled, culprit and idle hours are won back whole; a working class's never, nor those of GPUs no job holds (their
    idle hours are the cluster's to place, not a job's to fix); where a job's recovered hours of a
    class exceed its hours of that class (the counts' steps and the recovered sums' steps round apart), they are
    its hours."""
    jobs: dict[str | None, JobHours] = {}
    for job, cls, sub, hours in entries:
        if hours <= 0:
            continue
        j = jobs.setdefault(job, JobHours(job))
        j.hours[(cls, sub or None)] = j.hours.get((cls, sub or None), 0.0) + hours
    for job, cls, hours in recovered:
        if hours > 0 and job in jobs and cls in METHOD and job is not None:  # (no job: no job's fix)
            jobs[job].recoverable[cls] = jobs[job].recoverable.get(cls, 0.0) + hours
    for j in jobs.values():
        for (cls, _), _h in list(j.hours.items()):
            if cls in ALL_OF_IT and j.job is not None:  # all of it: the hours themselves
                j.recoverable[cls] = j.class_hours(cls)
        j.recoverable = {c: min(h, j.class_hours(c)) for c, h in j.recoverable.items() if j.class_hours(c) > 0}
    return sorted(jobs.values(), key=lambda j: (-j.win_back_gpu_hours, -j.wasted_gpu_hours, -j.gpu_hours,
                                                 j.job is None, j.job or ""))


def exported_hours(classes, subclasses, step_s: float):
    """The GPU-hours of the verdicts the nodes' gputop exported, from counts of steps (``step_s`` apart) per job:
    ``classes`` ``(job, class, steps)`` (a verdict of that class at each step; a job and class may come more than
    once: the counts of the range's slices) and ``subclasses`` ``(job, class, subclass, steps)`` (of those, the
    steps that named a subclass). Yields ``(job, class, subclass, GPU-hours)``, a class's steps without a
    subclass as subclass None."""
    rest: dict[tuple, float] = defaultdict(float)
    for job, cls, steps in classes:
        rest[(job, cls)] += steps
    for job, cls, sub, steps in subclasses:
        rest[(job, cls)] -= steps
        yield job, cls, sub or None, steps * step_s / 3600.0
    for (job, cls), steps in rest.items():
        if steps > 0:
            yield job, cls, None, steps * step_s / 3600.0


def judged_hours(samples: list[dict], static: dict, step_s: float, window_s: float):
    """A GPU's samples (one every ``step_s``, oldest first, gaps where it was not exported) cut into windows of
    ``window_s``, each judged by the classifier: ``(class, subclass, GPU-hours, recoverable GPU-hours)`` per
    window (the window's share a fix would recover: ``cluster_winback.window_share``)."""
    by_window: dict[int, list[dict]] = defaultdict(list)
    for s in samples:
        by_window[int(s["t"] // window_s)].append(s)
    peaks = compute_peaks(static)
    for _, window in sorted(by_window.items()):
        v = classify(window, static, peaks)
        hours = len(window) * step_s / 3600.0
        yield v.cls, v.subclass, hours, hours * (window_share(v.cls, window, static, v.subclass) or 0.0)

