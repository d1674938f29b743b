"""The TUI at 80x24 (an SSH terminal): nothing cut, nothing covered. Pilot tests on the demo trace
(replayed tick by tick), and on a live source without a GPU; a real fault workload for a quiet run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.tui.app import GputopApp, HelpScreen, TuiConfig
from gputop.tui.help import HELP
from gputop.tui.widgets.keybar import key_line
from gputop.tui.model.runs import RunState
from pilot_util import notes, pick, screen_text, step, sync, wait_for, wait_screen
from test_tui import make

SIZE = (80, 24)
RUNS = Path(__file__).parent / "data" / "tui_runs"


def flat(text: str) -> str:
    """Screen text with the line breaks and runs of blanks (and panel borders) as one space: a sentence
    wrapped over several rows reads as one."""
    return re.sub(r"[\s│]+", " ", text).strip()


def rows(app) -> list[str]:
    return screen_text(app).split("\n")


@sync
async def test_advice_and_evidence_wrap_whole_and_charts_keep_two_rows():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 120)  # the bf16 matmul: compute-bound, with a long advice
        await step(app, pilot, 1)  # the charts' layout after the verdict took its rows
        v = app.monitor.verdict
        assert v is not None and v.advice and len(v.advice) > 80  # the advice needs more than one row
        seen = await wait_screen(pilot, lambda t: flat("advice: " + v.advice) in flat(t)
                                 and flat(v.evidence_text) in flat(t) and "scale 0-100%" in t)
        text, lines = flat(seen), seen.split("\n")
        assert "…" not in "".join(lines[1:]) and "max 100%" not in text
        shown = [c for c in app.monitor.charts if c.display]
        assert len(shown) >= 1 and all(c.size.height >= 3 for c in shown)  # a title and two rows each
        assert len(lines) == 24 and all(len(r) <= 80 for r in lines)


@pytest.mark.slow
@sync
async def test_help_scrolls_to_every_line_uncut():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 5)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        want = [re.sub(r"\[/?b\]", "", line).strip() for line in HELP.splitlines() if line.strip()]
        seen = await wait_screen(pilot, lambda t: flat(want[0]) in flat(t))
        for _ in range(30):  # scroll to the end, keeping what each position showed
            await pilot.press("down")
            await pilot.pause()
            seen += "\n" + screen_text(app)
        missing = [line for line in want if flat(line) not in flat(seen)]
        assert not missing
        assert any(r.startswith("╰") and r.endswith("╯") for r in rows(app))  # the box is whole: not cut


@sync
async def test_key_bar_fits_every_page_and_keeps_help():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 5)
        for page in ("1", "2"):
            await pilot.press(page)
            last = (await wait_screen(pilot, lambda t: "q quit" in t.split("\n")[-1])).split("\n")[-1].rstrip()
            assert len(last) <= 80 and "q quit" in last and ("? help" in last or "? more keys" in last)
            assert "r run" in last and "c cancel" in last and "s save" in last
    # too narrow for every key: the first ones that fit, then "? more keys" (the help lists them all)
    items = [("q", "quit"), ("?", "help"), ("1/2", "pages"), ("r", "run"), ("c", "cancel"), ("s", "save")]
    line = key_line(items, 30).plain
    assert len(line) <= 30 and line.endswith("? more keys") and line.startswith("q quit")
    assert key_line(items, 80).plain == "q quit  ? help  1/2 pages  r run  c cancel  s save"


@sync
async def test_notifications_never_cover_the_header_or_the_verdict():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 120)
        await step(app, pilot, 1)
        before = rows(app)
        header, verdict = before[0], [r for r in before if r.lstrip().startswith(("verdict:", "advice:"))]
        message = ("a long notification, the kind an error gives: " + "it says what went wrong and why " * 3).strip()
        app.notify(message, severity="error")
        await step(app, pilot, 1)
        after = (await wait_screen(pilot, lambda t: flat(message) in flat(t))).split("\n")
        assert after[0] == header and all(r in after for r in verdict)
        assert notes(app)[-1] == message
        assert all(c.size.height >= 3 for c in app.monitor.charts if c.display)
        assert not app.screen.query("Toast")  # no toast drawn over the screen


@sync
async def test_no_gpu_reason_wraps_whole():
    nvml = Nvml()
    if nvml.available():
        pytest.skip("this machine has a GPU")
    why = ("NVML Shared Library Not Found: libnvidia-ml.so.1 is missing - is this a GPU machine with the NVIDIA "
           "driver installed?")
    app = GputopApp(TuiConfig(LiveSource(nvml, gpus=[]), start_sampler=False, hostname="nogpu", specs=[],
                              device="cpu", na_reason=why, fps=0))
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 2)
        await wait_screen(pilot, lambda t: flat("NVML: " + why) in flat(t))


@sync
async def test_a_finished_run_shows_no_phase():
    app = make()
    doc = json.loads((RUNS / "roofline_cpu.json").read_text())
    assert doc["phases"]

    class Finished:  # a finished run, as the results view sees one
        finished, t0 = True, None

        def document(self):
            return json.loads(json.dumps(doc))

    async with app.run_test(size=SIZE) as pilot:
        app.model.controller.runs.append(RunState(run=Finished(), name="roofline", target="CPU"))
        await pilot.press("2")
        await step(app, pilot, 2)
        text = await wait_screen(pilot, lambda t: any(r.startswith("roofline ok") for r in t.split("\n")))
        status = next(r for r in text.split("\n") if r.startswith("roofline ok"))
        assert "phase:" not in status and f"{doc['wall_time_s']:.1f} s" in status


@pytest.mark.slow
@sync
async def test_a_quiet_runs_elapsed_time_keeps_moving():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pick(app, pilot, "fault_hang")  # one point, then silence until cancelled
        await pilot.press("r")
        state = app.model.controller.runs[0]
        await wait_for(pilot, lambda: len(state.run.points) == 1, 20)
        events = state.events

        def status(text: str) -> str | None:
            return next((r for r in text.split("\n") if r.startswith("fault_hang")), None)

        def elapsed(text: str) -> float | None:
            line = status(text)
            return float(re.search(r"([\d.]+) s", line).group(1)) if line else None

        app.frame()  # frames with no new tick and no new event
        first = elapsed(await wait_screen(pilot, elapsed))

        async def moved() -> str:  # frames until the status line's elapsed time has moved on by half a second
            for _ in range(200):
                app.frame()
                text = await wait_screen(pilot, elapsed)
                if elapsed(text) >= first + 0.5:
                    return text
                await pilot.pause(0.05)
            raise AssertionError(f"the elapsed time stayed at {elapsed(text)} s (from {first} s):\n{text}")

        text = await moved()
        assert state.events == events and "phase: hang" in status(text)
        await pilot.press("c")
        await wait_for(pilot, lambda: state.run.finished, 20)
        app.frame()
        await wait_screen(pilot, lambda t: status(t) and "phase:" not in status(t))


@sync
@pytest.mark.slow
async def test_a_runs_error_wraps_whole():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pick(app, pilot, "fault_crash")
        await pilot.press("r")
        state = app.model.controller.runs[0]
        await wait_for(pilot, lambda: state.run.finished, 30)
        app.frame(force=True)
        message = state.document()["errors"][-1]["message"]
        assert len(message) > 60
        await wait_screen(pilot, lambda t: flat(message) in flat(t))


def test_the_header_drops_the_file_name_before_cutting():
    from gputop.tui.model import view

    parts = ["host h", "H200", "driver 580", "CUDA 13.0", "10 Hz", "REPLAY demo.jsonl.gz (PAUSED)", "phase: matmul bf16"]
    assert view.fit_parts(parts, 60) == "H200 │ 10 Hz │ REPLAY (PAUSED) │ phase: matmul bf16"
    assert "demo.jsonl.gz" in view.fit_parts(parts, 200)


@sync
async def test_the_header_keeps_the_phase_whole_at_80():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 120)
        phase = app.model.sampler.latest()["phase"]
        header = (await wait_screen(pilot, lambda t: f"phase: {phase}" in t.split("\n")[0])).split("\n")[0]
        assert "…" not in header


@sync
async def test_every_workload_name_is_visible_before_a_run_and_the_results_return_with_one():
    """No run yet: the list (and the form) have the page, every workload's name shows without scrolling;
    a run shown: the list gives its rows back to the results."""
    from test_tui import ROOT

    from gputop.runner.registry import Registry

    shipped = list(Registry([ROOT / "workloads"]))
    assert len(shipped) >= 9
    app = make(specs=shipped)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pick(app, pilot, shipped[0].name)
        app.frame(force=True)
        ol = app.query_one("#wl-list")
        lines = (await wait_screen(pilot, "no run yet")).split("\n")
        listed = [s.name for s in shipped if any(re.search(rf"[│ ]\s*{re.escape(s.name)}\s*[│ ]", r[:26]) for r in lines)]
        assert listed == [s.name for s in shipped], lines
        assert ol.max_scroll_y == 0
        tall = ol.size.height

        class Finished:  # a finished run, as the results view sees one
            finished, t0 = True, None

            def document(self):
                return {"workload": "roofline", "status": "ok", "points": [], "phases": [], "wall_time_s": 1.0}

        app.model.controller.runs.append(RunState(run=Finished(), name="roofline", target="CPU"))
        app.frame(force=True)
        await wait_screen(pilot, lambda t: "run 1/1" in t and "no run yet" not in t)
        assert ol.size.height < tall


def test_the_header_drops_the_rate_before_cutting_the_phase():
    """A finished replay's long phase at 80 columns (issue 24: "phase: sweep: se…"): the rate and
    "(finished)" go first; the phase stays whole."""
    from gputop.tui.model import view

    parts = ["host vm", "H200", "driver 580", "CUDA 13.0", "10 Hz", "REPLAY roofline-H200.jsonl.gz (finished)",
             "phase: ceilings: tensor (torch matmul)"]
    budget = 80 - 9 - len("  [2]")  # InfoBar's room at 80 columns
    text = view.fit_parts(parts, budget)
    assert len(text) <= budget and text.endswith("phase: ceilings: tensor (torch matmul)")
    assert "REPLAY" in text and "H200" in text
    assert "10 Hz" in view.fit_parts(parts, 200) and "(finished)" in view.fit_parts(parts, 200)


@sync
async def test_g_with_one_gpu_says_there_is_one():
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 5)
        assert len(app.model.statics) == 1
        await pilot.press("g")
        await wait_screen(pilot, lambda t: "one GPU" in flat(t))  # in the key bar, at 80 columns
        assert any("one GPU" in n for n in notes(app)) and app.model.selected == 0


@sync
async def test_the_monitor_comes_back_when_a_followed_replay_ends():
    """No live GPU: a replayed recording's telemetry is the monitor's while it plays; once it is over the
    session's own source (here the demo) is back, and a notification says so."""
    from gputop.runner.recording import read_recording, recording_label, shipped
    from gputop.tui.model.runs import RecordingSpec

    path = next(p for p in shipped() if "roofline" in p.name)
    app = make()
    app.model.config.run_speed = 50.0
    async with app.run_test(size=SIZE) as pilot:
        await step(app, pilot, 5)
        assert app.model.no_gpu
        home = app.model.source
        spec = RecordingSpec(name=recording_label(read_recording(path)["header"]), workload="roofline",
                             path=str(path), description="")
        app.workloads.replay(spec)
        assert app.model.source is not home and app.model.home_source is home
        state = app.model.controller.runs[-1]
        await wait_for(pilot, lambda: app.model.source is home, 30)
        assert not state.active and app.model.home_source is None
        assert any("the replay of roofline is over: the monitor shows" in n and n.endswith("again") for n in notes(app))


