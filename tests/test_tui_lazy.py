"""The monitor alone never loads the workloads (loading them runs every workload module): they load when
the workloads page first shows."""

from __future__ import annotations

from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, TuiConfig
from pilot_util import DEMO, step, sync


@sync
async def test_workloads_load_on_first_visit():
    app = GputopApp(TuiConfig(ReplaySource(str(DEMO), speed=float("inf")), start_sampler=False, fps=0, device="cpu"))
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 20)
        assert not app.specs_loaded and app.specs == []
        await pilot.press("2")
        await pilot.pause()
        assert app.specs_loaded and "roofline" in [s.name for s in app.specs]
        assert app.specs[0].name in app.screen_text()  # the list shows (its first entry; 80x24 scrolls the rest)
