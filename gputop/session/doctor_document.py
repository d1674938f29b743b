"""The ``gputop --doctor`` document (schema: ``gputop/schema/doctor.schema.json``), its exit code, and what each
GPU keeps of it for ``--export`` and the TUI (:mod:`gputop.telemetry.doctor_state`).

A document: the node's ``status`` (ok / degraded / failed) and ``exit_code``, each GPU (its passive facts, its
measured figures and the load's clocks, its status), each pair's copy bandwidth, and every ``finding`` judged by
:func:`gputop.analysis.doctor.judge`, each with its number, the number expected and where that expectation comes
from. An interrupted run is still a document (``interrupted``, what was measured so far).
"""

from __future__ import annotations

import platform
import time
from datetime import datetime, timezone

from gputop import exitcodes
from gputop.analysis.doctor import FIGURES, judge
from gputop.analysis.doctor_findings import DEGRADED, FAILED, OK
from gputop.documents import header, signal_fields

EXIT_CODES = {OK: exitcodes.OK, DEGRADED: exitcodes.DEGRADED, FAILED: exitcodes.UNHEALTHY}
KEEP_HEALTH = ("serial", "pci_bus_id", "driver_version", "cuda_driver_version")


def exit_code_for(status: str, signum: int | None = None, missing: bool = False) -> int:
    """gputop's exit code of a doctor run: 128+N when signal N stopped it, 4 when a load lacked torch or CuPy,
    else the node's status (0 ok, 7 degraded, 8 failed)."""
    if signum is not None:
        return exitcodes.for_signal(signum)
    if missing:
        return exitcodes.MISSING_DEPENDENCY
    return EXIT_CODES.get(status, exitcodes.OK)


def build_document(run, mode: str, fleet: dict | None = None, started_at: str | None = None) -> dict:
    """The document of a finished (or stopped) :class:`gputop.session.doctor.DoctorRun`."""
    node = {**run.node(), "fleet": fleet}
    verdict = judge(node)
    findings = verdict["findings"]
    gpus = []
    for g in node["gpus"]:
        h = g["health"]
        gpus.append({"index": g["index"], "name": g.get("name"), "uuid": g.get("uuid"),
                     **{k: h.get(k) for k in KEEP_HEALTH}, "status": verdict["gpus"][g["index"]],
                     "health": h, "health_after": g.get("health_after"), "xids": g.get("xids"),
                     "active": g.get("active"), "peaks": g.get("peaks")})
    signum = run.signum
    missing = bool(run.missing)
    code = exit_code_for(verdict["status"], signum, missing)
    errors = [{"kind": "missing_dependency", "message": m, "detail": ""} for m in dict.fromkeys(run.missing)]
    return {
        **header("doctor"), "time": started_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(), "mode": mode, "status": verdict["status"], "exit_code": code,
        **signal_fields(signum), "wall_s": round(run.wall_s or 0.0, 2), "counts": verdict["counts"],
        "gpus": gpus, "pairs": node["pairs"], "findings": [f.to_dict() for f in findings],
        "xid_log": node["xid_log"], "fleet": fleet, "errors": errors,
    }


def state_records(doc: dict) -> list[dict]:
    """What each GPU keeps of ``doc`` (``gputop.telemetry.doctor_state``'s file): its status, figures and its
    findings other than ok. An interrupted run keeps nothing (its figures are partial)."""
    if doc.get("interrupted") or doc.get("status") is None:
        return []
    now = time.time()
    out = []
    for g in doc["gpus"]:
        mine = [f for f in doc["findings"] if about_dict(f, g["index"])]
        figures = ((g.get("active") or {}).get("figures") or {})
        out.append({"time": doc["time"], "unix_time": now, "hostname": doc["hostname"],
                    "gputop_version": doc["gputop_version"], "mode": doc["mode"], "index": g["index"],
                    "uuid": g.get("uuid"), "name": g.get("name"), "status": g["status"],
                    "figures": {k: v for k, v in figures.items() if k in FIGURES},
                    "findings": [f for f in mine if f["status"] in (DEGRADED, FAILED)],
                    "counts": {s: sum(1 for f in mine if f["status"] == s) for s in (OK, DEGRADED, FAILED)}})
    return out


def about_dict(f: dict, index: int) -> bool:
    return f.get("gpu") == index or index in (f.get("gpus") or [])

