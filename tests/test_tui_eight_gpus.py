"""8 GPUs on screen and in ``--replay --json``, from a trace composed of two REAL 4-GPU recordings (no 8-GPU machine
was lent): tests/data/traces/composed_8xh100/ (scripts/compose_trace.py; its README says what it is). GPUs 0-3 are
comms_mlp's (an all-reduce that dominates the step), 4-7 straggler's (GPU 5 does 3x the math, the others wait).
Snapshots at 80x24 and 160x48, replayed to a fixed tick like tests/test_tui_snapshots.py; update after a deliberate
change: pytest tests/test_tui_eight_gpus.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.analysis.verdict import display_name
from gputop.tui.monitor.strip import strip_labels
from pilot_util import wait_screen
from test_tui_snapshots import at_tick, make

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "tests" / "data" / "traces"
COMPOSED = TRACES / "composed_8xh100" / "composed_8xh100.jsonl.gz"
A = TRACES / "corpus_multi_h100x4" / "comms_mlp.jsonl.gz"
B = TRACES / "corpus_multi_h100x4" / "straggler.jsonl.gz"
TICK = 200  # 20 s: comms_mlp's GPUs in their all-reduce loop, straggler's in theirs


def test_monitor_8_gpus_80x24(snap_compare):
    assert snap_compare(make(COMPOSED), terminal_size=(80, 24), run_before=at_tick(TICK))


@pytest.mark.slow
def test_monitor_8_gpus_160x48(snap_compare):
    assert snap_compare(make(COMPOSED), terminal_size=(160, 48), run_before=at_tick(TICK))


@pytest.mark.slow
def test_monitor_8_gpus_gpu_3_selected_80x24(snap_compare):
    assert snap_compare(make(COMPOSED), terminal_size=(80, 24), run_before=at_tick(TICK, ("g", "g", "g")))


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_every_gpu_and_its_verdict_and_the_selected_panel_are_on_screen(size):
    """Each GPU's verdict (one of its names, and its confidence) is on the screen whole, with the selected GPU's
    panel and verdict under it; g moves the selection by one GPU (pilot test on the real app)."""

    async def go():
        app = make(COMPOSED)
        async with app.run_test(size=size) as pilot:
            await at_tick(TICK)(pilot)
            page = app.monitor
            verdicts = page.verdicts
            assert len(verdicts) == 8 and all(v is not None for v in verdicts)
            assert {v.cls for v in verdicts} >= {"comms-bound", "compute-bound"}
            text = await wait_screen(pilot, ("NVIDIA H100 80GB HBM3  Hopper", "verdict: communication-bound",
                                             "advice: "))
            for i, v in enumerate(verdicts):
                cells = [f"GPU {i}  {label} {100 * v.confidence:.0f}%" for label in strip_labels(v)]
                assert any(c in text for c in cells), (i, display_name(v))
            for n in (1, 2, 3):
                await pilot.press("g")
                await wait_screen(pilot, f"GPU {n} NVIDIA H100")
                assert app.model.selected == n
            await wait_screen(pilot, f"▶ GPU 3  {strip_labels(verdicts[3])[0]}")

    asyncio.run(go())


def replay_json(path: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "gputop", "--replay", str(path), "--json"], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
def test_replay_json_of_the_composed_trace_has_8_gpus_with_the_sources_classes():
    """gputop --replay COMPOSED --json: 8 GPUs, indices 0-7, each GPU's class that of the GPU it came from when A
    and B are replayed alone (A's GPU i is GPU i, B's GPU i is GPU 4 + i)."""
    doc, a, b = replay_json(COMPOSED), replay_json(A), replay_json(B)
    assert [g["index"] for g in doc["gpus"]] == list(range(8)) and doc["gpus_used"] == list(range(8))
    sources = a["gpus"] + b["gpus"]
    assert [g["verdict"]["class"] for g in doc["gpus"]] == [g["verdict"]["class"] for g in sources]
    assert [g["verdict"]["subclass"] for g in doc["gpus"]] == [g["verdict"]["subclass"] for g in sources]
    assert {g["verdict"]["class"] for g in doc["gpus"]} == {"comms-bound", "compute-bound"}
    assert "no 8-GPU machine was lent" in doc["recorded"]["note"]
    straggler = [g["index"] for g in doc["gpus"] if g["verdict"]["class"] == "compute-bound"]
    assert straggler == [4 + next(g["index"] for g in b["gpus"] if g["verdict"]["class"] == "compute-bound")]
    assert "GPU5, the straggler" in doc["gpus"][4]["verdict"]["evidence_text"]  # B's GPU 1, named by its new index


def test_compose_script_rebuilds_the_shipped_trace_byte_for_byte(tmp_path):
    """The shipped trace is what scripts/compose_trace.py writes from the two recordings (no hand edits)."""
    out = tmp_path / "c.jsonl.gz"
    r = subprocess.run([sys.executable, "scripts/compose_trace.py", str(A), str(B), str(out)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(COMPOSED.read_bytes())
    header = json.loads(gzip.decompress(out.read_bytes()).split(b"\n", 1)[0])
    assert [d["index"] for d in header["devices"]] == list(range(8))
    assert [(g["source"], g["source_index"]) for g in header["composed"]["gpus"]] == \
        [("comms_mlp.jsonl.gz", i) for i in range(4)] + [("straggler.jsonl.gz", i) for i in range(4)]
    groups = {}  # each recording's processes: one process group (one torchrun job each), the two apart
    for line in gzip.decompress(out.read_bytes()).splitlines()[1:]:
        for pos, g in enumerate(json.loads(line).get("gpus") or []):
            for p in g.get("processes") or []:
                groups.setdefault(pos < 4, set()).add(p["pgid"])
    assert len(groups[True]) == len(groups[False]) == 1 and groups[True] != groups[False]


def test_strip_lays_more_gpus_than_rows_in_columns_and_fits_each_cell():
    """16 GPUs in 8 rows: two columns, GPU order down each; a cell narrower than every name of the verdict is cut
    with '…', never wider than its column (pure functions of the strip)."""
    from gputop.analysis.verdict import Verdict
    from gputop.tui.monitor.strip import strip_line, strip_rows

    v = Verdict("comms-bound", subclass="straggler", confidence=0.87)
    cells = [strip_line(i, {"index": i, "name": "NVIDIA H100 80GB HBM3"}, v, i == 9, 39) for i in range(16)]
    assert all(len(c) <= 39 for c in cells) and cells[0].plain == "  GPU 0  comms-bound (straggler) 87%"
    rows = strip_rows(cells, 8, 80)
    assert len(rows) == 8 and rows[1].plain.startswith("  GPU 1  ") and "▶ GPU 9  comms-bound" in rows[1].plain
    whole = strip_line(0, {"index": 0}, v, False, 0).plain
    assert whole == "  GPU 0  communication-bound (waiting for a straggler) 87%"
    cut = strip_line(12, {"index": 12}, v, False, 16)
    assert len(cut) == 16 and cut.plain.endswith("…")


def without_process_groups(tmp_path: Path) -> Path:
    """The composed trace with no ``pgid`` on any process (as its two recordings were made: they predate the
    field)."""
    rows = [json.loads(line) for line in gzip.decompress(COMPOSED.read_bytes()).splitlines()]
    for row in rows:
        for s in row.get("gpus") or []:
            for p in s.get("processes") or []:
                p.pop("pgid", None)
    out = tmp_path / "no_groups.jsonl.gz"
    out.write_bytes(gzip.compress(b"\n".join(json.dumps(r).encode() for r in rows) + b"\n"))
    return out


@pytest.mark.slow
def test_two_jobs_on_one_node_are_judged_apart_by_their_process_groups(tmp_path):
    """Live (the TUI), two jobs on one node: each job's comms-bound GPUs are a process group of their own (4 and 3,
    not 7: issue 35), as the composed trace says (each recording's processes share a process group: one torchrun
    job each); without process groups, one group of all."""
    from gputop.analysis.comms import node_jobs

    async def verdicts_at(path, size=(160, 48)):
        app = make(path)
        async with app.run_test(size=size) as pilot:
            await at_tick(TICK)(pilot)
            return [v.evidence if hasattr(v, "evidence") else v["evidence"] for v in app.monitor.verdicts], \
                [v.cls if hasattr(v, "cls") else v["class"] for v in app.monitor.verdicts], \
                " ".join(app.monitor.verdict_panel.plain.split())  # (the selected GPU's, as on screen, unwrapped)

    evs, classes, text = asyncio.run(verdicts_at(COMPOSED))
    assert classes == ["comms-bound"] * 4 + ["comms-bound", "compute-bound", "comms-bound", "comms-bound"]
    assert [evs[i].get("group_gpus") for i in (0, 1, 2, 3)] == [4] * 4
    assert [evs[i].get("group_gpus") for i in (4, 6, 7)] == [3] * 3
    assert "; 4 GPUs of this process group" in text and "7 GPUs" not in text
    evs1, _, _ = asyncio.run(verdicts_at(without_process_groups(tmp_path)))
    assert {evs1[i].get("group_gpus") for i in (0, 1, 2, 3, 4, 6, 7)} == {7}  # no groups seen: one group
    rows = [json.loads(line) for line in gzip.decompress(COMPOSED.read_bytes()).splitlines()]
    ticks = [r for r in rows if r.get("gpus")][:TICK]
    assert node_jobs(ticks, list(range(8))) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_gpu_without_a_process_joins_every_job_and_one_group_is_the_whole_node():
    from gputop.analysis.comms import node_jobs

    def tick(*groups):
        return {"t": 0.0, "gpus": [{"processes": [{"pid": 10 + i, "pgid": g} for g in gs]} for i, gs in
                                   enumerate(groups)]}

    assert node_jobs([tick([1], [1], [2], [2], [])], list(range(5))) == [[0, 1, 4], [2, 3, 4]]
    assert node_jobs([tick([1], [1], [])], [0, 1, 2]) == [[0, 1, 2]]
    assert node_jobs([{"t": 0.0, "gpus": [{"processes": [{"pid": 3}]}, {"processes": None}]}], [0, 1]) == [[0, 1]]
    assert node_jobs([tick([1], [2])], [1]) == [[0]]  # positions: only GPU 1 shown
