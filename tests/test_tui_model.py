"""The TUI's model without an app: what the pages read, what changes it, and that each change announces itself
(gputop/tui/model.py imports no Textual, so none of this needs a running app)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gputop.telemetry.trace import ReplaySource
from gputop.tui.config import TuiConfig
from gputop.tui.model import DEVICE, GPU, RUN, SOURCE, TuiModel
from gputop.tui.model.runs import RunState
from pilot_util import DEMO

RECORDED = Path(__file__).parent / "data" / "recorded" / "roofline-cpu.jsonl.gz"


def model(path=DEMO, **kw) -> tuple[TuiModel, list[str]]:
    m = TuiModel(TuiConfig(ReplaySource(str(path), speed=float("inf")), start_sampler=False, specs=[], **kw))
    heard: list[str] = []
    m.observe(heard.append)
    return m, heard


def test_the_model_imports_no_textual():
    code = "import sys, gputop.tui.model; print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_gpu_selection_wraps_and_announces_itself():
    m, heard = model(gpus=[0, 0])  # the demo's GPU twice: two positions
    assert m.select_gpu(1) and m.selected == 1 and heard == [GPU]
    assert m.select_gpu(1) and m.selected == 0
    assert m.select_position(0) and heard == [GPU, GPU, GPU]
    one, heard_one = model()
    assert not one.select_gpu(1) and one.selected == 0 and heard_one == []  # one GPU: nothing to select
    assert one.nvml_index() == one.statics[0]["index"]


def test_a_replay_keeps_its_device_and_rate():
    m, heard = model(device="cuda")
    assert m.no_gpu and m.device == "cpu"  # a replay has no live GPU: runs stay on the CPU
    m.set_device("cuda")
    assert m.device == "cpu" and heard == []
    assert not m.step_rate(1)  # a replay plays at its recorded rate
    assert m.where() == "CPU"


def test_the_run_shown_steps_between_runs_and_announces_itself():
    m, heard = model()
    assert m.shown_state() is None
    m.step_run(-1)  # no runs: nothing to show, nothing said
    assert heard == []
    runs = [RunState(run=object(), name=f"run{i}", target="CPU") for i in range(3)]
    m.controller.runs.extend(runs)
    assert m.shown_state() is runs[-1]  # the latest by default
    m.step_run(-1)
    m.step_run(-5)
    assert m.shown_state() is runs[0] and heard == [RUN, RUN]
    m.show_run(None)
    assert m.shown_state() is runs[-1]


def test_following_a_recording_switches_the_source_and_coming_home_closes_it():
    m, heard = model()
    home, old_sampler = m.source, m.sampler

    class Played:
        run = type("Run", (), {"path": str(RECORDED)})()

    m.follow_recording(Played())
    assert heard == [SOURCE] and m.home_source is home and m.source.path == str(RECORDED)
    assert m.sampler is not old_sampler and m.controller.sampler is m.sampler and m.statics == [] and m.selected == 0
    assert m.sticky.observe in m.sampler.listeners
    m.go_home()
    assert heard == [SOURCE, SOURCE] and m.source is home and m.home_source is None
    assert len(m.statics) == 1 and len(m.peaks) == 1
    m.go_home()  # home already: nothing happens
    assert heard == [SOURCE, SOURCE]
    m.close()


def test_a_read_only_view_refuses_control_and_says_how():
    m, _ = model(read_only=True)
    assert "--serve-control" in m.refusal("run a workload")
    assert model()[0].refusal("run a workload") is None
    assert "read-only" in m.header_parts(None)


def test_loading_the_workloads_is_announced_once():
    m = TuiModel(TuiConfig(ReplaySource(str(DEMO), speed=float("inf")), start_sampler=False))
    heard: list[str] = []
    m.observe(heard.append)
    assert not m.specs_loaded
    m.load_specs()
    m.load_specs()
    assert m.specs_loaded and "roofline" in [s.name for s in m.specs] and heard == ["specs"]
    assert DEVICE not in heard
