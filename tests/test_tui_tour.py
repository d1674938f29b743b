"""``gputop --tour`` in pilot tests on a machine without a GPU: n steps from stop to stop, each with its
sentence; a stop replays its recorded run (a real CPU recording here) or runs the CPU version."""

from __future__ import annotations

from pathlib import Path

import gputop.tui.model.tour as tour
from gputop.tui.model.runs import RecordingSpec
from pilot_util import sync, wait_for, wait_screen
from test_tui import make

RECORDED = Path(__file__).parent / "data" / "recorded" / "roofline-cpu.jsonl.gz"


@sync
async def test_tour_steps_through_recordings_and_cpu_runs(monkeypatch):
    monkeypatch.setattr(tour, "STOPS", [("roofline", "Watch the dots climb the roof."),
                                        ("gpu_only_nowhere", "never shown: no GPU, no recording"),
                                        ("fault_ok", "Watch a quick CPU run.")])
    app = make(recordings=[str(RECORDED)], tour=True)
    async with app.run_test(size=(80, 24)) as pilot:
        app.frame(force=True)
        await wait_screen(pilot, "tour: press n to start")
        await pilot.press("n")  # stop 1: no GPU here, so the recorded run
        await wait_screen(pilot, lambda t: "tour 1/3 roofline, the recorded CPU run. Watch the dots climb the roof."
                          in " ".join(t.split()))
        state = app.model.controller.runs[-1]
        assert app.page == "workloads" and isinstance(app.workloads.spec, RecordingSpec)
        assert state.target == "recording" and state.name == "roofline"
        await pilot.press("n")  # the replay still plays: stopped, then the next stop that has something to show
        await wait_for(pilot, lambda: len(app.model.controller.runs) == 2)
        await wait_for(pilot, lambda: app.model.controller.runs[-1].run.finished, 30)
        assert state.run.finished and state.run.status == "interrupted"
        assert app.model.controller.runs[-1].name == "fault_ok" and app.model.controller.runs[-1].target == "CPU"
        app.frame(force=True)
        said = ("tour 3/3 fault_ok, on the CPU: no GPU here", "Watch a quick CPU run.",
                "passed over: gpu_only_nowhere needs a GPU and no recording of it ships")
        await wait_screen(pilot, lambda t: all(s in " ".join(t.split()) for s in said))
        await pilot.press("n")
        await wait_screen(pilot, lambda t: "tour over: n starts again" in " ".join(t.split()))


@sync
async def test_n_without_tour_says_how():
    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")
        await wait_screen(pilot, "n steps through gputop --tour")
        assert not app.model.controller.runs
