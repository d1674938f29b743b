"""Helpers shared by the Textual pilot tests (no pytest-asyncio needed).

Waiting on a running app: :func:`wait_screen` waits until the screen's text shows what the test then asserts and
returns that text (the test asserts on the frame it waited for); :func:`wait_for` waits for a state of the app's
model. Both fail with the screen's text when they time out. :func:`screen_text` is the screen as the terminal
shows it, read from Textual's compositor: the same strips ``App.export_screenshot`` renders, without the SVG."""

from __future__ import annotations

import asyncio
import functools
import gzip
import inspect
import json
import math
import threading
from pathlib import Path
from typing import Callable, Iterable

from gputop.runner.recording import RecordedRun
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


def screen_text(app) -> str:
    """The screen's text now, one line a row, each row as wide as the screen (blanks included): the strips the
    compositor draws, the screens under a translucent one included, as ``App.export_screenshot`` renders them
    (that builds an SVG of the same strips, five times slower, which the tests then parsed back). It reads Textual's
    private compositor: test_tui's test_the_tests_screen_text_is_the_screenshots says when an upgrade changes that."""
    from textual._context import visible_screen_stack

    token = visible_screen_stack.set(app._background_screens)
    try:
        strips = app.screen._compositor.render_strips()
    finally:
        visible_screen_stack.reset(token)
    return "\n".join(strip.text for strip in strips)


POLL_S = 0.05  # how often a wait looks again (the app runs meanwhile)


def _what(cond) -> str:
    if isinstance(cond, str):
        return repr(cond)
    try:
        return inspect.getsource(cond).strip()
    except (OSError, TypeError):
        return repr(cond)


def _timed_out(app, what: str, timeout: float) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}; the screen was:\n{screen_text(app)}")


async def wait_for(pilot, cond: Callable[[], object], timeout: float = 30.0) -> None:
    """Let the app run until ``cond()`` holds (a state of its model, a process, a file); fail after ``timeout``
    seconds with the screen's text. What the screen shows is :func:`wait_screen`'s to wait for."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    await pilot.pause()
    while not cond():
        if loop.time() > end:
            raise _timed_out(pilot.app, _what(cond), timeout)
        await pilot.pause(POLL_S)


async def wait_screen(pilot, shows: str | Iterable[str] | Callable[[str], object], timeout: float = 30.0) -> str:
    """Let the app run until its screen shows ``shows``: a text, every text of a list, or what a predicate over the
    screen's text accepts. Returns the text that did (assert on it: it is the frame that was waited for); fails after
    ``timeout`` seconds with the screen's text."""
    if isinstance(shows, str):
        want = [shows]
        ok = lambda text: shows in text  # noqa: E731
    elif callable(shows):
        want, ok = None, shows
    else:
        want = list(shows)
        ok = lambda text: all(w in text for w in want)  # noqa: E731
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    await pilot.pause()
    while True:
        text = screen_text(pilot.app)
        if ok(text):
            return text
        if loop.time() > end:
            raise _timed_out(pilot.app, _what(shows) if want is None else " and ".join(map(repr, want)), timeout)
        await pilot.pause(POLL_S)


async def step(app, pilot, n: int) -> None:
    """Replay ``n`` ticks by hand, then draw a frame."""
    for _ in range(n):
        app.model.sampler.step()
    app.frame(force=True)
    await pilot.pause()


def hold_recorded_runs(monkeypatch) -> threading.Event:
    """Recorded runs started from now on play their events at their pace, then wait for the test before they are
    over (until the returned event is set, or the run is stopped): a test sees a run playing however slow the
    machine (a short recording at 1x may otherwise end before the test looks)."""
    release = threading.Event()
    start = RecordedRun.start

    def held_start(run):
        class HeldEnd(threading.Event):
            def set(self):
                while not (release.wait(0.05) or run._stop.is_set()):
                    pass
                super().set()

        run._finished = HeldEnd()
        return start(run)

    monkeypatch.setattr(RecordedRun, "start", held_start)
    return release


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
