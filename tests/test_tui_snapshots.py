"""Snapshot tests (pytest-textual-snapshot) of the main screens, driven by real recordings:
the demo trace (H200) replayed tick by tick to a fixed tick, and recorded run documents
(tests/data/tui_runs/). Update after a deliberate change: pytest tests/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from textual.widgets import Static

from gputop.runner.params import format_value
from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, TuiConfig
from gputop.tui.help import HelpScreen
from gputop.tui.model.runs import RunState
from gputop.workload import Param
from pilot_util import wait_for, wait_screen

HERE = Path(__file__).parent
DEMO = HERE.parent / "gputop" / "data" / "demo.jsonl.gz"
RUNS = HERE / "data" / "tui_runs"
# Ticks of the demo trace: 120 = bf16 matmul, 170 = device copy (memory-bound), 250 = tiny kernels.
MATMUL, COPY, TINY = 120, 170, 250


class RecordedRun:
    """A finished run as the results view sees it, from a recorded run document."""

    finished = True
    proc = None

    def __init__(self, doc: dict):
        self.doc = doc
        self.status = doc["status"]
        self.points = doc["points"]

    def document(self) -> dict:
        return json.loads(json.dumps(self.doc))

    def cancel(self) -> None:
        pass


def spec_from_doc(doc: dict) -> SimpleNamespace:
    """A picker entry for a recorded run: its workload name and the parameter values it ran with
    (so the snapshots do not change when a workload's description or defaults do)."""
    params = [Param(k, "str", format_value(v), help="as recorded") for k, v in doc["params"].items()]
    return SimpleNamespace(name=doc["workload"], description=f"recorded run of {doc['workload']}", params=params,
                           quick={}, cpu=None, needs=[], supports_cpu=True)


def make(path: Path = DEMO, runs: tuple[str, ...] = ()) -> GputopApp:
    docs = [json.loads((RUNS / f"{name}.json").read_text()) for name in runs]
    app = GputopApp(TuiConfig(ReplaySource(str(path), speed=float("inf")), start_sampler=False, fps=0,
                              hostname="snapshot-host", specs=[spec_from_doc(d) for d in docs], device="cpu"))
    for doc in docs:
        app.model.controller.runs.append(RunState(run=RecordedRun(doc), name=doc["workload"], target="CPU"))
    return app


def at_tick(n: int, keys: tuple[str, ...] = ()):
    """Replay ``n`` ticks, draw one frame, then press ``keys`` and wait until what they open is there
    (the workloads page's form, the help screen). No frame timer runs (fps=0): what a snapshot shows
    is these frames, and the charts' own refill when the layout gives them their size."""

    async def run_before(pilot) -> None:
        app = pilot.app
        await pilot.pause()  # the first layout
        for _ in range(n):
            app.model.sampler.step()
        app.frame(force=True)
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        if "2" in keys:
            form = app.workloads.form
            await wait_for(pilot, lambda: form.loaded is not None and form.loaded[0] is app.workloads.spec)
        if "question_mark" in keys:
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.query(Static)
                           and app.screen.query_one(Static).size.height > 0)
        await pilot.pause()

    return run_before


def rewrite(tmp_path: Path, name: str, header_fn, sample_fn) -> Path:
    out = tmp_path / name
    with gzip.open(DEMO, "rt") as f, gzip.open(out, "wt") as g:
        for line in f:
            row = json.loads(line)
            if row.get("type") == "header":
                header_fn(row)
            elif row.get("type") == "tick":
                row["gpus"] = sample_fn(row["gpus"][0])
            g.write(json.dumps(row) + "\n")
    return out


def test_monitor_80x24(snap_compare):
    assert snap_compare(make(), terminal_size=(80, 24), run_before=at_tick(MATMUL))


@pytest.mark.slow
def test_monitor_120x40_memory_bound(snap_compare):
    assert snap_compare(make(), terminal_size=(120, 40), run_before=at_tick(COPY))


@pytest.mark.slow
def test_monitor_200x50(snap_compare):
    assert snap_compare(make(), terminal_size=(200, 50), run_before=at_tick(TINY))


def test_help(snap_compare):
    assert snap_compare(make(), terminal_size=(100, 34), run_before=at_tick(10, ("question_mark",)))


def test_two_gpus(snap_compare, tmp_path):
    def header(h):
        h["devices"].append(dict(h["devices"][0], index=1))

    def gpus(s):
        return [s, dict(s, index=1, sm_active_pct=0.0, util_gpu_pct=0.0, tensor_pct=0.0, power_w=75.0)]

    path = rewrite(tmp_path, "two-gpus.jsonl.gz", header, gpus)
    assert snap_compare(make(path), terminal_size=(120, 40), run_before=at_tick(MATMUL, ("g",)))


