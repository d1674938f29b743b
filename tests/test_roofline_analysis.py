"""gputop.analysis.roofline: ridge, attainable performance, bound classes and the above-roof flag."""

import pytest

from gputop.analysis import roofline as rl

# H100 SXM datasheet-style roofs: 66.9 TFLOP/s FP32, 3.35 TB/s HBM3 -> ridge 19.96 FLOP/byte.
H100 = rl.Roofs(66.9e12, 3.352e12)
MEASURED = rl.Roofs(60e12, 3.0e12)  # ridge 20


def test_ridge_and_attainable():
    assert rl.ridge(66.9e12, 3.352e12) == pytest.approx(19.958, rel=1e-4)
    assert rl.ridge(None, 3e12) is None
    assert rl.ridge(60e12, 0) is None
    # left of the ridge the memory roof binds: AI * B; right of it the compute roof
    assert rl.attainable(0.25, 60e12, 3e12) == pytest.approx(0.75e12)
    assert rl.attainable(250, 60e12, 3e12) == pytest.approx(60e12)
    assert rl.attainable(20, 60e12, 3e12) == pytest.approx(60e12)  # exactly at the ridge both agree
    assert rl.attainable(-1, 60e12, 3e12) is None
    assert MEASURED.ridge == pytest.approx(20.0)
    assert rl.binding_roof(19.9, 60e12, 3e12) == "memory"
    assert rl.binding_roof(20.0, 60e12, 3e12) == "compute"


def test_pct_of_roof_and_clock_scaling():
    # the seed's published H100 k=1 point: 2.24 TB/s at AI 0.25 -> 0.56 TFLOP/s
    assert rl.pct_of_roof(0.25, 0.56e12, H100.flops, H100.bw) == pytest.approx(100 * 2.24 / 3.352, rel=1e-3)
    # 66.9 TFLOP/s at 1980 MHz is 51.7 TFLOP/s at 1530 MHz (the H200 at its 700 W cap)
    assert rl.at_clock(66.9e12, 1530, 1980) == pytest.approx(66.9e12 * 1530 / 1980)
    assert rl.at_clock(66.9e12, None, 1980) is None


def test_memory_bound_point():
    c = rl.classify_point(0.25, 0.56e12, 2.24e12, {"measured": MEASURED, "theoretical": H100})
    assert c["bound"] == rl.MEMORY_BOUND
    assert c["binding_roof"] == "memory" and c["basis"] == "measured" and c["ridge"] == 20.0
    assert c["pct_roof_measured"] == pytest.approx(74.67, abs=0.01)  # 2.24 / 3.0
    assert c["pct_roof_theoretical"] == pytest.approx(66.83, abs=0.01)  # 2.24 / 3.352
    assert c["flags"] == []
    assert "left of the ridge" in c["hint"]


def test_compute_bound_point_and_the_mul_add_ceiling():
    # the seed's published H100 k=1000 point: 29.2 TFLOP/s with a separate multiply and add
    c = rl.classify_point(250, 29.2e12, 29.2e12 / 250, {"theoretical": H100}, ceiling_fraction=0.5)
    assert c["bound"] == rl.COMPUTE_BOUND and c["basis"] == "theoretical"
    assert c["pct_roof_theoretical"] == pytest.approx(43.65, abs=0.01)
    assert c["pct_ceiling"] == pytest.approx(87.29, abs=0.01)  # of 33.45 TFLOP/s
    assert c["ceiling_ridge"] == pytest.approx(9.98, abs=0.01)
    assert "at most 50%" in c["hint"]
    # between the half-roof ridge (10) and the hardware ridge (20) the mul+add kernel is compute-bound
    c = rl.classify_point(12.5, 30e12, 30e12 / 12.5, {"measured": MEASURED}, ceiling_fraction=0.5)
    assert c["bound"] == rl.COMPUTE_BOUND and c["binding_roof"] == "compute"
    # ... while an FMA kernel at the same intensity is memory-bound
    c = rl.classify_point(12.5, 30e12, 30e12 / 12.5, {"measured": MEASURED})
    assert c["bound"] == rl.MEMORY_BOUND and "pct_ceiling" not in c


def test_below_both_roofs():
    c = rl.classify_point(250, 5e12, 5e12 / 250, {"measured": MEASURED})  # 8.3% of 60 TFLOP/s
    assert c["bound"] == rl.BELOW_BOTH
    assert "latency" in c["hint"]
    c = rl.classify_point(250, 6.5e12, 6.5e12 / 250, {"measured": MEASURED})  # 10.8%
    assert c["bound"] == rl.COMPUTE_BOUND


def test_above_a_roof_is_flagged():
    # 3.3 TB/s against a measured 3.0 TB/s roof: +10%, flagged; still under the theoretical 3.352
    c = rl.classify_point(0.25, 0.825e12, 3.3e12, {"measured": MEASURED, "theoretical": H100})
    assert len(c["flags"]) == 1
    assert c["flags"][0].startswith("above the measured memory roof") and "bug" in c["flags"][0]
    # within the 5% tolerance: not flagged
    c = rl.classify_point(0.25, 0.78e12, 3.12e12, {"measured": MEASURED})
    assert c["flags"] == []
    # above the theoretical FP32 roof: flagged against both sets
    c = rl.classify_point(250, 75e12, 0.3e12, {"measured": MEASURED, "theoretical": H100})
    assert [f.split(":")[0] for f in c["flags"]] == ["above the measured compute roof",
                                                     "above the theoretical compute roof"]


def test_no_roofs_means_no_class():
    c = rl.classify_point(1.0, 1e9, 1e9, {"measured": rl.Roofs(None, None)})
    assert c["bound"] is None and c["pct_roof_measured"] is None and c["flags"] == []
    # a compute roof alone gives percentages nowhere but cannot place the ridge
    c = rl.classify_point(1.0, 1e9, 1e9, {"measured": rl.Roofs(60e12, None)})
    assert c["bound"] is None
