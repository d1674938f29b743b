"""Pilot tests of the TUI's main flows, on the real demo trace (replayed by hand, tick by tick).

Workloads run for real as child processes on the CPU (roofline with tiny parameters) or are the
runner's fault workloads (fault_hang: runs until cancelled).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from gputop.runner.registry import Registry
from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, HelpScreen, TuiConfig
from pilot_util import pick, sync, wait_for

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "gputop" / "data" / "demo.jsonl.gz"
FAULTS = Path(__file__).parent / "fault_workloads"


def specs():
    return list(Registry([ROOT / "workloads", FAULTS]))


def make(path=DEMO, **kw) -> GputopApp:
    kw.setdefault("hostname", "test-host")
    kw.setdefault("specs", specs())
    kw.setdefault("device", "cpu")
    kw.setdefault("fps", 0)  # no frame timer: the tests draw with frame(), so nothing waits on a timer
    return GputopApp(TuiConfig(ReplaySource(str(path), speed=float("inf")), start_sampler=False, **kw))


async def step(app, pilot, n: int) -> None:
    for _ in range(n):
        app.sampler.step()
    app.frame(force=True)
    await pilot.pause()


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


@sync
async def test_monitor_shows_the_device_and_survives_resizes():
    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 120)  # into the bf16 matmul phase
        text = app.screen_text()
        assert "H200" in text and "SM activity" in text and "Tensor active" in text
        assert "verdict:" in text or "diagnosis: n/a" in text
        for w, h in ((200, 50), (80, 24), (60, 20), (120, 40)):
            await pilot.resize_terminal(w, h)
            await step(app, pilot, 3)
            assert "SM activity" in app.screen_text()
        assert app.has_class("-narrow") is False
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.has_class("-narrow") and app.has_class("-short")


def chart_rows_from_scratch(app, chart, field):
    """What a chart shows, computed from the whole window at once (the charts are fed incrementally)."""
    from gputop.tui import charts

    window = app.sampler.window(chart.span)
    ts = [t["t"] for t in window]
    vs = [t["gpus"][app.positions[app.selected]].get(field) for t in window]
    w, h = chart.wh[0] - chart.EDGE, chart.wh[1]
    buckets = charts.bucket(ts, vs, ts[-1], chart.span, 2 * w)
    return charts.braille_area(buckets, w, h - 1, chart.lo, chart.hi)


@sync
async def test_incremental_charts_match_a_redraw_from_scratch(tmp_path):
    app = make(two_gpu_trace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        for n, size in ((45, None), (31, (160, 48)), (200, None), (17, (120, 40)), (60, None), (5, "g"), (40, None)):
            if size == "g":
                await pilot.press("g")  # another GPU: the charts refill from its history
            elif size:
                await pilot.resize_terminal(*size)
                await pilot.pause()
            for _ in range(n):  # frames after every few ticks, as the timer would draw them
                app.sampler.step()
                if _ % 3 == 0:
                    app.frame()
            app.frame()
            await pilot.pause()
            checked = 0
            for spec, chart in zip(app.monitor.chart_specs, app.monitor.charts):
                if chart.display and chart.wh[1] > 1 and not chart.stale:
                    shown = [row for row, _style in chart._lines[1:]]
                    assert shown == chart_rows_from_scratch(app, chart, spec.field), (spec.title, n, size)
                    checked += 1
            assert checked == 5 and any(row.strip() for row in shown), (n, size)


@sync
async def test_keys_pause_rate_help_and_pages():
    app = make()
    async with app.run_test(size=(100, 30)) as pilot:
        await step(app, pilot, 20)
        await pilot.press("p")
        assert app.sampler.paused and "PAUSED" in app.screen_text()
        await pilot.press("p")
        assert not app.sampler.paused
        await pilot.press("plus")  # a replay keeps its recorded rate
        assert app.sampler.rate_hz == 10.0 and "10 Hz" in app.screen_text()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("2")
        await pilot.pause()
        assert app.page == "workloads" and "AMP vs FP32" in app.screen_text()
        await pilot.press("1")
        assert app.page == "monitor"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


@sync
async def test_switch_gpu_on_a_two_gpu_trace(tmp_path):
    app = make(two_gpu_trace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 120)
        text = app.screen_text()
        assert "▶ GPU0" in text and "GPU1" in text  # the strip lists both
        assert "GPU 0 NVIDIA H200" in text
        await pilot.press("g")
        await pilot.pause()
        text = app.screen_text()
        assert app.selected == 1 and "GPU 1 NVIDIA H200 (copy)" in text and "▶ GPU1" in text
        assert "2x H200" not in text  # different names are listed apart in the header
        await pilot.press("G")
        assert app.selected == 0


@sync
async def test_run_roofline_on_cpu_see_points_and_save(tmp_path):
    app = make(save_dir=str(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 30)
        await pilot.press("2")
        await pilot.pause()
        await pick(app, pilot, "roofline")
        app.query_one("#param-n").value = "65536"
        app.query_one("#param-k").value = "1,4,16,64"
        app.query_one("#param-runs").value = "2"
        await pilot.press("r")
        assert len(app.controller.runs) == 1
        run = app.controller.runs[0].run
        await wait_for(pilot, lambda: run.finished, 60)
        app.frame()
        await pilot.pause()
        text = app.screen_text()
        assert run.status == "ok", run.document()["errors"]
        assert "roofline ok" in text and "●" in text and "measured" in text
        await pilot.press("s")
        await pilot.pause()
        saved = list(tmp_path.glob("gputop-roofline-*.json"))
        assert len(saved) == 1
        doc = json.loads(saved[0].read_text())
        assert doc["workload"] == "roofline" and len(doc["points"]) == 4


@sync
async def test_bad_parameter_is_refused_with_a_message():
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        await pick(app, pilot, "roofline")
        app.query_one("#param-n").value = "-5"
        await pilot.press("r")
        await pilot.pause()
        assert app.controller.runs == []
        assert any("parameter 'n'" in str(n.message) for n in app._notifications)


async def start_hang(app, pilot):
    """Pick fault_hang on the workloads page, run it, and wait until it is measuring (it runs until
    cancelled). Returns its run state."""
    await pilot.press("2")
    await pilot.pause()
    await pick(app, pilot, "fault_hang")
    await pilot.press("r")
    state = app.controller.runs[0]
    await wait_for(pilot, lambda: len(state.run.points) == 1, 20)
    return state


@sync
async def test_cancel_a_running_workload_and_one_run_per_device():
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        state = await start_hang(app, pilot)
        await pilot.press("r")  # a second run on the same device is refused
        await pilot.pause()
        assert len(app.controller.runs) == 1
        await pilot.press("c")
        await wait_for(pilot, lambda: state.run.finished, 20)
        assert state.run.status == "interrupted"
        app.frame()
        await pilot.pause()
        assert "fault_hang interrupted" in app.screen_text()


@sync
async def test_quit_stops_the_running_workload():
    app = make(fps=4)  # with the frame timer, as gputop runs: it fires while the app shuts down
    async with app.run_test(size=(100, 30)) as pilot:
        state = await start_hang(app, pilot)
        await pilot.press("escape", "q")  # leave the list, then quit
        await wait_for(pilot, lambda: state.run.finished, 20)
    assert state.run.status == "interrupted"
    assert state.run.proc.poll() is not None


@sync
async def test_opens_without_any_gpu():
    nvml = Nvml()
    if nvml.available():
        pytest.skip("this machine has a GPU")
    app = GputopApp(TuiConfig(LiveSource(nvml, gpus=[]), start_sampler=False, hostname="nogpu", specs=[],
                              device="cpu", na_reason=nvml.error))
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 3)
        text = app.screen_text()
        assert "no GPU" in text and "Host CPU" in text
        await pilot.press("plus")
        assert app.sampler.rate_hz == 20.0
        await pilot.press("minus", "minus")
        assert app.sampler.rate_hz == 5.0 and "5 Hz" in app.screen_text()
        await pilot.press("g", "p", "2", "r")
        await pilot.pause()


def test_main_tui_needs_a_terminal():
    """Without a terminal: one line on stderr and exit 2; textual is imported only by the TUI itself."""
    import subprocess
    import sys

    code = ("import sys, gputop.cli, gputop.tui; assert 'textual' not in sys.modules; "
            "raise SystemExit(gputop.cli.main(['--demo', '--no-color']))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "needs a terminal" in p.stderr


def test_no_color_reaches_textual(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    assert make().no_color
    monkeypatch.delenv("NO_COLOR")
    assert not make().no_color


@sync
async def test_rate_out_of_range_and_replay_end():
    import argparse

    from gputop.tui.app import make_app

    with pytest.raises(ValueError):
        make_app(argparse.Namespace(demo=True, replay=None, speed=1.0, gpu=None, rate=500.0, device="cuda",
                                    timeout=None))
    app = make()
    async with app.run_test(size=(100, 30)) as pilot:
        while app.sampler.step() is not None:
            pass
        app.frame(force=True)
        await pilot.pause()
        assert "(finished)" in app.screen_text()


@pytest.mark.gpu
@sync
async def test_live_gpu_monitor_and_roofline_on_the_gpu():
    """On a GPU machine: the live monitor shows the GPU's name and GPM numbers; the roofline runs on it."""
    nvml = Nvml()
    if not nvml.available():
        pytest.skip("no NVML / GPU here")
    src = LiveSource(nvml)
    if not src.indices:
        pytest.skip("no GPU")
    app = GputopApp(TuiConfig(src, hostname="gpu", specs=specs(), device="cuda"))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: len(app.sampler.window(None)) >= 10, 10)
        app.frame(force=True)
        await pilot.pause()
        text = app.screen_text()
        assert app.statics[0]["name"].replace("NVIDIA ", "") in text and "SM activity" in text
        if app.statics[0].get("gpm_supported"):
            assert "n/a (needs Hopper+ GPM)" not in text
        try:
            import cupy  # noqa: F401
        except ImportError:
            return
        await pilot.press("2")
        await pilot.pause()
        await pick(app, pilot, "roofline")
        for k, v in {"k": "1,8,64", "ceilings": "false", "runs": "2", "variants": "fma"}.items():
            app.query_one(f"#param-{k}").value = v
        await pilot.press("r")
        run = app.controller.runs[0].run
        await wait_for(pilot, lambda: run.finished, 120)
        assert run.status == "ok", run.document()["errors"]
        app.frame()
        await pilot.pause()
        assert "roofline ok" in app.screen_text() and "theoretical" in app.screen_text()
