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


def test_a_straggler_whose_gpu_runs_another_jobs_process_says_so():
    """The 3x-work straggler on 2 H100s, its GPU also listing a process that is not of the run (as NVML lists a
    job sharing the GPU): its why names it; a waiting GPU with one is told in a note."""
    from gputop.analysis.collectives import shared_gpus
    from gputop.headless.replay import replay_monitor

    mon = replay_monitor(str(TRACES / "corpus_multi_h100x2" / "straggler.jsonl.gz"))
    gpus = mon.diagnose().gpus
    verdicts = [g.verdict for g in gpus]
    shared_gpus(verdicts, [g.index for g in gpus], {1: [{"pid": 4242, "name": "hog.py"}],
                                                    0: [{"pid": 7, "name": "jupyter"}]})
    v0, v1 = verdicts
    assert v1.job["straggler"] == 1 and v1.job["why"][-1] == "its GPU is shared with another job's process: pid 4242 (hog.py)"
    assert v1.evidence_text.endswith("; its GPU is shared with another job's process (pid 4242 (hog.py)): part of its "
                                     "load is not its own")
    assert v0.notes[0] == "this GPU also ran another job's process: pid 7 (jupyter)"
    assert mon._foreign(mon.store.snapshot()) == {}  # a replay's pids are another machine's: none is foreign