@sync
@pytest.mark.slow
async def test_the_sm_and_dram_charts_keep_a_title_and_two_rows_through_the_whole_demo():
    """(issue 35: in the tiny-kernels phase the verdict's advice took a row more and the DRAM chart went.) At every
    phase of the demo at 80x24 both charts show with a title and two rows; where the advice was cut for them its
    last row ends in "…", and it comes back whole where there is room."""
    app = make()
    async with app.run_test(size=SIZE) as pilot:
        seen_cut = seen_whole = False
        for _ in range(40):  # the 41 s trace, a second at a time
            await step(app, pilot, 10)
            await step(app, pilot, 0)  # the layout after the verdict gave up its rows
            sm, dram = app.monitor.charts[:2]
            assert sm.display and dram.display, app.screen_text()
            assert sm.size.height >= 3 and dram.size.height >= 3, app.screen_text()
            text = app.screen_text()
            assert "SM activity " in text and re.search(r"^ DRAM bandwidth \d+%  last", text, re.M), text
            v = app.monitor.verdict
            if v is not None and v.advice:
                cut = "…" in text.split("advice: ", 1)[-1].split("SM activity", 1)[0]
                seen_cut |= cut
                seen_whole |= not cut
            assert len(rows(app)) == 24 and all(len(r) <= 80 for r in rows(app))
        assert seen_cut and seen_whole
