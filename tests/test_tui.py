"""Pilot tests of the TUI's main flows, on the real demo trace (replayed by hand, tick by tick).

Workloads run for real as child processes on the CPU (roofline with tiny parameters) or are the
runner's fault workloads (fault_hang: runs until cancelled).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pynvml
import pytest

from fake_nvml import FakeNvml
from gputop.runner.registry import Registry
from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.trace import ReplaySource
import gputop.format as fmt
from gputop.tui.app import GputopApp, HelpScreen, TuiConfig
from gputop.tui.model import view
from gputop.runner.child import GRACE_S
from pilot_util import (DEMO, FAULTS, chart_rows_from_scratch, fault_specs, h200_static, notes, pick, screen_text,
                        step, sync, two_gpu_trace, wait_for, wait_screen)

ROOT = Path(__file__).resolve().parents[1]


def specs():
    return list(Registry([ROOT / "workloads", FAULTS]))


def make(path=DEMO, **kw) -> GputopApp:
    kw.setdefault("hostname", "test-host")
    kw.setdefault("specs", specs())
    kw.setdefault("device", "cpu")
    kw.setdefault("fps", 0)  # no frame timer: the tests draw with frame(), so nothing waits on a timer
    return GputopApp(TuiConfig(ReplaySource(str(path), speed=float("inf")), start_sampler=False, **kw))


@sync
async def test_monitor_shows_the_device_and_survives_resizes():
    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 120)  # into the bf16 matmul phase
        text = await wait_screen(pilot, ("H200", "SM activity", "Tensor active"))
        assert "verdict:" in text or "diagnosis: n/a" in text
        for w, h in ((200, 50), (80, 24), (60, 20), (120, 40)):
            await pilot.resize_terminal(w, h)
            await step(app, pilot, 3)
            await wait_screen(pilot, "SM activity")
        assert app.has_class("-narrow") is False
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.has_class("-narrow") and app.has_class("-short")


@sync
@pytest.mark.slow
async def test_the_tests_screen_text_is_the_screenshots():
    """What the tests read (the compositor's rows: pilot_util.screen_text) is the text of Textual's public SVG
    screenshot (app.screen_text, which bench/tools/tui_screens.py keeps): on the monitor, with the help over it, and
    on the workloads page."""
    app = make()
    async with app.run_test(size=(100, 30)) as pilot:
        await step(app, pilot, 120)
        assert screen_text(app) == app.screen_text()
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert screen_text(app) == app.screen_text()
        await pilot.press("escape", "2")
        await wait_screen(pilot, "roofline")
        assert screen_text(app) == app.screen_text()


@pytest.mark.slow
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
                app.model.sampler.step()
                if _ % 3 == 0:
                    app.frame()
            app.frame()
            await pilot.pause()
            checked = 0
            for spec, chart in zip(app.monitor.chart_specs, app.monitor.charts):
                if chart.display and chart.wh[1] > 1 and not chart.stale:
                    shown = [row if isinstance(row, str) else row.plain  # shaded rows: (row, style, shade)
                             for row in (r[0] if isinstance(r, tuple) else r for r in chart._lines[1:])]
                    assert shown == chart_rows_from_scratch(app, chart, spec.field), (spec.title, n, size)
                    checked += 1
            assert checked == 5 and any(row.strip() for row in shown), (n, size)


@sync
async def test_keys_pause_rate_help_and_pages():
    app = make()
    async with app.run_test(size=(100, 30)) as pilot:
        await step(app, pilot, 20)
        await pilot.press("p")
        assert app.model.sampler.paused
        await wait_screen(pilot, "PAUSED")
        await pilot.press("p")
        assert not app.model.sampler.paused
        await pilot.press("plus")  # a replay keeps its recorded rate
        assert app.model.sampler.rate_hz == 10.0
        await wait_screen(pilot, "10 Hz")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("2")
        first = next(iter(Registry()))  # the list starts with the first workload by name, selected
        await wait_screen(pilot, first.description[:30])
        assert app.page == "workloads"
        await pilot.press("1")
        assert app.page == "monitor"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


@sync
@pytest.mark.slow
async def test_switch_gpu_on_a_two_gpu_trace(tmp_path):
    app = make(two_gpu_trace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 120)
        await wait_screen(pilot, ("▶ GPU0", "GPU1", "GPU 0 NVIDIA H200"))  # the strip lists both
        await pilot.press("g")
        text = await wait_screen(pilot, ("GPU 1 NVIDIA H200 (copy)", "▶ GPU1"))
        assert app.model.selected == 1
        assert "2x H200" not in text  # different names are listed apart in the header
        await pilot.press("G")
        assert app.model.selected == 0


@pytest.mark.slow
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
        assert len(app.model.controller.runs) == 1
        run = app.model.controller.runs[0].run
        await wait_for(pilot, lambda: run.finished, 60)
        assert run.status == "ok", run.document()["errors"]
        app.frame()
        await wait_screen(pilot, ("roofline ok", "●", "measured"))
        await pilot.press("s")
        await wait_for(pilot, lambda: list(tmp_path.glob("gputop-roofline-*.json")))
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
        assert app.model.controller.runs == []
        assert any("parameter 'n'" in n for n in notes(app))


async def start_hang(app, pilot):
    """Pick fault_hang on the workloads page, run it, and wait until it is measuring (it runs until
    cancelled). Returns its run state."""
    await pilot.press("2")
    await pilot.pause()
    await pick(app, pilot, "fault_hang")
    await pilot.press("r")
    state = app.model.controller.runs[0]
    await wait_for(pilot, lambda: len(state.run.points) == 1, 20)
    return state


@pytest.mark.slow
@sync
async def test_cancel_a_running_workload_and_one_run_per_device():
    app = make(grace_s=0.5)  # gputop --grace 0.5
    async with app.run_test(size=(120, 40)) as pilot:
        state = await start_hang(app, pilot)
        assert state.run.grace_s == 0.5 and state.run.child.grace_s == 0.5
        await pilot.press("r")  # a second run on the same device is refused
        await pilot.pause()
        assert len(app.model.controller.runs) == 1
        await pilot.press("c")
        await wait_for(pilot, lambda: state.run.finished, 20)
        assert state.run.status == "interrupted"
        app.frame()
        await wait_screen(pilot, "fault_hang interrupted")


@sync
@pytest.mark.slow
async def test_quit_stops_the_running_workload():
    app = make(fps=4)  # with the frame timer, as gputop runs: it fires while the app shuts down
    async with app.run_test(size=(100, 30)) as pilot:
        state = await start_hang(app, pilot)
        await pilot.press("escape", "q")  # leave the list, then quit
        await wait_for(pilot, lambda: state.run.finished, 20)
    assert state.run.status == "interrupted"
    assert state.run.child.done  # the child and its process group are gone


@sync
async def test_opens_without_any_gpu():
    nvml = Nvml()
    if nvml.available():
        pytest.skip("this machine has a GPU")
    app = GputopApp(TuiConfig(LiveSource(nvml, gpus=[]), start_sampler=False, hostname="nogpu", specs=[],
                              device="cuda", na_reason=nvml.error, fps=0))
    assert app.model.device == "cpu"  # workloads run on the CPU here, whatever the command line said
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 3)
        await wait_screen(pilot, ("no GPU", "Host CPU"))
        await pilot.press("plus")
        assert app.model.sampler.rate_hz == 20.0
        await pilot.press("minus", "minus")
        assert app.model.sampler.rate_hz == 5.0
        await wait_screen(pilot, "5 Hz")
        await pilot.press("g", "p", "2", "r", "d")
        await pilot.pause()
        assert app.model.device == "cpu" and notes(app)[-1] == (
            f"no live GPU in this session: NVML: {nvml.error}; workloads run on the CPU")


NO_GPU_LINE = "no live GPU in this session: --demo replays a recorded trace; workloads run on the CPU"


@pytest.mark.slow
@sync
async def test_demo_runs_workloads_on_the_cpu_and_refuses_the_gpu(monkeypatch):
    assert "fault_ok" in fault_specs(monkeypatch)
    demo = ReplaySource(str(DEMO), speed=float("inf"), loop=True)  # gputop --demo
    app = GputopApp(TuiConfig(demo, start_sampler=False, fps=0, device="cuda"))  # --device defaults to cuda
    assert app.model.device == "cpu"
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 5)
        await pilot.press("2")
        await pick(app, pilot, "fault_ok")
        await wait_screen(pilot, "runs on: CPU (no live GPU)")
        await pilot.press("escape", "d")  # ask for the GPU: refused, with the reason, in one line
        assert app.model.device == "cpu" and notes(app)[-1] == NO_GPU_LINE
        await pilot.press("r")
        run = app.model.controller.runs[0].run
        await wait_for(pilot, lambda: run.finished, 30)
        assert run.status == "ok" and run.child.returncode == 0 and run.document()["device"]["kind"] == "cpu"
        app.frame()
        await wait_screen(pilot, ("fault_ok ok", "on CPU"))
        t = time.monotonic()
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None, 10)
    assert app.return_code == 0 and time.monotonic() - t < GRACE_S  # nothing running: q waits for no grace period


@sync
@pytest.mark.slow
async def test_a_workload_without_cpu_mode_says_it_needs_a_gpu(monkeypatch):
    ok = next(s for s in Registry([FAULTS]) if s.name == "fault_ok")
    gpu_only = dataclasses.replace(ok, name="gpu_only", params=[p for p in ok.params if p.name != "device"], cpu=None)
    assert not gpu_only.supports_cpu
    app = make(specs=[gpu_only], device="cuda")
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 5)
        await pilot.press("2")
        await pick(app, pilot, "gpu_only")
        await wait_screen(pilot, "needs a GPU; there is no live GPU in this session")
        await pilot.press("r")
        assert app.model.controller.runs == []
        assert notes(app)[-1] == "gpu_only needs a GPU: no live GPU in this session (--replay plays a recorded trace)"


@pytest.mark.slow
@sync
async def test_a_run_that_cannot_start_ends_at_once_with_its_error(monkeypatch):
    """Live NVML with a GPU (a fake at the pynvml boundary), which NVML stops listing before the run
    starts: the run is over at once with the reason, c finds nothing running, r may run again, q is prompt."""
    fault_specs(monkeypatch)
    fake = FakeNvml(h200_static())
    app = GputopApp(TuiConfig(LiveSource(Nvml(fake)), start_sampler=False, fps=0, device="cuda"))
    assert app.model.no_gpu is None and app.model.device == "cuda"
    async with app.run_test(size=(120, 40)) as pilot:
        await step(app, pilot, 3)
        await pilot.press("2")
        await pick(app, pilot, "fault_ok")
        await wait_screen(pilot, "runs on: GPU 0 ")
        fake.fail["nvmlDeviceGetCount"] = pynvml.NVML_ERROR_UNKNOWN
        await pilot.press("escape", "r")
        state = app.model.controller.runs[0]
        assert state.run.finished and not app.model.controller.active  # not "running" with no process
        why = "cannot start the workload: no GPU with NVML index 0 (0 GPU(s))"
        assert notes(app)[-1] == f"fault_ok did not start: {why}"
        await wait_screen(pilot, ("fault_ok error", f"error: {why}", "on GPU 0"))
        await pilot.press("c")
        assert notes(app)[-1] == "nothing is running"
        await pilot.press("r")  # not refused as "already running"
        assert len(app.model.controller.runs) == 2 and notes(app)[-1].startswith("fault_ok did not start")
        t = time.monotonic()
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None, 10)
    assert app.return_code == 0 and time.monotonic() - t < GRACE_S  # nothing running: q waits for no grace period


@sync
async def test_gpm_n_a_says_the_reason_nvml_gave():
    """Live (fake) NVML that refuses GPM (NoPermission): the panel and the charts say so, at 80x24."""
    fake = FakeNvml(h200_static(), fail={"nvmlGpmQueryDeviceSupport": pynvml.NVML_ERROR_NO_PERMISSION})
    app = GputopApp(TuiConfig(LiveSource(Nvml(fake)), start_sampler=False, fps=0, specs=[]))
    async with app.run_test(size=(80, 24)) as pilot:
        await step(app, pilot, 3)
        text = await wait_screen(pilot, ("SM activity                             n/a (NVML: NoPermission)",
                                         "SM activity n/a (NVML: NoPermission)"))  # the panel's row, the chart's title
        assert fmt.GPM_NA not in text


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


@pytest.mark.slow
@sync
async def test_the_rate_comes_from_the_command_line_and_a_replay_ends():
    from gputop.cli import parse
    from gputop.tui.app import make_app

    other = make_app(parse(["--demo", "--rate", "4"])[0])  # the range itself is the cli's to check (test_cli)
    assert other.model.sampler.rate_hz == 4.0 and other.model.config.rate_hz == 4.0
    other.model.source.close()
    app = make()
    async with app.run_test(size=(100, 30)) as pilot:
        while app.model.sampler.step() is not None:
            pass
        app.frame(force=True)
        await wait_screen(pilot, "(finished)")


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
        await wait_for(pilot, lambda: len(app.model.sampler.window(None)) >= 10, 10)
        app.frame(force=True)
        text = await wait_screen(pilot, (app.model.statics[0]["name"].replace("NVIDIA ", ""), "SM activity"))
        if app.model.statics[0].get("gpm_supported"):
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
        run = app.model.controller.runs[0].run
        await wait_for(pilot, lambda: run.finished, 120)
        assert run.status == "ok", run.document()["errors"]
        app.frame()
        await wait_screen(pilot, ("roofline ok", "theoretical"))


def test_quitting_after_a_stop_signal_keeps_the_runs_grace_period(tmp_path, monkeypatch):
    """A signal cancels the runs; the quit that follows (stop_all) must not cancel them a second time,
    which the supervisor would take as "kill now"."""
    import signal as sig

    from gputop.runner.registry import Registry
    from gputop.tui.model.runs import RunController

    monkeypatch.setenv("GPUTOP_WORKLOADS_PATH", str(Path(__file__).parent / "fault_workloads"))
    spec = Registry().get("fault_hang")
    ready = tmp_path / "ready"
    controller = RunController()
    state = controller.start(spec, {"obey": True, "ready_file": str(ready)}, "cpu", None)
    end = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < end and not state.run.finished, state.run.document()["errors"]
        time.sleep(0.02)
    controller.cancel(signum=sig.SIGTERM)
    controller.stop_all()
    assert state.run.finished and not state.run.child.killed and not state.run.child.kill_asked
    doc = state.run.document()
    assert doc["status"] == "interrupted" and doc["signal"] == "SIGTERM" and doc["exit_code"] == 143


@sync
@pytest.mark.slow
async def test_the_first_tab_on_the_workloads_page_goes_to_the_first_parameter_and_keys_are_typed_there():
    """(issue 35: the first Tab focused the scrolling pane around the form, drawn as nothing; a 1 typed then showed
    the monitor page.) Every Tab lands on something drawn: the list, then each parameter in turn."""
    app = make(specs=specs())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: app.workloads.form.loaded is not None)
        inputs = [w.id for w in app.workloads.form.query("Input")]
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == inputs[0], app.focused
        before = app.focused.value
        await pilot.press("end", "1")
        await pilot.pause()
        assert app.page == "workloads" and app.focused.value == before + "1"
        for _ in inputs:  # on through the form, and round to the list
            await pilot.press("tab")
            await pilot.pause()
            assert app.focused is not None and (app.focused.id or "").startswith(("param-", "wl-list")), app.focused