def test_no_gpm(snap_compare, tmp_path):
    """A GPU without GPM (the demo's numbers with the GPM fields gone): n/a and why."""
    gpm = ("sm_active_pct", "sm_occupancy_pct", "int_pct", "tensor_pct", "dfma_pct", "hmma_pct", "imma_pct",
           "dram_bw_pct", "fp64_pct", "fp32_pct", "fp16_pct", "nvlink_rx_bps", "nvlink_tx_bps")

    def header(h):
        h["devices"][0].update(gpm_supported=False, name="NVIDIA A100-SXM4-80GB", compute_capability=[8, 0],
                               architecture="Ampere")

    path = rewrite(tmp_path, "no-gpm.jsonl.gz", header, lambda s: [dict(s, **{f: None for f in gpm})])
    assert snap_compare(make(path), terminal_size=(120, 40), run_before=at_tick(MATMUL))


def test_roofline_results(snap_compare):
    assert snap_compare(make(runs=("roofline_cpu",)), terminal_size=(120, 40),
                        run_before=at_tick(MATMUL, ("2",)))


@pytest.mark.slow
def test_roofline_results_80x24(snap_compare):
    assert snap_compare(make(runs=("roofline_cpu",)), terminal_size=(80, 24),
                        run_before=at_tick(MATMUL, ("2",)))


@pytest.mark.slow
def test_throughput_results(snap_compare):
    assert snap_compare(make(runs=("amp_cpu", "dataloader_cpu")), terminal_size=(120, 40),
                        run_before=at_tick(MATMUL, ("2",)))


@pytest.mark.slow
def test_cudagraphs_results(snap_compare):
    assert snap_compare(make(runs=("cudagraphs_cpu",)), terminal_size=(120, 40),
                        run_before=at_tick(TINY, ("2",)))


def test_older_runs_stay_viewable_and_save(tmp_path):
    """[ and ] walk through the finished runs; s saves the one shown (pilot test on recorded runs)."""
    import asyncio

    async def go():
        app = make(runs=("amp_cpu", "dataloader_cpu"))
        app.model.config.save_dir = str(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await at_tick(MATMUL)(pilot)
            await pilot.press("2")
            await wait_screen(pilot, ("run 2/2", "dataloader ok"))
            await pilot.press("escape", "left_square_bracket")
            await wait_screen(pilot, ("run 1/2", "amp ok"))
            await pilot.press("s")
            await wait_for(pilot, lambda: list(tmp_path.glob("gputop-amp-*.json")))
        saved = list(tmp_path.glob("gputop-amp-*.json"))
        assert len(saved) == 1 and json.loads(saved[0].read_text())["workload"] == "amp"

    asyncio.run(go())


@pytest.mark.slow
def test_roofline_results_h100_80x24(snap_compare):
    """A real H100 run (bench/gpu/roofline_gpu.sh, 2026-11-23): every roof, both variants, at 80x24."""
    assert snap_compare(make(runs=("roofline_h100",)), terminal_size=(80, 24),
                        run_before=at_tick(MATMUL, ("2",)))


@pytest.mark.slow
def test_roofline_results_h100_160x48(snap_compare):
    assert snap_compare(make(runs=("roofline_h100",)), terminal_size=(160, 48),
                        run_before=at_tick(MATMUL, ("2",)))


def focused_field(typed: tuple[str, ...]):
    """The workloads page, Tab until a parameter field has the focus (the first: ``n``), then type ``typed``
    there (its cursor does not blink: one screen to compare)."""

    async def run_before(pilot) -> None:
        app = pilot.app
        await at_tick(MATMUL, ("2",))(pilot)
        for _ in range(5):
            if (app.focused.id or "").startswith("param-"):
                break
            await pilot.press("tab")
            await pilot.pause()
        field = app.focused
        assert field.id == "param-n", field
        field.cursor_blink = False
        await pilot.press("end", *["backspace"] * len(field.value), *typed)
        await wait_for(pilot, lambda: field.value == "".join(typed))
        await pilot.pause()

    return run_before


@pytest.mark.slow
def test_focused_parameter_shows_its_value_80x24(snap_compare):
    """A focused field keeps its row and shows what is typed (not a tall focus border with the value hidden)."""
    assert snap_compare(make(runs=("roofline_cpu",)), terminal_size=(80, 24), run_before=focused_field(tuple("8192")))


@pytest.mark.slow
def test_focused_parameter_shows_its_value_160x48(snap_compare):
    assert snap_compare(make(runs=("roofline_cpu",)), terminal_size=(160, 48),
                        run_before=focused_field(tuple("8192")))


@pytest.mark.slow
def test_esc_leaves_the_form_then_q_and_question_mark_are_keys_again():
    """Esc, as the form's hint says, leaves a parameter field for the workload list: ? then opens the help
    and q quits, rather than being typed into the field."""
    import asyncio

    async def go():
        app = make(runs=("roofline_cpu",))
        async with app.run_test(size=(80, 24)) as pilot:
            await focused_field(tuple("64"))(pilot)
            field = app.focused
            await wait_screen(pilot, "n                64")  # the value being typed is on the screen
            await pilot.press("escape")
            await pilot.pause()
            assert app.focused is app.query_one("#wl-list") and field.value == "64"
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_code is not None)
            assert field.value == "64" and app.return_code == 0  # neither ? nor q went into the field

    asyncio.run(go())


