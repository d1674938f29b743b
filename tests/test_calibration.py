"""The calibration (gputop/evaluate/calibration.py) on the recorded labelled traces: the calibration target of issue 11 (verdicts at
confidence 0.8 or more right at least 95% of the time) holds, and the rival rule sets run on the same
windows (CPU only, a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.evaluate import calibration as cal
from gputop.telemetry.trace import demo_trace_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_confident_verdicts_are_right_at_least_95_percent_of_the_time():
    paths = [demo_trace_path()] + sorted(str(p) for p in (ROOT / "tests" / "data" / "traces").glob("*.jsonl.gz"))
    cases = cal.collect(paths, cal.MULTI_DIRS)  # and every GPU of the multi-GPU corpus against its truth
    assert len(cases["window"]) >= 20 and len(cases["run"]) >= 8 and len(cases["live"]) >= 80
    assert len(cases["multi"]) >= 30
    sure = [c for k in cases for c in cases[k] if c["conf"] is not None and c["conf"] >= 0.8]
    right = sum(c["got"] == c["want"] for c in sure)
    assert right / len(sure) >= 0.95, [c for c in sure if c["got"] != c["want"]]
    table = cal.calibration_table(cases)
    assert table[-1].startswith("| all | >= 0.8 |")
    rows = cal.comparison_table(cases)
    assert len(rows) == len(cases["window"]) + 3 and "KempnerPulse" in rows[0]


def test_rival_rules_on_hand_made_numbers():
    copy = {"sm_active_pct": 99.0, "dram_bw_pct": 88.0, "tensor_pct": 0.0, "util_gpu_pct": 100.0, "util_mem_pct": 75.0}
    assert cal.kempnerpulse(copy) == ("compute-heavy", "compute-bound")  # its rule 7 before rule 9
    assert cal.nvsonar(copy) == ("balanced", "-")
    idle = {"util_gpu_pct": 0.0, "util_mem_pct": 0.0}
    assert cal.kempnerpulse(idle)[1] == "idle" and cal.nvsonar(idle)[1] == "idle"
