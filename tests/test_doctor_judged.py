"""``gputop --doctor``'s measured figures judged (pure): against what a healthy card of the model reaches (the
roofline's efficiencies measured on H100 and H200), against the node's other GPUs (the slower one named), against
the fleet's median; the clocks, the PCIe link and power under load; the pairs. Inputs built from a recorded node's
NVML answers (tests/data/health/) and figures a test chooses."""

from __future__ import annotations

import copy

import pytest

from fake_health import RECORDED, RecordedNvml, recorded_figures
from gputop.analysis.doctor import (FIGURES, REFERENCES, judge, judge_figure, link_stats, loaded_findings,
                                    model_expected, pair_findings, phase_stats)
from gputop.analysis.doctor_findings import DEGRADED, FAILED, NA, OK
from gputop.analysis.peaks import compute_peaks
from gputop.telemetry.health import read_health
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import read_static

HEALTHY = recorded_figures()  # GPU 1's in the full doctor run that came out healthy on 2 H100s (2026-11-27)


def node(n: int = 2, record: str = RECORDED, figures: dict | None = None) -> dict:
    """A node of ``n`` GPUs as the doctor's run hands it to judge(): each with the record's facts (GPU 0's and 1's,
    repeated) and the figures ``figures[i]`` (healthy ones by default)."""
    nvml = Nvml(RecordedNvml(record))
    gpus = []
    for i in range(n):
        static, h = read_static(nvml, i % 2), read_health(nvml, i % 2)
        static, h = {**static, "index": i}, {**h, "index": i}
        gpus.append({"index": i, "name": static["name"], "uuid": f"GPU-{i}", "static": static,
                     "peaks": compute_peaks(static), "health": h, "xids": [],
                     "active": {"figures": dict((figures or {}).get(i, HEALTHY)), "load": {}, "error": None,
                                "skipped": None}})
    return {"gpus": gpus, "pairs": [], "xid_log": {"readable": True, "why": None}, "fleet": None}


def finding(verdict: dict, check: str, gpu: int):
    return next(f for f in verdict["findings"] if f.check == check and f.gpu == gpu)


def test_healthy_figures_on_a_healthy_node_are_ok_against_every_reference():
    v = judge(node(4))
    assert v["status"] == OK and set(v["gpus"].values()) == {OK}
    f = finding(v, "dram_bytes_per_s", 2)
    assert [r["kind"] for r in f.references] == ["model", "siblings"]
    model = f.references[0]
    assert model["expected"] == pytest.approx(0.940 * 5120 / 8 * 2619e6 * 2, rel=1e-6)  # 0.940 x NVML's HBM3
    assert "docs/benchmarks.md" in model["source"] and "0.935-0.944" in model["source"]
    assert "median of GPU 0, 1, 3" in f.references[1]["source"]


def test_every_reference_is_a_measurement_on_record():
    """Each healthy efficiency names the measured runs it is the median of, in docs/benchmarks.md."""
    from pathlib import Path

    bench = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text()
    for name, (_, eff, _, source) in REFERENCES.items():
        assert name in FIGURES and 0.5 < eff < 1.0 and "docs/benchmarks.md" in source and f"median {eff:.3f}" in source
    for measured in ("3.154 | 3.352 | 0.941", "65.29 | 66.91 | 0.976", "gave 824 TFLOP/s bf16", "6.1 / 53.5 GB/s",
                     "10.9 / 47.8 GB/s"):  # the figures the medians are of, some of them
        assert measured in bench, measured


@pytest.mark.parametrize("name, scale, status", [
    ("dram_bytes_per_s", 0.93, OK),  # within the 10% margin of the model's healthy figure, and 7% from siblings
    ("dram_bytes_per_s", 0.85, DEGRADED),
    ("dram_bytes_per_s", 0.45, FAILED),  # under half: broken, not slow
    ("fp32_flops", 0.88, DEGRADED),
    ("bf16_flops", 0.40, FAILED),
    ("h2d_bytes_per_s", 0.80, DEGRADED),  # a host copy's margin is wider: 15%
    ("d2h_bytes_per_s", 0.48, FAILED),  # a link at half its width
])
def test_a_figure_below_the_models_healthy_one_is_degraded_then_failed(name, scale, status):
    figures = {i: dict(HEALTHY) for i in range(2)}
    for i in range(2):  # both GPUs equally low: only the model's reference can tell
        figures[i][name] = HEALTHY[name] * scale
    v = judge(node(2, figures=figures))
    f = finding(v, name, 1)
    assert f.status == status, f.message
    assert f.references[0]["kind"] == "model" and f.references[0]["status"] == status
    if status != OK:
        assert "what a healthy card of this model reaches" in f.message and f.expected == f.references[0]["expected"]


