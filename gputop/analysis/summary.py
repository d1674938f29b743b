"""Telemetry summary of a window of ticks: mean and max per field, clocks, power, reasons seen.

``summarize(ticks, gpu_pos=0)`` reads GPU position ``gpu_pos`` of each tick (the position in
``tick["gpus"]``, not the NVML index) and the host part. Every value is ``None`` when no tick had
it (n/a on this GPU, or no GPU at all), so a CPU-only run gives a host-only summary.
"""

from __future__ import annotations

from gputop.telemetry.sample import fields

# The GPU sample fields summarised as {"mean", "max"} (the run schema's summary lists the same).
GPU_FIELDS = fields(
    "sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_pct", "fp32_pct", "util_gpu_pct",
    "sm_clock_mhz", "power_w", "mem_used_bytes",
)


def mean_max(values) -> dict:
    """{"mean", "max"} of the non-None values (both None when there are none)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"mean": None, "max": None}
    return {"mean": sum(vals) / len(vals), "max": max(vals)}


def summarize(ticks: list[dict], gpu_pos: int = 0, pid: int | None = None) -> dict:
    """Summary of ``ticks`` for GPU position ``gpu_pos`` and the watched process ``pid``.

    ``pid`` picks the watched process tree in ``tick["host"]["procs"]``; without it, the first one.
    """
    ticks = [t for t in ticks if t]
    gpus = [t["gpus"][gpu_pos] for t in ticks if gpu_pos is not None and gpu_pos < len(t.get("gpus") or [])]
    gpus = [g for g in gpus if not g.get("lost")]
    out: dict = {
        "samples": len(ticks),
        "gpu_samples": len(gpus),
        "seconds": (ticks[-1]["t"] - ticks[0]["t"]) if len(ticks) > 1 else 0.0,
    }
    for name in GPU_FIELDS:
        out[name] = mean_max(g.get(name) for g in gpus)
    seen: list[str] = []
    for g in gpus:
        for reason in g.get("clock_reasons") or []:
            if reason not in seen:
                seen.append(reason)
    out["clock_reasons_seen"] = seen if any(g.get("clock_reasons") is not None for g in gpus) else None
    hosts = [t.get("host") or {} for t in ticks]
    out["host_cpu_pct"] = mean_max(h.get("cpu_pct") for h in hosts)
    out["workload_cpu_pct"] = mean_max(_tree_cpu(h, pid) for h in hosts)
    return out


def _tree_cpu(host: dict, pid: int | None) -> float | None:
    """CPU% of a watched process plus its children (100 = one core busy)."""
    procs = host.get("procs") or {}
    entry = procs.get(str(pid)) if pid is not None else next(iter(procs.values()), None)
    if not entry or entry.get("cpu_pct") is None:
        return None
    return entry["cpu_pct"] + (entry.get("children_cpu_pct") or 0.0)


def window(ticks: list[dict], t_start: float | None, t_end: float | None) -> list[dict]:
    """The ticks with ``t_start <= t < t_end`` (open ends when None)."""
    return [t for t in ticks if (t_start is None or t["t"] >= t_start) and (t_end is None or t["t"] < t_end)]
