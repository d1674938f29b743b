"""The cluster's words, shared by ``--once``'s text (``headless/cluster.py``) and the TUI's cluster page
(``tui/cluster/``): GPU-hours, a range, a class with its subclass, and a job's accounting line
("job 1234: 64 GPU-h, 61% input-starved, 20% compute-bound (tensor)"). Pure; no I/O."""

from __future__ import annotations


def hours_text(h: float) -> str:
    """GPU-hours with the digits that matter: 64, 3.5, 0.25, 0.0042."""
    if h >= 10:
        return f"{h:.0f}"
    if h >= 1:
        return f"{h:.1f}"
    return f"{h:.2g}"


def duration_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:g}s"


def class_text(cls: str | None, sub: str | None) -> str:
    return "no verdict" if cls is None else cls + (f" ({sub})" if sub else "")


def job_parts(j: dict) -> tuple[str, str, list[str]]:
    """('job 1234', '64 GPU-h', ['61% input-starved', '20% compute-bound (tensor)']) of ``JobHours.to_dict()``: the
    pieces of its line, for a screen that wraps or shortens it between them."""
    parts = [f"{round(100 * c['share'])}% {class_text(c['class'], c['subclass'])}" for c in j["classes"]]
    name = f"job {j['job']}" if j["job"] is not None else "no job"
    return name, f"{hours_text(j['gpu_hours'])} GPU-h", parts


def job_line(j: dict) -> str:
    """'job 1234: 64 GPU-h, 61% input-starved, 20% compute-bound (tensor)' (``JobHours.to_dict()``)."""
    name, hours, parts = job_parts(j)
    return f"{name}: " + ", ".join([hours, *parts])
