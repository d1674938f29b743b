"""``--export`` beside ``--run --profile -- CMD``: the latest profiler window as a few Prometheus series.

The window is :meth:`gputop.session.profiling.ProfileWindows.latest` (analysed by
gputop/analysis/attribution.py and gputop/analysis/idle.py); every series carries the ``pid`` of the process
whose window it is. Shares are 0-1 of the window's wall time (busy, idle by reason) or of its kernel time
(categories):

* ``gputop_attribution_window_age_seconds``: seconds since the window was written (alert on a stale one);
* ``gputop_attribution_window_seconds``: the window's length;
* ``gputop_attribution_gpu_busy_share``: the share of the window at least one kernel ran (GPU windows);
* ``gputop_attribution_gpu_idle_share{reason}``: the rest, split by HolisticTraceAnalysis' idle breakdown into
  ``host_wait``, ``kernel_wait`` and ``other`` (``unknown`` where the window has no breakdown); the reasons
  sum to 1 - busy;
* ``gputop_attribution_kernel_share{category}``: kernel time by category (GEMM/conv, attention, elementwise, ...);
* ``gputop_attribution_kernels_per_step``: kernels launched per optimizer step, where steps are seen.

A window without CUDA kernels (a CPU program) has only the first two. No window yet: no series.
"""

from __future__ import annotations

import time

from prometheus_client.core import GaugeMetricFamily

from gputop.analysis.idle import REASONS


def attribution_families(win: dict | None, now: float | None = None):
    """The families of the latest window ``win`` (None: none yet, nothing yielded); a job's ranks (``per_process``):
    each rank's series under its own ``pid``."""
    if not win or win.get("status") != "ok":
        return
    now = time.time() if now is None else now
    wins = [{**win, **p} for p in win["per_process"]] if win.get("per_process") else [win]

    def fam(name, help_text, extra=()):
        return GaugeMetricFamily(name, help_text, labels=["pid", *extra])

    def pid(w):
        return [str(w.get("pid") or "")]

    age = fam("gputop_attribution_window_age_seconds", "Seconds since gputop's latest profiler window (--profile) "
              "was written.")
    length = fam("gputop_attribution_window_seconds", "Length of the latest profiler window (wall seconds).")
    busy = fam("gputop_attribution_gpu_busy_share", "Share (0-1) of the latest profiler window with a kernel running.")
    idle = fam("gputop_attribution_gpu_idle_share", "Share (0-1) of the latest profiler window the GPU idled, by "
               "HolisticTraceAnalysis' reason: host_wait, kernel_wait, other (unknown: no breakdown).", ["reason"])
    kernel = fam("gputop_attribution_kernel_share", "Share (0-1) of the latest profiler window's kernel time by kernel "
                 "category.", ["category"])
    per_step = fam("gputop_attribution_kernels_per_step", "Kernels launched per step (an optimizer step, or a "
                   "forward pass without one) in the latest profiler window.")
    for w in wins:
        age.add_metric(pid(w), max(0.0, now - float(w.get("ended_at") or now)))
        length.add_metric(pid(w), float(w.get("wall_s") or 0.0))
        if w.get("basis") != "kernels":
            continue
        if w.get("gpu_busy_share") is not None:
            busy.add_metric(pid(w), float(w["gpu_busy_share"]))
        idle_share, split = w.get("gpu_idle_share"), (w.get("idle") or {}).get("window_shares")
        if idle_share is not None:
            for reason, v in (((r, split[r]) for r in REASONS) if split else (("unknown", idle_share),)):
                idle.add_metric(pid(w) + [reason], float(v))
        for c in w.get("categories") or []:
            kernel.add_metric(pid(w) + [c["category"]], float(c["share"]))
        if w.get("kernels_per_step") is not None:
            per_step.add_metric(pid(w), float(w["kernels_per_step"]))
    yield age
    yield length
    if any(w.get("basis") == "kernels" for w in wins):
        for f in (busy, idle, kernel, per_step):
            if f.samples:
                yield f
