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
    """The families of the latest window ``win`` (None: none yet, nothing yielded)."""
    if not win or win.get("status") != "ok":
        return
    pid = [str(win.get("pid") or "")]
    now = time.time() if now is None else now

    def fam(name, help_text, extra=()):
        return GaugeMetricFamily(name, help_text, labels=["pid", *extra])

    age = fam("gputop_attribution_window_age_seconds", "Seconds since gputop's latest profiler window (--profile) "
              "was written.")
    age.add_metric(pid, max(0.0, now - float(win.get("ended_at") or now)))
    yield age
    length = fam("gputop_attribution_window_seconds", "Length of the latest profiler window (wall seconds).")
    length.add_metric(pid, float(win.get("wall_s") or 0.0))
    yield length
    if win.get("basis") != "kernels":
        return
    busy = win.get("gpu_busy_share")
    if busy is not None:
        f = fam("gputop_attribution_gpu_busy_share", "Share (0-1) of the latest profiler window with a kernel running.")
        f.add_metric(pid, float(busy))
        yield f
    idle_share, split = win.get("gpu_idle_share"), (win.get("idle") or {}).get("window_shares")
    if idle_share is not None:
        f = fam("gputop_attribution_gpu_idle_share", "Share (0-1) of the latest profiler window the GPU idled, by "
                "HolisticTraceAnalysis' reason: host_wait, kernel_wait, other (unknown: no breakdown).", ["reason"])
        for reason, v in (((r, split[r]) for r in REASONS) if split else (("unknown", idle_share),)):
            f.add_metric(pid + [reason], float(v))
        yield f
    f = fam("gputop_attribution_kernel_share", "Share (0-1) of the latest profiler window's kernel time by kernel "
            "category.", ["category"])
    for c in win.get("categories") or []:
        f.add_metric(pid + [c["category"]], float(c["share"]))
    yield f
    if win.get("kernels_per_step") is not None:
        f = fam("gputop_attribution_kernels_per_step", "Kernels launched per optimizer step in the latest profiler "
                "window.")
        f.add_metric(pid, float(win["kernels_per_step"]))
        yield f
