"""Reading a workload's run document, shared by the lessons' ``analyze`` and ``figures``: the points by phase
(or by any key), the points that hold numbers, the GPU's datasheet peaks, a phase's telemetry in numbers and in
words, the window a phase verdict takes, and the throttling warnings."""

from __future__ import annotations

import math

from gputop.telemetry.sample import THROTTLE_REASONS, fields


def is_number(v, positive: bool = False) -> bool:
    """A finite int or float (not a bool); ``positive``: above zero too (a point a log axis can show)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 or not positive)


def points_with(doc: dict, *keys: str) -> list[dict]:
    """The points that hold a number in every one of ``keys`` (skipped and out-of-memory points hold none)."""
    return [q for q in doc.get("points") or [] if isinstance(q, dict) and all(is_number(q.get(k)) for k in keys)]


def by_key(points: list[dict], key: str) -> dict[str, list[dict]]:
    """``points`` grouped by their ``key`` as text, in the order each value first comes."""
    out: dict[str, list[dict]] = {}
    for q in points:
        out.setdefault(str(q.get(key)), []).append(q)
    return out


def cuda_peaks(doc: dict) -> dict:
    """The GPU's datasheet peaks ({} on a CPU run or when none are known)."""
    device = doc.get("device") or {}
    return (device.get("peaks") or {}) if device.get("kind") == "cuda" else {}


def phase_points(doc: dict) -> dict[str, list[dict]]:
    """The points grouped by their ``phase`` key."""
    out: dict[str, list[dict]] = {}
    for p in doc.get("points") or []:
        if isinstance(p, dict) and p.get("phase") is not None:
            out.setdefault(str(p["phase"]), []).append(p)
    return out


def tele(phase: dict | None, field: str, stat: str = "mean"):
    """A telemetry summary value of a phase (None when n/a, e.g. on CPU)."""
    summary = (phase or {}).get("telemetry") or {}
    value = summary.get(field)
    if isinstance(value, dict):
        return value.get(stat)
    return value


# The phase telemetry tele_text puts in words (fields of gputop.analysis.summary.GPU_FIELDS), and its words.
TELE_FIELDS = fields("util_gpu_pct", "sm_active_pct", "tensor_pct", "dram_bw_pct")
TELE_WORDS = ("kernel-active", "SM active", "tensor", "DRAM bw")


def tele_numbers(phase: dict | None) -> dict:
    """The GPU telemetry ``tele_text`` puts in words, as evidence numbers: {field: mean} of those not n/a."""
    means = {field: tele(phase, field) for field in TELE_FIELDS}
    return {field: v for field, v in means.items() if v is not None}


def tele_text(phase: dict | None) -> str:
    """The GPU telemetry of a phase in words, or "" when there is none."""
    numbers = tele_numbers(phase)
    return ", ".join(f"{label} {numbers[field]:.0f}%" for field, label in zip(TELE_FIELDS, TELE_WORDS)
                     if field in numbers)


def phase_window(phase: dict) -> dict:
    """The window of a phase, as a verdict of that phase takes it: ``Verdict(..., **phase_window(ph))``."""
    return {"t_start": phase.get("t_start"), "t_end": phase.get("t_end"), "window_s": phase.get("duration_s")}


def throttle_warnings(doc: dict) -> None:
    """Add a ``throttling`` warning for each phase whose telemetry saw a power or thermal clock limit."""
    seen = {w.get("message") for w in doc.get("warnings") or []}
    for ph in doc.get("phases") or []:
        reasons = tele(ph, "clock_reasons_seen") or []
        hits = [r for r in reasons if r in THROTTLE_REASONS]
        if hits:
            msg = f"phase '{ph.get('name')}': clocks were limited ({', '.join(hits)}); timings may be low"
            if msg not in seen:
                doc.setdefault("warnings", []).append({"code": "throttling", "message": msg})
