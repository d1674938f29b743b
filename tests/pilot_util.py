"""Helpers shared by the Textual pilot tests (no pytest-asyncio needed)."""

from __future__ import annotations

import asyncio
import functools


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


async def pick(app, pilot, name: str):
    """Highlight workload ``name`` on the workloads page and wait until its parameter form is mounted
    (the form loads asynchronously: setting an input before that would set the previous form's).
    Returns its spec."""
    spec = next(s for s in app.specs if s.name == name)
    app.query_one("#wl-list").highlighted = app.specs.index(spec)
    form = app.workloads.form
    await wait_for(pilot, lambda: form.loaded is not None and form.loaded[0] is spec)
    await pilot.pause()
    return spec
