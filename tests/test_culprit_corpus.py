"""The culprit corpus's scorer (gputop/evaluate/culprit_corpus.py, which scores bench/gpu/culprit_corpus_gpu.sh's
documents on the GPU machines) on the recorded multi-GPU runs we have: their replay documents against truths taken
from the programs' own truth files (the construction: which rank left and how, which rank had 3x the work), laid out
as the GPU script lays them out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.evaluate.culprit_corpus import confusion_table, main, render, score_case, summarize
from gputop.headless.replay import replay_document

TRACES = Path(__file__).parent / "data" / "traces"
KIND = {"exit": "left", "idle": "outside"}


def truth_of(folder: str, case: str) -> dict:
    t = json.loads((TRACES / folder / f"{case}_truth_rank0.json").read_text())
    gpus = int(folder[-1])
    if case.startswith("hang"):
        return {"case": f"{folder[-2:]}_{case}", "kind": KIND[t["how"]], "rank": t["leaver"], "ranks": [t["leaver"]],
                "gpus": gpus}
    if case == "straggler":
        return {"case": f"{folder[-2:]}_{case}", "kind": "straggler", "rank": t["slow_rank"],
                "ranks": [t["slow_rank"]], "gpus": gpus}
    return {"case": f"{folder[-2:]}_{case}", "kind": "none", "rank": None, "ranks": [], "gpus": gpus}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("culprit")
    (d / "truth").mkdir()
    (d / "docs").mkdir()
    for folder in ("corpus_multi_h100x2", "corpus_multi_h100x4"):
        for case in ("hang_exit", "hang_idle", "straggler", "ddp_resnet50_overlap"):
            truth = truth_of(folder, case)
            (d / "truth" / f"{truth['case']}.json").write_text(json.dumps(truth))
            doc = replay_document(str(TRACES / folder / f"{case}.jsonl.gz"))
            (d / "docs" / f"{truth['case']}.json").write_text(json.dumps(doc))
    stacks = {"case": "x2_stacks", "kind": "outside", "rank": 0, "ranks": [0], "gpus": 2}  # rank 0 sleeps on GPU 1
    (d / "truth" / "x2_stacks.json").write_text(json.dumps(stacks))
    (d / "docs" / "x2_stacks.json").write_text(json.dumps(
        replay_document(str(TRACES / "culprit" / "hang_idle_stacks.jsonl.gz"))))
    return d


def test_the_recorded_runs_score_as_their_truths_say(corpus):
    s = summarize(corpus)
    rows = {r["case"]: r for r in s["cases"]}
    for g in ("x2", "x4"):
        assert rows[f"{g}_hang_exit"]["named"] and rows[f"{g}_hang_exit"]["named_kind"] == "left"
        assert rows[f"{g}_hang_idle"]["named"] and rows[f"{g}_hang_idle"]["named_kind"] == "outside"
        assert rows[f"{g}_hang_idle"]["per_gpu"] and rows[f"{g}_hang_exit"]["per_gpu"]
        assert rows[f"{g}_straggler"]["named"] and rows[f"{g}_straggler"]["named_ranks"] == [1]
        assert rows[f"{g}_ddp_resnet50_overlap"]["named"]  # healthy: no stall, no culprit
    r = rows["x2_stacks"]  # the ranks' stacks: rank 0 (on GPU 1) named, with its line
    assert r["named"] and r["named_ranks"] == [0] and "gloo_job.py:30" in r["where"] and r["culprit_s"] is not None
    assert s["named_right"] == s["faults"] == 7 and s["healthy_clean"]
    assert s["confusion"]["left"] == {"left": 2} and s["confusion"]["outside"] == {"outside": 3}


def test_a_wrong_rank_a_false_stall_and_a_missing_document_are_misses(corpus):
    doc = json.loads((corpus / "docs" / "x4_hang_idle.json").read_text())
    wrong = score_case({"case": "w", "kind": "outside", "ranks": [2]}, doc)
    assert not wrong["named"] and wrong["named_ranks"] == [3]
    healthy_truth = {"case": "h", "kind": "none", "ranks": []}
    assert not score_case(healthy_truth, doc)["named"]  # a stall where the truth is a healthy run
    (corpus / "truth" / "zz_missing.json").write_text(json.dumps({"case": "zz_missing", "kind": "left", "ranks": [1]}))
    try:
        s = summarize(corpus)
        assert s["named_right"] == 7 and s["faults"] == 8
        assert "| left | 2 |" in confusion_table(s) and "no document" in confusion_table(s)
    finally:
        (corpus / "truth" / "zz_missing.json").unlink()


def test_the_summary_from_the_command_line(corpus, tmp_path, capsys):
    assert main([str(corpus), "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "culprit named right: 7 of 7 faults; healthy run clean;" in out
    assert json.loads((tmp_path / "s.json").read_text())["named_right"] == 7
    assert render(summarize(corpus)).splitlines()[0].startswith("case")


@pytest.fixture(scope="module")
def corpus_x4(tmp_path_factory):
    """The GPU corpus of 2026-11-27 on 4 H100s (tests/data/traces/culprit_h100x4/README.md), replayed."""
    src = TRACES / "culprit_h100x4"
    d = tmp_path_factory.mktemp("culprit_x4")
    (d / "docs").mkdir()
    (d / "truth").symlink_to(src / "truth")
    for t in sorted(src.glob("*.jsonl.gz")):
        (d / "docs" / (t.name.split(".")[0] + ".json")).write_text(json.dumps(replay_document(str(t))))
    return d


@pytest.mark.slow
def test_the_4_h100_corpus_names_every_culprit_and_no_bystander(corpus_x4):
    """Rank 3 is the culprit of every fault by construction: it alone is named (rank 1, whose GPU's verdict lagged
    the stall, is not), with the line it is at; the shared GPU's straggler is rank 3; a flight recorder dump of the
    running (not stalled) shared-GPU job names no one."""
    s = summarize(corpus_x4)
    rows = {r["case"]: r for r in s["cases"]}
    assert s["named_right"] == s["faults"] == 10, render(s)
    for case, r in rows.items():
        assert r["named_ranks"] == [3], (case, r)
    assert "job.py:97" in rows["io"]["where"] and "lock.acquire()" in rows["lock"]["where"]
    assert "left the job" in rows["exit"]["where"]
    for case in ("op", "size"):  # named by the GPUs at 0.5 s; the flight recorder's dump says what it called instead
        assert rows[case]["named_kind"] == "mismatch" and rows[case]["per_gpu"], rows[case]
    assert rows["nojoin"]["per_gpu"]  # no GPU stalled (the others wait in DDP's set-up): its own verdict says it
    shared = json.loads((corpus_x4 / "docs" / "shared.json").read_text())
    assert shared.get("culprit") is None or not shared["culprit"].get("culprit_ranks")
    assert s["healthy_clean"] is None  # the corpus's healthy run did not run: said, not counted as clean


@pytest.mark.slow
def test_docs_table_is_the_4_h100_corpus_as_replayed(corpus_x4):
    """docs/diagnosis.md's table of the 4-H100 corpus is this replay's (held equal, so a change of the judge that
    changes it changes the docs)."""
    doc = (Path(__file__).parents[1] / "docs" / "diagnosis.md").read_text()
    table = doc.split("<!-- culprit-x4:start -->")[1].split("<!-- culprit-x4:end -->")[0]
    assert table.strip() == "```\n" + render(summarize(corpus_x4)) + "\n```"


@pytest.fixture(scope="module")
def corpus_x2(tmp_path_factory):
    """The GPU corpus of 2026-11-27 on 2 H100s beside a healthy job (tests/data/traces/culprit_h100x2/README.md),
    replayed."""
    src = TRACES / "culprit_h100x2"
    d = tmp_path_factory.mktemp("culprit_x2")
    (d / "docs").mkdir()
    (d / "truth").symlink_to(src / "truth")
    for t in sorted(src.glob("*.jsonl.gz")):
        (d / "docs" / (t.name.split(".")[0] + ".json")).write_text(json.dumps(replay_document(str(t))))
    return d


@pytest.mark.slow
def test_the_2_h100_corpus_beside_a_healthy_job_names_every_culprit_and_none_of_the_neighbours(corpus_x2):
    """Rank 1 is the culprit of every fault by construction; the healthy neighbour job on GPUs 2-3 of the node is
    never named, nor judged with the run; the mismatches of two ranks (a tie in the dumps) are named "mismatch" on
    the rank the stacks named; thousands of 4 KiB all-reduces a second are named small on both GPUs."""
    s = summarize(corpus_x2)
    rows = {r["case"]: r for r in s["cases"]}
    assert s["named_right"] == s["faults"] == 10, render(s)
    for case, r in rows.items():
        if case != "small":
            assert r["named_ranks"] == [1] and r["per_gpu"], (case, r)
    for case in ("op", "size"):
        assert rows[case]["named_kind"] == "mismatch", rows[case]
    assert rows["small"]["named"] and s["small_named"] == [True]
    for case in rows:
        doc = json.loads((corpus_x2 / "docs" / f"{case}.json").read_text())
        assert {g["index"] for g in doc["gpus"] if g.get("used")} == {0, 1}, case
        assert not set((doc.get("culprit") or {}).get("culprit_gpus") or []) & {2, 3}, case


@pytest.mark.slow
def test_docs_table_is_the_2_h100_corpus_as_replayed(corpus_x2):
    doc = (Path(__file__).parents[1] / "docs" / "diagnosis.md").read_text()
    table = doc.split("<!-- culprit-x2:start -->")[1].split("<!-- culprit-x2:end -->")[0]
    assert table.strip() == "```\n" + render(summarize(corpus_x2)) + "\n```"
