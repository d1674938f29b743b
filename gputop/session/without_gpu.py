"""``gputop --run -- CMD`` where NVML sees no GPU (no driver, no library, no device): the command runs all the
same, under the one supervisor, and its report says what can be known without a GPU (its exit code, its wall time,
its CPU use and the host's) and that no GPU was seen, with no verdict: a workshop room without GPUs can try
"diagnose my command" for its host side. What needs a GPU is refused with one line (``--record``: exit 3).
"""

from __future__ import annotations

import dataclasses
import os
import platform

from gputop import exitcodes
from gputop.session.monitor import PROCESS_EVERY, Monitor
from gputop.telemetry.source import open_source

NO_GPU_NOTE = "no GPU seen ({why}): the command ran; its exit code, wall time and CPU use are reported, no GPU verdict"
HOST_FIELDS = ("samples", "seconds", "workload_cpu_pct", "host_cpu_pct")  # what host.summary holds


def run_without_gpu(opts, exc: exitcodes.Failure) -> Monitor:
    """The monitor of ``opts`` (a :class:`gputop.session.command_options.SessionOptions`) where NVML sees no GPU (``exc``
    says why): the host alone, so that the command still runs under the one supervisor with its exit code, its wall
    time and its CPU reported. What needs a GPU is refused: ``--record`` (it records GPU telemetry; exit 3, the
    line says to run without it)."""
    if opts.record:
        raise exitcodes.Failure(exitcodes.NO_GPU, f"{exc}; --record FILE records GPU telemetry: without it the command "
                                                  "runs and its exit and CPU use are reported", "no_gpu")
    src = open_source(dataclasses.replace(opts.spec, process_every=PROCESS_EVERY), need_gpu=False)
    return Monitor(src, rate_hz=opts.spec.rate_hz, note=opts.note)


def without_gpu(monitor: Monitor, why: str, pid: int | None) -> dict:
    """What a run's document says where no GPU was seen: no verdict (none can be made), the note why, and the
    command's CPU use over the run (``host.summary``: its process tree's and the host's, mean and max %)."""
    from gputop.analysis.summary import summarize

    summary = summarize(monitor.store.snapshot(), None, pid)
    return {"verdict": None, "gpu_detection": "none", "notes": [NO_GPU_NOTE.format(why=why)],
            "host": {"hostname": platform.node(), "cpu_count": os.cpu_count(),
                     "summary": {k: summary[k] for k in HOST_FIELDS}}}