# the picker as gputop --demo lists it on a machine without a GPU: every workload and its recording
DEMO_LIST = [n for w in ("allreduce", "amp", "batchsize", "cudagraphs", "dataloader", "fusion", "offload", "roofline",
                         "transfer") for n in (w, f"{w} (recorded H200)")]


def make_listing() -> GputopApp:
    app = make(runs=("roofline_cpu",))
    app.model.config.specs[:] = [SimpleNamespace(**{**vars(app.model.config.specs[0]), "name": n}) for n in DEMO_LIST]
    app.model.controller.runs.clear()  # no run shown: the list and the form have the page
    return app


@pytest.mark.slow
def test_workload_list_fits_its_names_80x24(snap_compare):
    """The list as wide as its longest name (no name wraps) and as tall as its entries (issue 24)."""
    assert snap_compare(make_listing(), terminal_size=(80, 24), run_before=at_tick(MATMUL, ("2",)))


@pytest.mark.slow
def test_workload_list_fits_its_names_160x48(snap_compare):
    assert snap_compare(make_listing(), terminal_size=(160, 48), run_before=at_tick(MATMUL, ("2",)))


def test_every_workload_name_is_whole_on_one_row_at_80x24():
    """The list is as wide as its longest name: each name on one row, the last ones (roofline, transfer)
    above the fold with no run shown (pilot test; the snapshots above show it)."""
    import asyncio

    async def go():
        app = make_listing()
        async with app.run_test(size=(80, 24)) as pilot:
            await at_tick(MATMUL, ("2",))(pilot)
            rows = (await wait_screen(pilot, lambda t: f"▊ {DEMO_LIST[-1]} " in t)).split("\n")
            for name in DEMO_LIST:
                assert any(f"▊ {name} " in r for r in rows), name

    asyncio.run(go())


@pytest.mark.slow
def test_results_evidence_wraps_whole_at_80x24():
    """A real H100 roofline's evidence (three rows at 80 columns) wraps whole under the plot, which keeps its rows."""
    import asyncio
    import re

    async def go():
        app = make(runs=("roofline_h100",))
        async with app.run_test(size=(80, 24)) as pilot:
            await at_tick(MATMUL, ("2",))(pilot)
            evidence = app.model.controller.runs[0].document()["verdict"]["evidence_text"]
            assert len(evidence) > 2 * 80
            text = await wait_screen(pilot, lambda t: re.sub(r"\s+", " ", "evidence: " + evidence)
                                     in re.sub(r"\s+", " ", t))
            assert "100T│" in text and "10T│" in text and "1T│" in text  # the plot is still there

    asyncio.run(go())


def test_v_shows_the_whole_verdict_in_the_plots_place_at_80x24():
    """The H100 roofline's advice runs past the rows its plot leaves at 80x24: its line ends "… (v)"; v shows the
    verdict whole where the plot was, v again the plot."""
    import asyncio
    import re

    async def go():
        app = make(runs=("roofline_h100",))
        async with app.run_test(size=(80, 24)) as pilot:
            await at_tick(MATMUL, ("2",))(pilot)
            advice = re.sub(r"\s+", " ", app.model.controller.runs[0].document()["verdict"]["advice"])
            text = await wait_screen(pilot, "… (v)")
            assert advice not in re.sub(r"\s+", " ", text)
            await pilot.press("v")
            text = await wait_screen(pilot, lambda t: "advice: " + advice in re.sub(r"\s+", " ", t))
            assert "v: the plot again" in re.sub(r"\s+", " ", text) and "100T│" not in text
            await pilot.press("v")
            await wait_screen(pilot, "100T│")  # the plot is back

    asyncio.run(go())
