"""The straggler score of each GPU of a job (gputop/analysis/collectives.py: NVIDIA's resiliency extension's relative
performance score, the fastest rank's time on its own work over this rank's, estimated from telemetry) against the
same score from the ranks' own timings: each program of the multi-GPU corpora timed its compute (and its host work)
per step with CUDA events and perf_counter and wrote it in its truth file before gputop saw the trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.headless.replay import replay_document

TRACES = Path(__file__).parent / "data" / "traces"
CASES = [("corpus_multi_h100x2", "straggler"), ("corpus_multi_h100x4", "straggler"),
         ("heldout_multi_h100x2", "held_host_straggler"), ("heldout_multi_h100x4", "held_host_straggler")]


def truth_scores(folder: Path, case: str) -> dict[int, float]:
    own = {}
    for f in folder.glob(f"{case}_truth_rank*.json"):
        t = json.loads(f.read_text())
        own[t["rank"]] = t["compute_ms_median"] + (t.get("host_ms_median") or 0.0)
    return {r: min(own.values()) / ms for r, ms in own.items()}


@pytest.mark.parametrize("folder, case", CASES)
def test_each_gpus_straggler_score_is_the_ranks_own_within_0_06(folder, case):
    doc = replay_document(str(TRACES / folder / f"{case}.jsonl.gz"))
    truth = truth_scores(TRACES / folder, case)
    ours = {g["index"]: g["verdict"]["evidence"].get("straggler_score") for g in doc["gpus"]}  # GPU i ran rank i
    assert set(ours) == set(truth)
    for r, want in truth.items():
        assert ours[r] is not None and abs(ours[r] - want) <= 0.06, (r, ours, truth)
    slow = min(truth, key=truth.get)
    assert ours[slow] < 0.5 and all(ours[r] >= 0.95 for r in truth if r != slow)
    v = next(g["verdict"] for g in doc["gpus"] if g["index"] == slow)
    if v["job"].get("straggler") == slow:
        assert f"straggler score {ours[slow]:.2f}" in v["evidence_text"]
