"""The culprit of a recorded stall where people meet it: ``--replay F --json`` and its text, ``--export``'s
``gputop_culprit_info`` series (and the alert rule that reads it: test_cluster_rules.py), and the TUI's stack view
(``k``). The trace (tests/data/traces/culprit/hang_idle_stacks.jsonl.gz, tests/data/make_culprit_trace.py) is a real
2-H100 hang whose ranks' stacks were read while it stalled (a real gloo job's: rank 0 sleeps at gloo_job.py:30
outside the loop, rank 1 waits in all_reduce); none of this needs py-spy, torch or a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputop.analysis.peaks import compute_peaks
from gputop.export.collector import ExportedGpu, ExportOptions, GputopCollector, _label, gpu_labels
from gputop.headless.replay import replay_document
from gputop.session.report import render_text
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.trace import ReplaySource
from gputop.tui.config import TuiConfig
from gputop.tui.model import TuiModel
from pilot_util import sync, wait_for, wait_screen

TRACE = Path(__file__).parent / "data" / "traces" / "culprit" / "hang_idle_stacks.jsonl.gz"
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "gputop" / "schema" / "monitor.schema.json").read_text())
SLEEPS = "is not in a collective: in rank_main at gloo_job.py:30 (`time.sleep(seconds)  # the culprit: out of the loop`)"


def test_the_replay_of_a_recorded_stall_names_its_culprit_rank_with_its_line():
    doc = replay_document(str(TRACE))
    jsonschema.validate(json.loads(json.dumps(doc)), SCHEMA)
    c = doc["culprit"]
    assert c["kind"] == "outside" and c["culprit_ranks"] == [0] and c["culprit_gpus"] == [1]
    assert c["where"].endswith(SLEEPS) and c["where"].startswith("rank 0 (pid ")
    assert c["stall_began_s"] > 8 and c["named_after_s"] >= 0 and c["named_at_s"] >= c["stall_began_s"]
    v0, v1 = (g["verdict"] for g in doc["gpus"])
    assert (v1["class"], v1["subclass"]) == ("culprit", "outside") and SLEEPS in v1["evidence_text"]
    assert v0["class"] == "stalled" and v0["notes"][0].startswith("from the ranks' stacks: rank 0 (pid")


def test_replay_json_from_the_command_line_and_its_text():
    out = subprocess.run([sys.executable, "-m", "gputop", "--replay", str(TRACE), "--json"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["culprit"]["where"].endswith(SLEEPS)
    text = render_text(json.loads(out.stdout))  # the text report of the same document: the culprit in one line
    lines = [ln for ln in text.splitlines() if ln.startswith("culprit: ")]
    assert len(lines) == 1 and SLEEPS in lines[0] and "after the stall began" in lines[0], text[-800:]


@pytest.mark.slow
def test_export_names_the_culprit_rank_in_an_info_series():
    src = ReplaySource(str(TRACE), speed=float("inf"))
    static = src.static()
    sampler = Sampler(src)
    gpus = [ExportedGpu(i, s, compute_peaks(s), gpu_labels(s, "n1")) for i, s in enumerate(static)]
    collector = GputopCollector(sampler, gpus, ExportOptions(live=False))
    named = None
    while not src.finished and named is None:  # tick by tick until the stall's stacks row is in force
        sampler.step()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        fams = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
        named = next(iter(fams["gputop_culprit_info"].samples), None)
    assert named is not None, "no culprit exported over the whole stall"
    assert named.value == 1.0
    lab = named.labels
    assert (lab["gpu"], lab["rank"], lab["kind"]) == ("1", "0", "outside") and lab["pid"].isdigit()
    assert lab["where"].endswith(" ".join(SLEEPS.split())) and lab["UUID"] == static[1]["uuid"]


def test_a_culprits_place_is_one_printable_cut_line_in_a_label():
    assert _label("in f at a.py:3 (`x =\t'\x1b[31m'`)\nnext") == "in f at a.py:3 (`x = ' [31m'`) next"
    long = _label("x" * 500)
    assert len(long) == 200 and long.endswith("…")


def test_the_tui_model_shows_every_ranks_stack_the_culprit_first():
    m = TuiModel(TuiConfig(ReplaySource(str(TRACE), speed=float("inf")), start_sampler=False, specs=[]))
    assert m.stack_view() == []  # before the stall: nothing read
    assert m.ask_stacks().startswith("a recording: the stacks read while it ran")
    while not m.source.finished and not m.stack_view():
        m.sampler.step()
    lines = m.stack_view()
    assert lines[0].startswith("rank 0 (pid ") and SLEEPS in lines[0]
    culprit = lines.index(next(ln for ln in lines if ln.startswith("culprit: rank 0")))
    waits = lines.index(next(ln for ln in lines if ln.startswith("rank 1 (pid ")))
    assert culprit < waits and "in all_reduce at gloo_job.py:32" in lines[waits]
    assert any(ln.strip().startswith("rank_main  ") and "gloo_job.py:30" in ln for ln in lines[culprit:waits])


@sync
async def test_k_shows_every_ranks_stack_in_the_tui_of_a_recorded_stall():
    from gputop.tui.app import GputopApp

    app = GputopApp(TuiConfig(ReplaySource(str(TRACE), speed=float("inf")), start_sampler=False, specs=[]))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("k")  # before the stall: nothing recorded yet, said so
        await wait_screen(pilot, ["the ranks' stacks", "a recording: the stacks read while it ran"])
        await pilot.press("escape")
        while not app.model.source.finished and not app.model.stack_view():
            app.model.sampler.step()
        await pilot.press("k")
        text = await wait_screen(pilot, ["culprit: rank 0 (pid", "rank 1 (pid"])
        assert "gloo_job.py:30" in text and "in all_reduce at gloo_job.py:32" in text
        assert text.index("culprit: rank 0") < text.index("GPU 0): in all_reduce")  # the culprit's group first
        await pilot.press("k")  # k closes it too
        await wait_for(pilot, lambda: type(app.screen).__name__ != "StacksScreen")


@sync
async def test_the_monitor_names_the_culprit_under_the_stalled_gpus_verdict_at_80x24():
    """Live on 4 H100s (bench/gpu/tui_culprit_tmux.sh, 2026-11-27) the stalled GPU's verdict said who waits but not
    who holds them up: that took k. Now the verdict panel says it in a line of its own, even at 80x24."""
    from gputop.tui.app import GputopApp

    app = GputopApp(TuiConfig(ReplaySource(str(TRACE), speed=float("inf")), start_sampler=False, specs=[]))
    async with app.run_test(size=(80, 24)) as pilot:
        while not app.model.source.finished and not app.model.stack_view():
            app.model.sampler.step()
        for _ in range(100):  # the stall's verdict, judged on the ticks after the read
            if app.model.source.finished:
                break
            app.model.sampler.step()
        text = await wait_screen(pilot, ["verdict: stalled", "culprit: rank 0 (pid"])
        line = next(ln for ln in text.splitlines() if "culprit: rank 0 (pid" in ln)
        # one row at 80 columns still says where: the culprit's GPU and line, not the judgement's whole sentence
        assert "GPU 1): in rank_main at gloo_job.py:30" in line and len(line.rstrip()) <= 80, text



@sync
async def test_a_verdict_panel_held_to_few_rows_keeps_the_verdict_and_the_culprit():
    """80x24 with many GPUs: the page may leave the verdict panel two rows (its MIN_ROWS); the advice goes first,
    then the culprit's and the verdict's rows shrink to one each, and the panel never takes more than it was left."""
    from textual.app import App

    from gputop.analysis.verdict import Verdict
    from gputop.tui.monitor.panels import VerdictPanel

    record = {"sentence": "rank 1 (pid 42, GPU 1) is not in a collective: in fault at job.py:89 "
                          "(`time.sleep(3600)`), called from <module> at job.py:136; " + "x " * 60}
    v = Verdict(cls="stalled", confidence=0.95, evidence_text="a collective is stuck: " + "evidence " * 40,
                advice="advice " * 60, job={"culprit": record})

    class Panel(App):
        model = type("Model", (), {"statics": [{}, {}]})()  # two GPUs: what the panel asks of the app's model

        def compose(self):
            yield VerdictPanel()

    app = Panel()
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(VerdictPanel)
        panel.show(v, "last 10 s")
        await pilot.pause()
        whole = [t.plain for t in panel._lines]
        assert [ln.split(":")[0] for ln in whole if ln[:1] != " "][:1] == ["verdict"] and len(whole) > 4, whole
        for limit in (2, 3, 4):
            panel.limit(limit)
            await pilot.pause()
            lines = [t.plain for t in panel._lines]
            assert len(lines) <= limit, (limit, lines)
            assert lines[0].startswith("verdict: stalled") and any(ln.startswith("culprit: rank 1") for ln in lines)


@sync
async def test_the_culprit_once_named_stays_named_while_its_job_waits():
    """Live on 4 H100s (bench/gpu/tui_culprit_tmux.sh, 2026-11-27) the command's culprit line came on screen 15 s
    into a stall and was gone a moment later. Fed the recorded stall tick by tick, the live verdicts name the culprit
    on every tick from the first that names it for as long as a GPU of its job stays stalled. (Before the wait's
    start was kept, gputop/analysis/live.py: named at 17.0 s, gone at 17.6-17.8 s, 18.6 s, ...: the stalled GPU's
    regime found to start again later made the read that named the culprit one from before the wait.)"""
    from gputop.tui.app import GputopApp
    from gputop.tui.command.panel import job_culprit

    app = GputopApp(TuiConfig(ReplaySource(str(TRACE), speed=float("inf")), start_sampler=False, specs=[]))
    async with app.run_test(size=(80, 24)):
        model, named, lost, pids = app.model, [], [], set()
        while not model.source.finished:
            model.sampler.step()
            tick = model.sampler.latest()
            pids |= {p.get("pid") for g in tick["gpus"] for p in g.get("processes") or []}  # (not every tick's)
            verdicts = model.live.snapshot().verdicts()
            said = job_culprit(verdicts, lambda: pids)
            stalled = any(v is not None and v.cls == "stalled" for v in verdicts)
            if said:
                named.append(tick["t"])
            elif named and stalled:
                lost.append(tick["t"])
        assert named, "the recorded stall's culprit was never named"
        assert not lost, f"named from {named[0]:.1f} s, then not at {lost[:5]} while a GPU stayed stalled"
