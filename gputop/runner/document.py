"""The run document of a workload (``gputop --run NAME --json``; schema ``gputop/schema/run.schema.json``).

Shape::

    {schema_version, gputop_version, workload, status, interrupted, signal, exit_code, child_exit_code,
     started_at, wall_time_s, command, params,
     device: {kind, nvml_index, static, peaks, reported},   # reported: the child's "started" device
     phases: [{name, t_start, t_end, duration_s, telemetry, verdict}],   # t in s since launch
     points: [...], results: {...}, telemetry: {...}, verdict: Verdict.to_dict() | null,
     warnings: [{code, message}], errors: [{kind, message, detail}], log: [...]}

``telemetry`` blocks are :func:`gputop.analysis.summary.summarize` dicts. A workload's ``analyze(doc)``
may fill ``results``, ``points``, ``verdict`` and the phases' ``verdict`` after the child has ended.
Cleaning, schema versions and error documents are :mod:`gputop.documents`'; CSV output is here.
"""

from __future__ import annotations

import csv
import json
import time

from gputop.analysis.summary import summarize, window
from gputop.documents import clean, header, signal_fields


def build_document(run) -> dict:
    """The document of a :class:`gputop.runner.workload_run.WorkloadRun` as it stands now."""
    ev = run.events.copy()
    ticks = run.ticks_copy()
    now = time.monotonic()
    t0 = run.t0 if run.t0 is not None else now
    t_end = run.t_end if run.t_end is not None else now
    pid = run.pid
    phases = []
    for ph in ev["phases"]:
        end = ph["t_end"]
        phases.append({
            "name": ph["name"],
            "t_start": round(ph["t_start"] - t0, 4),
            "t_end": round(end - t0, 4) if end is not None else None,
            "duration_s": round((end if end is not None else now) - ph["t_start"], 4),
            "telemetry": summarize(window(ticks, ph["t_start"], end), run.gpu_pos, pid),
            "verdict": None,
        })
    started = ev["started"] or {}
    child = run.child
    doc = {
        **header("run"),
        "workload": run.spec.name,
        "status": run.status,
        **signal_fields(run.signum if run.interrupted else None),
        "exit_code": run.exit_code,
        "child_exit_code": child.returncode if child is not None else None,
        "started_at": run.started_at,
        "wall_time_s": round(t_end - t0, 4),
        "command": list(run.command),
        "params": dict(run.values),
        "device": {
            "kind": run.device,
            "nvml_index": run.nvml_index,
            "static": run.static,
            "peaks": run.peaks,
            "reported": started.get("device") if isinstance(started.get("device"), dict) else None,
        },
        "phases": phases,
        "points": ev["points"],
        "results": ev["results"],
        "telemetry": summarize(window(ticks, t0, None), run.gpu_pos, pid),
        "verdict": None,
        "warnings": ev["warnings"],
        "errors": ev["errors"],
        "log": ev["log"],
    }
    doc["interrupted"] = bool(run.interrupted)
    return clean(doc)


def csv_columns(points: list[dict]) -> list[str]:
    """Every key of the points, in the order first seen (a workload puts its main columns first)."""
    cols: list[str] = []
    for p in points:
        for k in p:
            if k not in cols:
                cols.append(k)
    return cols


def write_csv(points: list[dict], path: str) -> None:
    """The points as CSV: scalars as they are, lists and dicts as JSON, missing values empty."""
    cols = csv_columns(points)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for p in points:
            w.writerow(["" if p.get(c) is None else (json.dumps(p[c]) if isinstance(p[c], (list, dict)) else p[c])
                        for c in cols])
