"""Labelled recorded traces: the monitor's diagnosis of a trace, and what a labelled trace should be
diagnosed as (used by the calibration, bench/gpu/proof, the trace tests and docs/diagnosis.md)."""

from __future__ import annotations

import os
import re

from gputop.analysis import thresholds as T
from gputop.session.monitor import OOM_MARK, Monitor
from gputop.telemetry.sampler import DEFAULT_RATE_HZ
from gputop.telemetry.trace import read_trace


def diagnose_trace(path: str, window_s: float = T.WINDOW_S) -> dict:
    """The monitor's analysis of a trace recorded with ``gputop --record FILE --run -- CMD`` (or any trace).

    The watched pid is the one in the ticks' ``host.procs`` (if exactly one); its GPUs are found the same
    way as live (pids in NVML's process lists, else a rise after the first tick).
    """
    from gputop.telemetry.trace import ReplaySource

    header, rows = read_trace(path)
    ticks = [r for r in rows if r["type"] == "tick"]
    pids = {k for t in ticks for k in ((t.get("host") or {}).get("procs") or {})}
    pid = int(next(iter(pids))) if len(pids) == 1 else None
    src = ReplaySource(path, speed=float("inf"))
    mon = Monitor(src, rate_hz=header.get("rate_hz") or DEFAULT_RATE_HZ, window_s=window_s, tree=lambda: set())
    if pid is not None:
        mon.finder.set_pid(pid)
        mon.pid = pid
    while True:
        if mon.sampler.step() is None:
            break
    mon.oom_times = [r["t"] for r in rows if r["type"] == "mark" and r["label"] == OOM_MARK]
    mon.t0 = ticks[0]["t"] if ticks else 0.0
    analysis = mon.analyze()
    analysis["header"] = {k: header.get(k) for k in ("note", "hostname", "recorded_at", "rate_hz")}
    analysis["pid"] = pid
    return analysis


# -- labelled traces (bench/gpu/proof, tests, docs/diagnosis.md) --------------------------------------------------
EXPECT_RE = re.compile(r"expect=([a-z-]+)")
# gputop's own marks of a run that say nothing about the work's phases: they do not end a labelled phase
BOOKKEEPING = ("started", "on GPU ")


def trace_expectations(path: str, header: dict | None = None, rows: list[dict] | None = None) -> dict:
    """What a labelled trace should be diagnosed as.

    ``overall``: from the file name ``<case>.<class>.jsonl.gz`` or ``expect=<class>`` in the header note;
    ``phases``: ``[(label, class, t_start, t_end)]`` for marks whose label holds ``expect=<class>``.
    """
    from gputop.analysis.vocabulary import CLASSES

    if header is None or rows is None:
        header, rows = read_trace(path)
    name = os.path.basename(path)
    for ext in (".jsonl.gz", ".jsonl"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    overall_cls = None
    parts = name.split(".")
    if len(parts) > 1 and parts[-1] in CLASSES:
        overall_cls = parts[-1]
    m = EXPECT_RE.search(header.get("note") or "")
    if m and m.group(1) in CLASSES:
        overall_cls = m.group(1)
    ticks_t = [r["t"] for r in rows if r["type"] == "tick"]
    end = ticks_t[-1] if ticks_t else 0.0
    marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
    ends = [t for t, label in marks if not label.startswith(BOOKKEEPING)]
    phases = []
    for t, label in marks:
        m = EXPECT_RE.search(label)
        if m and m.group(1) in CLASSES:  # until the next mark of the work (gputop's own bookkeeping aside)
            phases.append((label, m.group(1), t, next((e for e in ends if e > t), end)))
    return {"overall": overall_cls, "phases": phases}
