"""Theoretical peaks from static facts: recorded/published cards, table edges, missing facts."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import jsonschema
import pytest

from gputop.analysis.peaks import PCIE_ENCODING, PCIE_GT_PER_S, TENSOR_KEYS, compute_peaks

STATIC_DIR = Path(__file__).parent / "data" / "static"
FIXTURES = sorted(p for p in STATIC_DIR.glob("*.json") if "expected" in json.loads(p.read_text()))
SCHEMA = Path(__file__).parents[1] / "gputop" / "schema" / "once.schema.json"

# The issue's targets, checked on every static/*.json of that product (recorded ones need no "expected").
ISSUE_TARGETS = {
    "NVIDIA H200": {"dram_bytes_per_s": [4.8e12, 0.02], "fp32_flops": [66.9e12, 0.02],
                    "tensor_dense_flops": {"bf16": [989e12, 0.03]}},
    "NVIDIA H100 80GB HBM3": {"dram_bytes_per_s": [3.35e12, 0.02]},
}
BY_PRODUCT = sorted(p for p in STATIC_DIR.glob("*.json")
                    if (json.loads(p.read_text()).get("static") or {}).get("name") in ISSUE_TARGETS)


def _load(name: str) -> dict:
    return json.loads((STATIC_DIR / name).read_text())


def _check(actual, expected, path: str) -> list[str]:
    """Walk the expected block: [value, rel_tol] leaves, null = must be None, dicts recurse."""
    errors = []
    if expected is None:
        if actual is not None:
            errors.append(f"{path}: expected None, got {actual!r}")
    elif isinstance(expected, dict):
        for key, sub in expected.items():
            if key != "comment":
                errors += _check((actual or {}).get(key), sub, f"{path}.{key}")
    else:
        value, tol = expected
        if actual is None or not math.isclose(actual, value, rel_tol=tol, abs_tol=0 if tol else 1e-9):
            errors.append(f"{path}: expected {value:.6g} (+-{tol:.1%}), got {actual!r}")
    return errors


def _assert_plain(peaks: dict) -> None:
    """Every value a plain float or None (notes: list of str; tensor: dict of those)."""
    for key, v in peaks.items():
        if key == "notes":
            assert isinstance(v, list) and all(isinstance(n, str) for n in v)
        elif key == "tensor_clock_source":
            assert isinstance(v, str)
        elif key == "tensor_dense_flops":
            assert set(v) == set(TENSOR_KEYS)
            assert all(x is None or type(x) is float for x in v.values()), v
        else:
            assert v is None or type(v) is float, (key, v)


def test_fixtures_found():
    names = {p.name for p in FIXTURES}
    assert {"a100_sxm4_80gb.json", "rtx4090.json", "h100_sxm_published.json", "h200_recorded.json"} <= names


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_card_matches_expected(path):
    doc = json.loads(path.read_text())
    assert doc.get("source"), "each fixture says where its numbers come from"
    static = doc["static"]
    before = copy.deepcopy(static)
    peaks = compute_peaks(static)
    assert static == before, "compute_peaks must not modify its input"
    _assert_plain(peaks)
    errors = _check(peaks, doc["expected"], path.stem)
    assert not errors, "\n".join(errors + peaks["notes"])


@pytest.mark.parametrize("path", BY_PRODUCT, ids=lambda p: p.stem)
def test_issue_targets(path):
    static = json.loads(path.read_text())["static"]
    peaks = compute_peaks(static)
    errors = _check(peaks, ISSUE_TARGETS[static["name"]], path.stem)
    assert not errors, "\n".join(errors + peaks["notes"])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fits_once_schema(path):
    schema = json.loads(SCHEMA.read_text())
    peaks_schema = dict(schema["$defs"]["peaks"], **{"$defs": schema["$defs"]})
    jsonschema.validate(json.loads(json.dumps(compute_peaks(json.loads(path.read_text())["static"]))), peaks_schema)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_each_missing_fact_gives_none_not_crash(path):
    static = json.loads(path.read_text())["static"]
    full = compute_peaks(static)
    for key in static:
        peaks = compute_peaks(dict(static, **{key: None}))
        _assert_plain(peaks)
    assert compute_peaks(dict(static, max_mem_clock_mhz=None))["dram_bytes_per_s"] is None
    assert compute_peaks(dict(static, memory_bus_width_bits=None))["ridge_fp32_flop_per_byte"] is None
    no_clock = compute_peaks(dict(static, max_sm_clock_mhz=None))
    assert no_clock["fp32_flops"] is None and no_clock["fp64_flops"] is None
    assert no_clock["dram_bytes_per_s"] == full["dram_bytes_per_s"]
    no_cc = compute_peaks(dict(static, compute_capability=None))
    assert all(v is None for v in no_cc["tensor_dense_flops"].values())
    assert no_cc["fp32_flops"] == full["fp32_flops"], "FP32 needs only NVML's cores and clock"


def test_empty_and_garbage_static():
    for static in ({}, {"name": None, "compute_capability": "9.0", "sm_count": -1, "cuda_cores": True,
                        "max_sm_clock_mhz": "1980", "pcie_cur_gen": 99, "pcie_max_gen": None}):
        peaks = compute_peaks(static)
        _assert_plain(peaks)
        assert all(peaks[k] is None for k in ("dram_bytes_per_s", "fp32_flops", "fp64_flops", "fp16_flops",
                                              "pcie_bytes_per_s_per_dir", "ridge_fp32_flop_per_byte"))
        assert peaks["notes"]


def test_formulas_from_nvml_facts():
    st = _load("a100_sxm4_80gb.json")["static"]
    p = compute_peaks(st)
    assert p["dram_bytes_per_s"] == 5120 / 8 * 1593e6 * 2
    assert p["fp32_flops"] == 6912 * 2 * 1410e6
    assert p["ridge_fp32_flop_per_byte"] == p["fp32_flops"] / p["dram_bytes_per_s"]
    assert p["tensor_dense_flops"]["bf16"] == 108 * 2048 * 1410e6
    assert p["tensor_clock_source"].startswith("NVML max SM clock")


def test_hopper_tensor_clock_is_datasheet_clock_not_boost():
    st = _load("h100_sxm_published.json")["static"]
    p = compute_peaks(st)
    assert p["tensor_clock_mhz"] == 1830.0
    assert p["tensor_dense_flops"]["bf16"] == 132 * 4096 * 1830e6
    assert p["fp32_flops"] == 16896 * 2 * 1980e6, "FP32 keeps the 1980 MHz max boost"
    assert any("1830 MHz" in n for n in p["notes"])
    t = p["tensor_dense_flops"]
    assert t["tf32"] == t["bf16"] / 2 and t["fp8"] == t["bf16"] * 2 and t["int8"] == t["bf16"] * 2
    # A card whose NVML max SM clock is below the datasheet tensor clock uses its own clock.
    low = compute_peaks(dict(st, max_sm_clock_mhz=1600))
    assert low["tensor_clock_mhz"] == 1600.0
    # An unlisted Hopper product uses NVML's max SM clock, and says so.
    other = compute_peaks(dict(st, name="NVIDIA GH200 480GB"))
    assert other["tensor_clock_mhz"] == 1980.0 and "NVML max SM clock" in other["tensor_clock_source"]


def test_h200_dram_from_real_nvml_facts():
    """A real H200 reports a 6016-bit bus at 3201 MHz: 4.81 TB/s, no datasheet table needed."""
    st = _load("h200_recorded.json")["static"]
    assert st["memory_bus_width_bits"] == 6016 and st["max_mem_clock_mhz"] == 3201
    p = compute_peaks(st)
    assert p["dram_bytes_per_s"] == 6016 / 8 * 3201e6 * 2
    assert p["dram_bytes_per_s"] == pytest.approx(4.8e12, rel=0.005)
    h100 = compute_peaks(_load("h100_sxm_published.json")["static"])
    assert h100["dram_bytes_per_s"] == 5120 / 8 * 2619e6 * 2


def test_geforce_half_rate_fp32_accumulate():
    st = _load("rtx4090.json")["static"]
    geforce = compute_peaks(st)["tensor_dense_flops"]
    # Same chip rates without the GeForce name (e.g. a workstation Ada part) are full rate.
    pro = compute_peaks(dict(st, name="NVIDIA RTX 6000 Ada Generation", max_sm_clock_mhz=2520))["tensor_dense_flops"]
    for k in ("tf32", "bf16", "fp16", "fp8"):
        assert geforce[k] == pytest.approx(pro[k] / 2)
    assert geforce["int8"] == pytest.approx(pro["int8"])
    assert any("FP32 accumulate" in n for n in compute_peaks(st)["notes"])


@pytest.mark.parametrize("cc,present", [
    ([7, 0], {"fp16"}), ([7, 5], {"fp16", "int8"}), ([8, 0], {"tf32", "bf16", "fp16", "int8"}),
    ([8, 6], {"tf32", "bf16", "fp16", "int8"}), ([8, 9], set(TENSOR_KEYS)), ([9, 0], set(TENSOR_KEYS)),
])
def test_tensor_paths_by_arch(cc, present):
    st = {"name": "x", "compute_capability": cc, "sm_count": 10, "max_sm_clock_mhz": 1000}
    t = compute_peaks(st)["tensor_dense_flops"]
    assert {k for k, v in t.items() if v is not None} == present


def test_unknown_arch_tensor_none_with_note():
    p = compute_peaks({"name": "future", "compute_capability": [11, 0], "sm_count": 100, "cuda_cores": 12800,
                       "max_sm_clock_mhz": 2000})
    assert p["fp32_flops"] == 12800 * 2 * 2000e6
    assert all(v is None for v in p["tensor_dense_flops"].values())
    assert p["fp64_flops"] is None
    assert any("11.0" in n for n in p["notes"])


def test_cores_or_sms_derived_from_the_other():
    st = _load("h100_sxm_published.json")["static"]
    assert compute_peaks(dict(st, cuda_cores=None))["fp32_flops"] == 132 * 128 * 2 * 1980e6
    assert compute_peaks(dict(st, sm_count=None))["tensor_dense_flops"]["bf16"] == 132 * 4096 * 1830e6


@pytest.mark.parametrize("gen,width,expected", [
    (1, 16, 2.5e9 * 0.8 / 8 * 16),        # 4 GB/s
    (2, 8, 5e9 * 0.8 / 8 * 8),            # 4 GB/s
    (3, 16, 8e9 * 128 / 130 / 8 * 16),    # 15.75 GB/s
    (4, 16, 16e9 * 128 / 130 / 8 * 16),   # 31.5 GB/s
    (5, 16, 32e9 * 128 / 130 / 8 * 16),   # 63.0 GB/s
])
def test_pcie_per_direction(gen, width, expected):
    p = compute_peaks({"pcie_cur_gen": gen, "pcie_cur_width": width, "pcie_max_gen": gen, "pcie_max_width": 16})
    assert p["pcie_bytes_per_s_per_dir"] == pytest.approx(expected)
    assert PCIE_GT_PER_S[gen] * PCIE_ENCODING[gen] / 8 * width * 1e9 == pytest.approx(expected)


def test_pcie_idle_link_uses_max_gen_and_slot_limit_uses_current():
    idle = compute_peaks({"pcie_cur_gen": 1, "pcie_cur_width": 16, "pcie_max_gen": 4, "pcie_max_width": 16})
    assert idle["pcie_bytes_per_s_per_dir"] == pytest.approx(16e9 * 128 / 130 / 8 * 16)
    assert any("idle" in n for n in idle["notes"])
    slot = compute_peaks({"pcie_cur_gen": 4, "pcie_cur_width": 8, "pcie_max_gen": 5, "pcie_max_width": 16})
    assert slot["pcie_bytes_per_s_per_dir"] == pytest.approx(16e9 * 128 / 130 / 8 * 8)
    assert any("gen 4 below" in n for n in slot["notes"])
    only_max = compute_peaks({"pcie_max_gen": 5, "pcie_max_width": 16})
    assert only_max["pcie_bytes_per_s_per_dir"] == pytest.approx(32e9 * 128 / 130 / 8 * 16)
