"""The attribution view of ``gputop --tui --run --profile -- CMD`` (issue 27; gputop/tui/attribution.py).

Snapshots of the view at 80x24 and 160x48 on a real window: tests/data/attribution/cpu_window.json is the
answer the profile loader wrote for a 1 s window of tests/test_attribution.py's TRAIN program (torch 2.13 on a
CPU; captured once by running TRAIN under ProfileWindows with its env() and ask()), analysed here as gputop
analyses it. A pilot test runs the real TUI on a real torch child: w asks for a window, a shows it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from gputop.session.profiling import ProfileWindows, window_from_answers
from gputop.tui.command.attribution import AttributionPanel, attribution_lines
from pilot_util import sync, wait_for, wait_screen
from test_attribution import SPANS, TRAIN, _gpu_window, _named
from test_tui_command import command_app

CPU_WINDOW = Path(__file__).parent / "data" / "attribution" / "cpu_window.json"
ASKED = {"seq": 1, "reason": "asked for by the user", "t": 4.0}
ENDED_AT = 1_800_000_000.0


def cpu_window() -> dict:
    return {**window_from_answers(ASKED, [json.loads(CPU_WINDOW.read_text())], True), "ended_at": ENDED_AT}


def gpu_window() -> dict:
    """A window built by hand: a GEMM and an elementwise kernel, the GPU idle 60% of it (SPANS' breakdown)."""
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    ew = _named("void at::native::vectorized_elementwise_kernel")
    ops = [{"name": "aten::addmm", "count": 40, "self_cpu_us": 900.0, "cpu_us": 1200.0, "device_us": 600.0},
           {"name": "aten::add_", "count": 50, "self_cpu_us": 300.0, "cpu_us": 350.0, "device_us": 400.0}]
    raw = _gpu_window([(gemm, 40, 600.0), (ew, 50, 400.0)], wall_s=0.0025, busy_s=0.001, steps=10, ops=ops)
    raw.update(status="ok", pid=77, kernel_spans=[list(s) for s in SPANS])
    return {**window_from_answers(ASKED, [raw], True), "ended_at": ENDED_AT}


class PanelApp(App):
    """The view alone, as the command's TUI shows it in the monitor page's place."""

    def __init__(self, win):
        super().__init__()
        self.win = win

    def compose(self) -> ComposeResult:
        yield AttributionPanel(id="attribution")


def shown(win):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app.query_one(AttributionPanel).show(win, now=ENDED_AT + 12.4, seconds=1.0)
        await pilot.pause()
    return run_before


def test_view_of_a_real_cpu_window_80x24(snap_compare):
    assert snap_compare(PanelApp(cpu_window()), terminal_size=(80, 24), run_before=shown(cpu_window()))


def test_view_of_a_real_cpu_window_160x48(snap_compare):
    assert snap_compare(PanelApp(cpu_window()), terminal_size=(160, 48), run_before=shown(cpu_window()))


def plain(lines: list[Text]) -> list[str]:
    return [t.plain for t in lines]


def rows(lines: list[str], width: int) -> int:
    return sum(max(1, -(-len(ln) // width)) for ln in lines)


def test_the_real_cpu_window_reads_as_host_ops_with_their_categories():
    w = cpu_window()
    lines = plain(attribution_lines(w, 78, 20, now=ENDED_AT + 12.4))
    assert lines[0].startswith(f"profiler window 1  pid {w['pid']}  1.0 s, 12 s ago")
    assert lines[1].startswith("GPU busy/idle: n/a, host ops only (") and "not initialised CUDA" in lines[1]
    assert lines[2].startswith("host op time: ") and "GEMM/conv" in lines[2] and "ops a step" in lines[2]
    assert any(ln.startswith("top ops (self CPU time)") for ln in lines)
    assert lines[-1].startswith("advice: host op time (no GPU kernels in the window)")
    assert rows(lines, 78) <= 20  # wrapped to the width, the view fits its rows


def test_a_gpu_window_shows_busy_idle_by_reason_and_both_tables():
    w = gpu_window()
    wide = plain(attribution_lines(w, 158, 46, now=ENDED_AT + 3))
    assert wide[1] == ("GPU busy 40%  idle 60%: host wait 47%, kernel wait 2%, other 11% of the window (HTA)")
    assert wide[2].startswith("kernel time: GEMM/conv 60%  elementwise 40%  (90 kernels, 9 a step)")
    assert wide[4].startswith("top kernels (GPU time)") and "│ top ops (GPU time)" in wide[4]
    assert "aten::addmm" in wide[5] and "cutlass" in wide[5]  # the largest of each, side by side
    assert wide[-1].startswith("advice: the GPU idles 60% of the profiled window waiting on the host (host wait 79%")
    narrow = plain(attribution_lines(w, 78, 22, now=ENDED_AT + 3))
    heads = [i for i, ln in enumerate(narrow) if ln.startswith("top ")]
    assert [narrow[i].split(" (")[0] for i in heads] == ["top kernels", "top ops"]  # one above the other
    assert rows(narrow, 78) <= 22


def test_no_window_yet_says_how_to_get_one():
    lines = plain(attribution_lines(None, 78, 20, seconds=2.0))
    assert lines[0] == "profiler windows: none yet" and "w asks the command for one now (2 s" in lines[1]


@pytest.mark.slow
@sync
async def test_w_asks_for_a_window_and_a_shows_it(tmp_path):
    go = tmp_path / "go"
    prog = TRAIN.replace("while time.time() - t0 < float(sys.argv[1]):",
                         f"while not os.path.exists({str(go)!r}) and time.time() - t0 < float(sys.argv[1]):")
    profile = ProfileWindows(0.5, first_at=None)
    app = command_app(tmp_path, prog, profile=profile, argv=["60"])
    s = app.lifecycle.session
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            assert ("w", "window") in app.key_items()
            await wait_for(pilot, lambda: any(t.frameworks for t in profile.targets()), timeout=60)  # torch in
            await pilot.press("w")
            await wait_for(pilot, lambda: any(n.startswith("asked for window 1") for n in app.notes))
            await pilot.press("w")  # one at a time
            await wait_for(pilot, lambda: any("still being recorded" in n for n in app.notes) or
                           profile.latest() is not None, timeout=60)
            await wait_for(pilot, lambda: any("profiler window 1 is in: a shows it" in n for n in app.notes),
                           timeout=60)
            await pilot.press("a")
            view = (f"profiler window 1  pid {s.pid}", "host op time:", "top ops (self CPU time)", "advice: ")
            text = await wait_screen(pilot, view)
            assert len(text.split("\n")) == 24
            await pilot.press("a")  # back to the monitor
            await wait_screen(pilot, lambda t: "host op time:" not in t)
            go.write_text("")
            await wait_for(pilot, lambda: s.over, timeout=60)
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_code is not None)
    finally:
        go.write_text("")
    assert app.return_value == 3
    w = s.doc["attribution"]["windows"][0]
    assert w["status"] == "ok" and w["asked_because"] == "asked for by the user"


@sync
async def test_w_without_profile_says_how_in_one_line(tmp_path):
    app = command_app(tmp_path, "import time; time.sleep(30)")
    async with app.run_test(size=(80, 24)) as pilot:
        assert ("w", "window") not in app.key_items()
        await pilot.press("w")
        await wait_for(pilot, lambda: any("need --profile" in n for n in app.notes))
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)


def test_profile_goes_with_the_tuis_command_and_its_watch(capsys):
    from gputop import cli

    args, command = cli.parse(["--tui", "--run", "--profile", "--profile-seconds", "2", "--", "python", "t.py"])
    assert args.profile and args.tui and args.profile_seconds == 2.0 and command == ["python", "t.py"]
    args, command = cli.parse(["--tui", "--profile", "--watch", str(os.getpid())])
    assert args.profile and args.watch == os.getpid() and command == []
