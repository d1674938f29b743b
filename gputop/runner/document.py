"""The run document (``gputop --run NAME --json``; schema in ``gputop/schema/run.schema.json``).

Shape (schema_version 1)::

    {schema_version, gputop_version, workload, status, interrupted, exit_code, child_exit_code,
     started_at, wall_time_s, command, params,
     device: {kind, nvml_index, static, peaks, reported},   # reported: the child's "started" device
     phases: [{name, t_start, t_end, duration_s, telemetry, verdict}],   # t in s since launch
     points: [...], results: {...}, telemetry: {...}, verdict: {class, confidence?, evidence, advice} | null,
     warnings: [{code, message}], errors: [{kind, message, detail}], log: [...]}

``telemetry`` blocks are :func:`gputop.analysis.summary.summarize` dicts. A workload's ``analyze(doc)``
may fill ``results``, ``points``, ``verdict`` and the phases' ``verdict`` after the child has ended.
"""

from __future__ import annotations

import csv
import json
import math
import time
from functools import lru_cache
from pathlib import Path

import gputop
from gputop.analysis.summary import summarize, window

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "run.schema.json"


def build_document(run) -> dict:
    """The document of a :class:`gputop.runner.process.WorkloadRun` as it stands now."""
    with run._lock:
        now = time.monotonic()
        t0 = run.t0 if run.t0 is not None else now
        t_end = run.t_end if run.t_end is not None else now
        ticks = list(run.ticks)
        pid = run.proc.pid if run.proc is not None else None
        phases = []
        for ph in run.phases:
            end = ph["t_end"]
            phases.append({
                "name": ph["name"],
                "t_start": round(ph["t_start"] - t0, 4),
                "t_end": round(end - t0, 4) if end is not None else None,
                "duration_s": round((end if end is not None else now) - ph["t_start"], 4),
                "telemetry": summarize(window(ticks, ph["t_start"], end), run.gpu_pos, pid),
                "verdict": None,
            })
        started = run.started_info or {}
        status = run.status
        doc = {
            "schema_version": SCHEMA_VERSION,
            "gputop_version": gputop.__version__,
            "workload": run.spec.name,
            "status": status,
            "interrupted": bool(run.interrupted),
            "exit_code": run.exit_code,
            "child_exit_code": run.returncode,
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
            "points": [dict(p) for p in run.points],
            "results": dict(run.results),
            "telemetry": summarize(window(ticks, t0, None), run.gpu_pos, pid),
            "verdict": None,
            "warnings": [dict(w) for w in run.warnings],
            "errors": [dict(e) for e in run.errors],
            "log": list(run.log),
        }
    return clean(doc)


def clean(obj):
    """Plain JSON types only (a deep copy): numpy scalars to numbers, NaN and infinities to None."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [clean(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return clean(_jsonable(obj))


def dumps(doc: dict, indent: int | None = 2) -> str:
    """The document as strict JSON text."""
    return json.dumps(clean(doc), indent=indent, allow_nan=False)


def error_document(workload: str, kind: str, message: str, exit_code: int, params: dict | None = None,
                   device: str = "cuda", status: str = "error") -> dict:
    """The document of a run that never started (unknown workload, bad parameter, no GPU, Ctrl-C)."""
    return {
        "schema_version": SCHEMA_VERSION, "gputop_version": gputop.__version__, "workload": workload,
        "status": status, "interrupted": status == "interrupted", "exit_code": exit_code, "child_exit_code": None,
        "started_at": None, "wall_time_s": 0.0, "command": [], "params": params or {},
        "device": {"kind": device, "nvml_index": None, "static": None, "peaks": None, "reported": None},
        "phases": [], "points": [], "results": {}, "telemetry": None, "verdict": None, "warnings": [],
        "errors": [{"kind": kind, "message": message, "detail": ""}], "log": [],
    }


def _jsonable(o):
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


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


@lru_cache(maxsize=1)
def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validate(doc: dict) -> None:
    """Raise ``jsonschema.ValidationError`` when ``doc`` does not follow the run schema (needs jsonschema)."""
    import jsonschema

    jsonschema.Draft202012Validator(load_schema()).validate(doc)