def test_the_slower_gpu_is_named_against_its_siblings():
    """The recorded 2-H100 node's second full run (2026-11-27): GPU 0 in software thermal slowdown at 1260 MHz, GPU 1
    at 1395 MHz under its power cap, as in the issue (GPU 1 at 1297 MHz, GPU 0 at 1485, on an earlier machine)."""
    figures = {i: recorded_figures("full_2", i) for i in (0, 1)}
    v = judge(node(2, figures=figures))
    assert v["gpus"] == {0: DEGRADED, 1: OK} and v["status"] == DEGRADED
    clock = finding(v, "sm_clock_loaded_mhz", 0)
    assert clock.status == DEGRADED and clock.references == [clock.references[0]]  # no model reference for clocks
    assert "1260 MHz: 10% below the node's other GPUs of this model (1395 MHz)" in clock.message
    sus = finding(v, "bf16_sustained_flops", 0)
    assert sus.status == DEGRADED and "median of GPU 1" in sus.source and "628 TFLOP/s: 10% below" in sus.message
    assert finding(v, "bf16_sustained_flops", 1).status == OK  # the faster one is not named
    assert {f.check for f in v["findings"] if f.status != OK} == {"sm_clock_loaded_mhz", "bf16_sustained_flops"}


def test_a_slow_gpu_among_eight_is_named_and_its_siblings_are_not():
    figures = {i: dict(HEALTHY) for i in range(8)}
    figures[5]["dram_bytes_per_s"] = HEALTHY["dram_bytes_per_s"] * 0.94  # 6% below: over the 5% sibling margin, within the model's 10%
    v = judge(node(8, figures=figures))
    assert [i for i, s in v["gpus"].items() if s != OK] == [5]
    f = finding(v, "dram_bytes_per_s", 5)
    assert [(r["kind"], r["status"]) for r in f.references] == [("model", OK), ("siblings", DEGRADED)]


def test_the_fleets_median_judges_when_the_node_agrees_with_itself():
    figures = {i: {**HEALTHY, "bf16_sustained_flops": 600e12} for i in range(2)}
    fleet = {"url": "http://prom:9090", "why": None,
             "medians": {"NVIDIA H100 80GB HBM3": {"bf16_sustained_flops": {"value": 700e12, "gpus": 96},
                                                   "dram_bytes_per_s": {"value": 3.15e12, "gpus": 2}}}}
    v = judge({**node(2, figures=figures), "fleet": fleet})
    f = finding(v, "bf16_sustained_flops", 0)
    assert f.status == DEGRADED and "the fleet's median for this model (700 TFLOP/s)" in f.message
    assert "median of 96 NVIDIA H100 80GB HBM3 in http://prom:9090" in f.source
    dram = finding(v, "dram_bytes_per_s", 0)
    assert "fleet" not in [r["kind"] for r in dram.references]  # 2 GPUs is no fleet


def test_a_fleet_that_cannot_be_read_is_said_and_judges_nothing():
    v = judge({**node(2), "fleet": {"url": "http://x", "medians": {}, "why": "not read (refused)"}})
    f = next(f for f in v["findings"] if f.check == "fleet")
    assert f.status == NA and "refused" in f.message and v["status"] == OK


def test_no_model_reference_where_none_was_measured():
    st = {"compute_capability": [8, 0], "name": "NVIDIA A100-SXM4-80GB"}
    assert model_expected("dram_bytes_per_s", st, {"dram_bytes_per_s": 2.0e12}, {}) is None
    gen4 = {"pcie": {"max_gen": 4, "max_width": 16}}
    assert model_expected("h2d_bytes_per_s", {"compute_capability": [9, 0]}, {}, gen4) is None
    f = judge_figure("dram_bytes_per_s", 0, 2.0e12, [])
    assert f.status == OK and "no reference" in f.message


def test_clocks_under_load_hardware_slowdown_fails_and_thermal_degrades():
    h = node(1)["gpus"][0]["health"]
    ticks = [{"t": 10 + k / 10, "gpus": [{"sm_clock_mhz": 1297 + k, "power_w": 640.0, "temp_c": 86 + k % 3,
                                          "clock_reasons": ["software power cap", "software thermal slowdown"]}]}
             for k in range(20)]
    s = phase_stats(ticks, 0, 10.0, 12.0, tail=0.5)
    assert s["samples"] == 10 and s["sm_clock_mhz"] == pytest.approx(1311.5) and s["temp_max_c"] == 88
    assert s["reasons"] == {"software power cap": 1.0, "software thermal slowdown": 1.0}
    fs = {f.check: f for f in loaded_findings(0, h, {"sustained": s})}
    assert fs["clocks_loaded"].status == DEGRADED and "software thermal slowdown 100%" in fs["clocks_loaded"].message
    assert fs["power_loaded"].status == OK and "of the 700 W limit" in fs["power_loaded"].message
    hw = copy.deepcopy(s)
    hw["reasons"]["hardware power brake"] = 0.2
    assert {f.check: f for f in loaded_findings(0, h, {"sustained": hw})}["clocks_loaded"].status == FAILED
    rare = copy.deepcopy(s)
    rare["reasons"] = {"software power cap": 1.0, "hardware slowdown": 0.02}  # one glitch in 50 samples
    assert {f.check: f for f in loaded_findings(0, h, {"sustained": rare})}["clocks_loaded"].status == OK


