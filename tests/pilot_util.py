"""Helpers shared by the Textual pilot tests (no pytest-asyncio needed)."""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import math
from pathlib import Path

from gputop.runner.registry import Registry
from gputop.tui.widgets import charts

DEMO = Path(__file__).resolve().parents[1] / "gputop" / "data" / "demo.jsonl.gz"
FAULTS = Path(__file__).parent / "fault_workloads"


def sync(fn):
    """Run an async test with asyncio.run."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


async def wait_for(pilot, cond, timeout: float = 30.0) -> None:
    """Let the app run until ``cond()`` holds; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("timed out waiting")
        await pilot.pause(0.05)


async def step(app, pilot, n: int) -> None:
    """Replay ``n`` ticks by hand, then draw a frame."""
    for _ in range(n):
        app.model.sampler.step()
    app.frame(force=True)
    await pilot.pause()


def notes(app) -> list[str]:
    """The messages the app notified, oldest first."""
    return list(app.notes)


async def pick(app, pilot, name: str):
    """Highlight workload ``name`` on the workloads page and wait until its parameter form is mounted
    (the form loads asynchronously: setting an input before that would set the previous form's).
    Returns its spec."""
    spec = next(s for s in app.model.specs if s.name == name)
    app.query_one("#wl-list").highlighted = app.model.specs.index(spec)
    form = app.workloads.form
    await wait_for(pilot, lambda: form.loaded is not None and form.loaded[0] is spec)
    await pilot.pause()
    return spec


def two_gpu_trace(tmp_path: Path) -> Path:
    """The demo trace with its GPU duplicated (GPU 1 idles) - a multi-GPU trace for the strip."""
    out = tmp_path / "two.jsonl.gz"
    with gzip.open(DEMO, "rt") as f, gzip.open(out, "wt") as g:
        for line in f:
            row = json.loads(line)
            if row.get("type") == "header":
                row["devices"].append(dict(row["devices"][0], index=1, name="NVIDIA H200 (copy)"))
            elif row.get("type") == "tick":
                twin = dict(row["gpus"][0], index=1, sm_active_pct=0.0, util_gpu_pct=0.0, power_w=71.0)
                row["gpus"].append(twin)
            g.write(json.dumps(row) + "\n")
    return out


def chart_rows_from_scratch(app, chart, field):
    """What a chart shows, computed from the whole window at once (the charts are fed incrementally)."""
    window = app.model.sampler.window(chart.span)
    ts = [t["t"] for t in window]
    vs = [t["gpus"][app.model.positions[app.model.selected]].get(field) for t in window]
    w, h = chart.wh[0] - chart.EDGE, chart.wh[1]
    dt = chart.span / (2 * w)
    end = 2 * (math.floor(ts[-1] / dt) // 2) - 1  # the charts draw whole cells (two buckets): up to the last one
    buckets = charts.bucket(ts, vs, (end + 0.5) * dt, chart.span, 2 * w)
    return charts.braille_area(buckets, w, h - 1, chart.lo, chart.hi)


def fault_specs(monkeypatch):
    """The workloads of the registry, with the fault workloads found through GPUTOP_WORKLOADS_PATH."""
    monkeypatch.setenv("GPUTOP_WORKLOADS_PATH", str(FAULTS))
    return Registry().names()


def h200_static() -> dict:
    """Static facts recorded off a real H200 (bench/gpu/gpu_foundation.sh), for the fake NVML."""
    return json.loads((Path(__file__).parent / "data" / "static" / "h200_recorded.json").read_text())["static"]
