"""Recorded workload runs (``gputop --run NAME --record-run FILE``) replayed without a GPU: in the TUI the
replayed run feeds the same events into the same views, paced as recorded, and its results view shows
what the live run's showed. The recording in tests/data/recorded/ is a real CPU run of the roofline
(``gputop --run roofline --device cpu --quick --record-run ...``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop.runner.recording import RecordedRun, read_recording, shipped
from gputop.runner.registry import Registry
from gputop.telemetry.trace import ReplaySource, TraceError
from gputop.tui.model.runs import RecordingSpec, RunState, with_recordings
from pilot_util import hold_recorded_runs, pick, sync, wait_for, wait_screen
from test_tui import make

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "recorded" / "roofline-cpu.jsonl.gz"
TINY = ["--param", "n=65536", "--param", "k=1,2,5", "--param", "runs=1", "--param", "warmup=0", "--param", "ceilings=false"]


class Finished:
    """A finished run holding a given document (the live run's, as --json printed it)."""

    finished, t0, status = True, None, "ok"

    def __init__(self, doc: dict):
        self.doc = doc

    def document(self) -> dict:
        return json.loads(json.dumps(self.doc))


def record_tiny(tmp_path: Path) -> tuple[Path, dict]:
    """A real CPU roofline run, recorded; returns (the recording, the document the live run printed)."""
    path = tmp_path / "tiny.jsonl.gz"
    r = subprocess.run([sys.executable, "-m", "gputop", "--run", "roofline", "--device", "cpu", *TINY,
                        "--record-run", str(path), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "recorded the run" in r.stderr
    return path, json.loads(r.stdout)


@pytest.mark.slow
@sync
async def test_a_recorded_cpu_run_replays_in_the_tui_with_the_live_results(tmp_path):
    path, live = record_tiny(tmp_path)
    app = make(recordings=[str(path)])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await pick(app, pilot, "roofline (recorded CPU)")  # listed next to the workload it recorded
        names = [s.name for s in app.model.specs]
        assert names.index("roofline (recorded CPU)") == names.index("roofline") + 1
        await wait_screen(pilot, "replay the recorded CPU run of roofline")
        await pilot.press("r")
        state = app.model.controller.runs[-1]
        assert state.target == "recording" and state.name == "roofline"
        await wait_for(pilot, lambda: state.run.finished, 30)
        app.frame(force=True)
        await pilot.pause()
        replayed = app.workloads.results.plain
        # the live run's document, shown by the same view
        app.model.controller.runs.append(RunState(run=Finished(live), name="roofline", target="CPU"))
        app.model.show_run(len(app.model.controller.runs) - 1)
        app.frame(force=True)
        await pilot.pause()
        shown = app.workloads.results.plain
        # the same view, but for the status line, which says the replay's machine: "on CPU of host H, recorded"
        assert shown.split("\n")[1:] == replayed.split("\n")[1:]
        live_status, replay_status = shown.split("\n")[0], replayed.split("\n")[0]
        assert "on CPU" in live_status and "recorded" not in live_status
        assert "on CPU of host " in replay_status and ", recorded" in replay_status
        assert "roofline ok" in replayed and "●" in replayed


def test_events_come_in_order_and_no_sooner_than_recorded():
    rec = read_recording(RECORDED)
    got: list[tuple[float, dict]] = []
    speed = 4.0
    partial: list[dict] = []

    def on_event(ev: dict) -> None:
        got.append((time.monotonic() - run.t0, ev))
        if ev["event"] == "point" and not partial:  # as the first point plays (however slow the machine is)
            partial.append(run.document())  # a partial document, built the live way from the events so far

    run = RecordedRun(RECORDED, speed=speed, on_event=on_event)
    run.start()
    assert run.wait(60), "the playback did not end in 60 s"
    (seen_partial,) = partial
    assert seen_partial["status"] == "running"
    assert len(seen_partial["points"]) < len(rec["document"]["points"])
    played = [ev for _, ev in got if ev["event"] != "finished"]
    assert [e["event"]["event"] for e in rec["events"] if e["event"]["event"] != "finished"] == [e["event"] for e in played]
    for (t, ev), row in zip(got, [e for e in rec["events"] if e["event"]["event"] != "finished"]):
        assert t >= row["t"] / speed - 0.01, (ev["event"], t, row["t"])
    assert got[-1][1]["event"] == "finished" and run.status == "ok"
    assert run.document() == rec["document"]  # over: the document the live run ended with
    assert [p["name"] for p in run.document()["phases"]] == [m["label"] for m in rec["marks"]]


@pytest.mark.slow
def test_stopping_a_replay_keeps_what_was_played():
    run = RecordedRun(RECORDED, speed=1.0)
    run.start()
    end = time.monotonic() + 30
    while not run.points:
        assert time.monotonic() < end and not run.finished, "no point played"
        time.sleep(0.02)
    run.stop()
    assert run.wait(10)
    doc = run.document()
    assert doc["status"] == "interrupted" and doc["interrupted"] and doc["exit_code"] == 130
    assert 1 <= len(doc["points"]) < len(read_recording(RECORDED)["document"]["points"])


def test_a_recording_is_also_a_trace_and_bad_files_say_why(tmp_path):
    src = ReplaySource(str(RECORDED), speed=float("inf"))  # gputop --replay FILE shows its telemetry
    assert src.ticks and [label for _, label in src.marks] == ["ceilings", "sweep: seed kernel (mul+add)"]
    trace = tmp_path / "plain.jsonl"
    trace.write_text(json.dumps({"type": "header", "format": "gputop-trace", "version": 1, "devices": []}) + "\n")
    with pytest.raises(TraceError, match="not a recorded run"):
        read_recording(trace)
    specs, errors = with_recordings([], [str(trace), str(RECORDED)])
    assert [s.name for s in specs] == ["roofline (recorded CPU)"] and "not a recorded run" in errors[0]
    assert isinstance(specs[0], RecordingSpec)


def test_record_run_goes_with_run():
    r = subprocess.run([sys.executable, "-m", "gputop", "--record-run", "x.jsonl.gz"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "--record-run goes with --run NAME" in r.stderr


@pytest.mark.slow
@sync
async def test_replaying_a_recording_plays_its_run_along_with_its_telemetry(monkeypatch):
    from gputop.tui.app import GputopApp, TuiConfig

    over = hold_recorded_runs(monkeypatch)  # the header is checked while it plays
    app = GputopApp(TuiConfig(ReplaySource(str(RECORDED), speed=float("inf")), start_sampler=False, fps=0,
                              device="cpu", specs=[], recordings=[str(RECORDED)], autoplay=str(RECORDED),
                              run_speed=1.0))
    async with app.run_test(size=(160, 48)) as pilot:
        state = app.model.controller.runs[0]
        assert state.target == "recording" and state.name == "roofline"
        for _ in range(12):  # the recording's own ticks
            app.model.sampler.step()
        phase = app.model.source.mark_at(app.model.sampler.latest()["t"])
        app.frame(force=True)
        # the monitor's header: the recorded phase marks (while the run plays: once it is over the monitor goes home)
        assert phase
        await wait_screen(pilot, f"phase: {phase}")
        assert state.active
        over.set()
        await wait_for(pilot, lambda: state.run.finished, 30)
        app.frame(force=True)
        await wait_screen(pilot, "roofline ok")  # the run's results, beside the charts


@pytest.mark.slow
@sync
async def test_the_monitor_follows_a_replayed_run_then_comes_home(monkeypatch):
    hold_recorded_runs(monkeypatch)  # the replay plays on until the live run below stops it
    app = make(recordings=[str(RECORDED)])  # the demo trace (an H200): no live GPU
    async with app.run_test(size=(120, 40)) as pilot:
        app.model.sampler.step()
        await pilot.press("2")
        await pick(app, pilot, "roofline (recorded CPU)")
        await pilot.press("r")
        await pilot.pause()
        # the recording's own telemetry (a CPU run)
        assert app.model.source.path == str(RECORDED) and app.model.statics == []
        for _ in range(10):
            app.model.sampler.step()
        await pilot.press("1")
        text = await wait_screen(pilot, ("REPLAY roofline-cpu.jsonl.gz", "Host CPU", "no GPU"))
        assert "H200" not in text and "SM activity" not in text  # nothing left of the demo's GPU
        await pilot.press("2")
        await pick(app, pilot, "fault_ok")
        await pilot.press("r")  # a live run: the session's own source again
        await pilot.pause()
        assert app.model.source.label == "demo.jsonl.gz" and app.model.statics[0]["name"] == "NVIDIA H200"
        app.model.sampler.step()
        await pilot.press("1")
        await wait_screen(pilot, ("SM activity", "H200"))


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.name)
def test_the_shipped_gpu_runs_get_the_same_verdicts_from_the_analysis_today(path):
    """Each shipped recording (a real H200 run) keeps the document its run printed: its workload's analyze(),
    run again on that document without its verdicts, gives every phase and the run the same verdict - the
    analysis (the lessons, gputop/lessons/NAME.py, found by the workload's name) judges real GPU runs as it did:
    the same class, subclass, confidence, evidence and numbers in its sentence (whose words may have been bettered:
    "1 kernel per call" for "1 kernel(s)", issue 35)."""
    doc = read_recording(path)["document"]
    redo = json.loads(json.dumps(doc))
    for ph in redo.get("phases") or []:
        ph.pop("verdict", None)
    redo.pop("verdict", None)
    out = Registry().get(doc["workload"]).analyze(redo)
    redo = out if isinstance(out, dict) else redo
    def judged(v):
        if not v:
            return v
        return {**{k: x for k, x in v.items() if k not in ("evidence_text", "advice")},
                "numbers": re.findall(r"\d+(?:\.\d+)?", v.get("evidence_text") or "")}
    assert doc["phases"] and [judged(ph.get("verdict")) for ph in redo["phases"]] == \
        [judged(ph.get("verdict")) for ph in doc["phases"]]
    assert judged(redo.get("verdict")) == judged(doc.get("verdict")) and doc.get("verdict")