def test_the_pcie_link_under_load_against_what_gpu_and_slot_allow():
    h = node(1)["gpus"][0]["health"]
    links = [(1.0, 0, 1, 16), (1.1, 0, 3, 16), (1.2, 0, 3, 16), (5.0, 0, 5, 16)]  # idle, then gen 3 under load
    st = link_stats(links, 0, 1.05, 1.3)
    assert st == {"samples": 2, "gen": 3, "width": 16}
    (f,) = loaded_findings(0, h, {"pcie": st})
    assert f.status == DEGRADED and "gen 3 x16, below the gen 5 x16" in f.message
    (f,) = loaded_findings(0, h, {"pcie": {"samples": 3, "gen": 5, "width": 16}})
    assert f.status == OK
    slot = {**h, "pcie": {**h["pcie"], "max_gen": 4, "gpu_max_gen": 5}}
    (f,) = loaded_findings(0, slot, {"pcie": {"samples": 3, "gen": 4, "width": 16}})
    assert f.status == OK and "the slot holds it below the GPU's gen 5" in f.message
    (f,) = loaded_findings(0, h, {"pcie": {"samples": 0, "gen": None, "width": None}})
    assert f.status == NA


def test_a_slow_pair_is_degraded_and_a_pair_without_peer_access_is_said():
    pairs = [{"gpus": [a, b], "bytes_per_s": 380e9, "kind": "nvlink", "peer_access": True,
              "peak_bytes_per_s": 478e9, "peak_source": "18 NVLinks"} for a in range(4) for b in range(4) if a != b]
    for p in pairs:
        if 2 in p["gpus"]:
            p["bytes_per_s"] = 250e9
    fs = pair_findings(pairs)
    slow = [f for f in fs if f.status == DEGRADED]
    assert len(slow) == 6 and all(2 in f.gpus for f in slow)
    assert "GPU 0 -> 2 over nvlink: GPU to GPU copy 250 GB/s: 34% below the node's other pairs over the same link " \
           "(380 GB/s)" == slow[0].message
    assert slow[0].source == "median of the node's 10 other nvlink pairs" and slow[0].references[0]["kind"] == "pairs"
    v = judge({**node(4), "pairs": pairs})  # the GPU every slow pair has in common is named, its partners are not
    assert v["gpus"] == {0: OK, 1: OK, 2: DEGRADED, 3: OK}
    named = next(f for f in v["findings"] if f.check == "p2p_gpu")
    assert named.gpu == 2 and "GPU 2 is in all 6 of its slow copies" in named.message
    pairs[0]["peer_access"] = False  # 0 -> 1, at full speed, but CUDA cannot reach 1 from 0 directly
    f = pair_findings(pairs)[0]
    assert f.gpus == [0, 1] and f.status == DEGRADED and "CUDA has no peer access" in f.message
    broken = [{"gpus": [0, 1], "bytes_per_s": None, "error": "the copy arrived wrong"},
              {"gpus": [1, 0], "bytes_per_s": 380e9, "kind": "nvlink"}]
    assert pair_findings(broken)[0].status == FAILED
    v = judge({**node(2), "pairs": broken})  # two GPUs: no one to name, both carry it
    assert v["gpus"] == {0: FAILED, 1: FAILED} and not [f for f in v["findings"] if f.check == "p2p_gpu"]


def test_a_load_that_failed_or_was_skipped_is_a_finding():
    n = node(2)
    n["gpus"][0]["active"] = {"figures": {}, "error": "no answer within 98 s: the load hung (killed)", "skipped": None}
    n["gpus"][1]["active"] = {"figures": {}, "error": None, "skipped": "MIG mode is on (the load needs the whole GPU)"}
    v = judge(n)
    assert finding(v, "active", 0).status == FAILED and "hung" in finding(v, "active", 0).message
    assert finding(v, "active", 1).status == NA and v["gpus"] == {0: FAILED, 1: OK}
    assert v["status"] == FAILED and v["counts"][FAILED] == 1
