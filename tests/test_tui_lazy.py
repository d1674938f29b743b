"""The monitor alone never loads the workloads (loading them runs every workload module): they load when
the workloads page first shows."""

from __future__ import annotations

import pytest

from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, TuiConfig
from pilot_util import DEMO, step, sync, wait_for, wait_screen


@sync
async def test_workloads_load_on_first_visit():
    app = GputopApp(TuiConfig(ReplaySource(str(DEMO), speed=float("inf")), start_sampler=False, fps=0, device="cpu"))
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 20)
        assert not app.model.specs_loaded and app.model.specs == []
        await pilot.press("2")
        await pilot.pause()
        assert app.model.specs_loaded and "roofline" in [s.name for s in app.model.specs]
        await wait_screen(pilot, app.model.specs[0].name)  # the list shows (its first entry; 80x24 scrolls the rest)


def test_live_start_up_imports_neither_the_dcgm_client_nor_the_trace_reader():
    """The live monitor's start-up imports only what it uses: the dcgm-exporter client (--source) and the
    trace reader (--demo, --replay) load with their sources."""
    import subprocess
    import sys

    code = ("import sys, gputop.cli, gputop.telemetry.source, gputop.tui.app; "
            "print(sorted(m for m in ('gputop.telemetry.dcgm', 'gputop.telemetry.trace', 'urllib.request') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class SlowFirstRead:
    """A replay whose first read takes 0.3 s (NVML's first reads on a GPU machine are the slow ones)."""

    def __init__(self, src):
        self.src, self.reads = src, 0

    def __getattr__(self, name):
        return getattr(self.src, name)

    def read(self):
        import time

        self.reads += 1
        if self.reads == 1:
            time.sleep(0.3)
        return self.src.read()


@pytest.mark.slow
@sync
async def test_the_first_tick_is_drawn_when_it_comes_not_at_the_next_frame():
    """gputop starts sampling before Textual runs (start_sampling), and a first tick that comes after the first
    frame is drawn at once: with the frame timer's first frame 20 s after start-up, the device panel shows the
    first tick's numbers before it (waiting at most 16 s, however slow the machine)."""
    app = GputopApp(TuiConfig(SlowFirstRead(ReplaySource(str(DEMO), speed=1.0)), fps=0.05, device="cpu"))
    app.lifecycle.start_sampling()
    async with app.run_test(size=(120, 40)) as pilot:
        # drawn by the first tick's redraw: the timer's first frame comes at 20 s, after both waits' 8 s
        await wait_for(pilot, lambda: app._last_tick is not None, 8)
        await wait_screen(pilot, "SM activity", 8)
        assert app.lifecycle._first_tick not in app.model.sampler.listeners
        assert app.model.sampler.listeners.count(app.model.sticky.observe) == 1  # started once, before run and not again
    assert not app.model.sampler.running  # stopped with the app
