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


def test_live_start_up_imports_neither_the_dcgm_client_nor_the_trace_reader():
    """The live monitor's start-up imports only what it uses: the dcgm-exporter client (--source) and the
    trace reader (--demo, --replay) load with their sources."""
    import subprocess
    import sys

    code = ("import sys, gputop.cli, gputop.sources, gputop.tui.app; "
            "print(sorted(m for m in ('gputop.telemetry.dcgm', 'gputop.telemetry.trace', 'urllib.request') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
