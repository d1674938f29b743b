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
