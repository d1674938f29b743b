"""The corpus's ground-truth rule and the loop marks (gputop/evaluate/corpus_truth.py), on the first H100 run's own
numbers (docs/results/h100-2026-11-23/corpus)."""

from __future__ import annotations

import json
from pathlib import Path

from gputop.evaluate.corpus_truth import label_from_profile, relabel_old
from gputop.evaluate.corpus_truth import main as mark_main
from gputop.evaluate.labelled import trace_expectations

ROOT = Path(__file__).resolve().parents[1]

# compiled_mlp's truth as the first run wrote it: busy from the profiled wall time (0.071 s for 5 steps)
OLD_COMPILED_MLP = {"by": "torch.profiler", "steps": 5, "wall_s": 0.071, "busy": 0.421, "gemm_share": 0.63,
                    "mean_kernel_us": 109.2, "kernels_per_s": 3860.1, "label": "input-starved"}


def test_the_label_rule_in_order():
    assert label_from_profile(0.16, 0.57, 3.0, 52000.0) == "latency-bound"  # GPT-2 decode
    assert label_from_profile(0.007, 0.39, 16.9, 400.0, data_wait_share=0.9) == "host-bound"  # GPU nearly idle
    assert label_from_profile(0.52, 0.29, 36.2, 11000.0, data_wait_share=0.3) == "input-starved"
    assert label_from_profile(0.52, 0.29, 36.2, 11000.0) == "host-bound"  # no input pipeline: not starved
    assert label_from_profile(0.94, 0.63, 109.2, 8000.0) == "compute-bound"
    assert label_from_profile(0.89, 0.34, 31.3, 17000.0) == "memory-bound"


def test_an_old_truth_is_relabelled_with_the_unprofiled_step_time():
    t = relabel_old(OLD_COMPILED_MLP, "1260 steps\n", 8.0, None)
    assert t["loop_steps"] == 1260 and abs(t["step_s"] - 8.0 / 1260) < 1e-6
    assert 0.9 < t["busy"] < 1.0 and t["label"] == "compute-bound" and t["old_label"] == "input-starved"


def test_the_timed_loop_is_marked_as_the_labelled_phase(tmp_path):
    trace = ROOT / "tests" / "data" / "traces" / "idle.idle.jsonl.gz"
    truth = tmp_path / "t.json"
    truth.write_text(json.dumps({"by": "construction", "label": "idle", "loop": [2.0, 6.0]}))
    out = tmp_path / "corpus_h100_x.jsonl.gz"
    assert mark_main([str(trace), str(truth), str(out)]) == 0
    want = trace_expectations(str(out))
    assert [(c, t0) for _, c, t0, _ in want["phases"]] == [("idle", 2.0)] and want["phases"][0][3] == 6.0
