"""``gputop --doctor``'s run, end to end without a GPU: NVML answers played back (tests/data/health/), real child
processes standing in for the loads (tests/fault_doctor/: the load's own events, figures a test chooses, a hang, a
crash, a CUDA error, a missing CuPy), real signals, the document checked against its schema. A hang is bounded,
one GPU's failure leaves the other's checks whole, and nothing a run started outlives it."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from fake_health import DATA, RecordedNvml, load_record, recorded_figures
from gputop.documents import validate
from gputop.session import doctor as doctor_mod
from gputop.session.doctor import DoctorOptions, DoctorRun
from gputop.session.doctor_document import build_document, state_records
from gputop.telemetry.nvml import Nvml

HERE = Path(__file__).resolve().parent
LOAD, P2P = HERE / "fault_doctor" / "load.py", HERE / "fault_doctor" / "p2p.py"
LOADED_NODE = "recorded_h100_80gb_hbm3_x2_loaded.json"  # 2 H100s recorded under a load (2026-11-27)
NODE = load_record(DATA / LOADED_NODE)
UUIDS = [NODE["answers"][f"nvmlDeviceGetUUID(gpu{i})"] for i in (0, 1)]
MEASURED = recorded_figures()  # what a healthy H100 of that node measured in its full doctor run
FIGURES = {"dram": MEASURED["dram_bytes_per_s"], "fp32": MEASURED["fp32_flops"], "bf16": MEASURED["bf16_flops"],
           "sustained": MEASURED["bf16_sustained_flops"], "h2d": MEASURED["h2d_bytes_per_s"],
           "d2h": MEASURED["d2h_bytes_per_s"]}  # the loads' stand-ins say these (tests/fault_doctor/load.py)
WAIT_S = 60.0  # a loaded 2-core machine: far above the ~1.5 s a run takes


def start(tmp_path, record=LOADED_NODE, mode="quick", **fake) -> DoctorRun:
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    env = {"DOCTOR_FAKE_PIDS": str(pids), "DOCTOR_FAKE_PHASE_S": "0.3", "DOCTOR_FAKE_FIGURES": json.dumps(FIGURES)}
    env.update({f"DOCTOR_FAKE_{k.upper()}": v if isinstance(v, str) else json.dumps(v) for k, v in fake.items()})
    opts = DoctorOptions(mode=mode, load_cmd=[sys.executable, str(LOAD)], p2p_cmd=[sys.executable, str(P2P)],
                         sustained_s=0.3, extra_env=env, kernel_log=[])
    return DoctorRun(Nvml(RecordedNvml(record)), opts).start()


def finish(run: DoctorRun, tmp_path, mode="quick") -> dict:
    assert run.wait(WAIT_S), "the doctor's run did not end"
    doc = build_document(run, mode)
    validate(json.loads(json.dumps(doc)), "doctor")
    left = [int(p.name) for p in (tmp_path / "pids").iterdir() if _alive(int(p.name))]
    assert not left, f"processes the run started outlived it: {left}"
    return doc


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def findings(doc, gpu=None, status=None):
    return [f for f in doc["findings"]
            if (gpu is None or f["gpu"] == gpu) and (status is None or f["status"] == status)]


def test_a_quick_doctor_of_a_healthy_node_loads_every_gpu_at_once_and_finds_nothing(tmp_path):
    run = start(tmp_path)
    doc = finish(run, tmp_path)
    assert doc["status"] == "ok" and doc["exit_code"] == 0 and doc["mode"] == "quick", \
        [f["message"] for f in doc["findings"] if f["status"] != "ok"]
    for g in doc["gpus"]:
        a = g["active"]
        assert set(a["figures"]) == {"dram_bytes_per_s", "fp32_flops", "bf16_flops", "bf16_sustained_flops",
                                     "sm_clock_loaded_mhz", "h2d_bytes_per_s", "d2h_bytes_per_s"}
        assert a["load"]["pcie"]["samples"] >= 1 and a["load"]["sustained"]["samples"] >= 1
        # what NVML said while the recorded node was loaded (GPU 0 1440 MHz, GPU 1 1560: 8% apart, within the margin)
        assert a["figures"]["sm_clock_loaded_mhz"] == NODE["answers"][f"nvmlDeviceGetClockInfo(gpu{g['index']},1)"]
    assert [p["gpus"] for p in doc["pairs"]] == [[0, 1], [1, 0]] and {p["kind"] for p in doc["pairs"]} == {"nvlink"}
    spans = [[(p["t_start"], p["t_end"]) for p in ld.events.phases if p["name"] == "pcie"][0] for ld in run.loads]
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"the two GPUs copied to the host at the same time: {spans}"  # one GPU at a time
    both = [[p for p in ld.events.phases if p["name"] == "dram"][0]["t_start"] for ld in run.loads]
    assert abs(both[0] - both[1]) < max(s1 - s0 for s0, s1 in spans) + 5  # started together, not one after the other
    assert {g["health_after"]["index"] for g in doc["gpus"]} == {0, 1} and doc["gpus"][0]["xids"] == []
    kept = state_records(doc)
    assert [k["uuid"] for k in kept] == UUIDS and kept[0]["status"] == "ok"
    assert kept[0]["figures"]["dram_bytes_per_s"] == MEASURED["dram_bytes_per_s"] and kept[0]["findings"] == []


@pytest.mark.slow
def test_the_thermal_gpu_of_the_issue_is_named_under_load(tmp_path):
    doc = finish(start(tmp_path, "constructed_thermal_load.json"), tmp_path)
    assert doc["status"] == "degraded" and doc["exit_code"] == 7
    assert [g["status"] for g in doc["gpus"]] == ["ok", "degraded"]
    checks = {f["check"] for f in findings(doc, 1, "degraded")}
    assert {"clocks_loaded", "sm_clock_loaded_mhz"} <= checks
    clock = next(f for f in findings(doc, 1) if f["check"] == "sm_clock_loaded_mhz")
    assert clock["value"] == 1297 and clock["expected"] == 1755 and "GPU 0" in clock["source"]


@pytest.mark.slow
def test_a_pcie_link_trained_at_gen3_is_found_under_load(tmp_path):
    doc = finish(start(tmp_path, "constructed_pcie_gen3.json"), tmp_path)
    (f,) = [f for f in findings(doc, 0, "degraded") if f["check"] == "pcie_link_loaded"]
    assert f["value"] == "gen 3 x16" and f["expected"] == "gen 5 x16" and doc["gpus"][1]["status"] == "ok"


@pytest.mark.slow
def test_a_gpu_slower_than_its_sibling_is_named(tmp_path):
    doc = finish(start(tmp_path, scale={UUIDS[1]: 0.85}), tmp_path)
    bad = {f["check"] for f in findings(doc, 1, "degraded")}
    assert {"dram_bytes_per_s", "fp32_flops", "bf16_flops"} <= bad and not findings(doc, 0, "degraded")


@pytest.mark.slow
def test_a_hung_load_is_stopped_at_its_deadline_and_the_other_gpu_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_mod, "STARTUP_S", 5.0)
    monkeypatch.setattr(doctor_mod, "TURN_S", 0.5)
    monkeypatch.setattr(doctor_mod, "TURN_LIMIT_S", 1.0)
    t0 = time.monotonic()
    doc = finish(start(tmp_path, fault={UUIDS[0]: "hang@bf16"}), tmp_path)
    assert time.monotonic() - t0 < 5.0 + 0.3 + 1.0 + 1.0 + 10.0  # its deadline, the grace period and some slack
    (f,) = [f for f in findings(doc, 0) if f["check"] == "active"]
    assert f["status"] == "failed" and "the load hung (stopped)" in f["message"]
    assert doc["gpus"][0]["active"]["figures"].keys() == {"dram_bytes_per_s", "fp32_flops"}  # what it measured
    assert doc["gpus"][1]["status"] == "ok" and "h2d_bytes_per_s" in doc["gpus"][1]["active"]["figures"]
    assert doc["exit_code"] == 8


@pytest.mark.slow
def test_a_load_that_crashes_during_its_copies_gives_the_turn_to_the_next(tmp_path):
    doc = finish(start(tmp_path, fault={UUIDS[0]: "segv@pcie", UUIDS[1]: ""}), tmp_path)
    (f,) = [f for f in findings(doc, 0) if f["check"] == "active"]
    assert f["status"] == "failed" and "killed by signal 11" in f["message"]
    assert "d2h_bytes_per_s" in doc["gpus"][1]["active"]["figures"]  # GPU 1 still had its turn


@pytest.mark.slow
def test_a_cuda_error_is_the_gpus_failure_and_a_missing_package_is_exit_4(tmp_path):
    doc = finish(start(tmp_path, fault={UUIDS[1]: "cuda@dram"}), tmp_path)
    (f,) = [f for f in findings(doc, 1) if f["check"] == "active"]
    assert f["status"] == "failed" and "illegal memory access" in f["message"] and doc["exit_code"] == 8
    doc = finish(start(tmp_path, fault={UUIDS[0]: "missing"}), tmp_path)
    assert doc["exit_code"] == 4 and doc["errors"][0]["kind"] == "missing_dependency"


def test_a_stop_ends_every_child_and_the_document_says_interrupted(tmp_path):
    run = start(tmp_path)
    deadline = time.monotonic() + WAIT_S
    while not any(p["name"] == "sustained" for ld in run.loads for p in ld.events.phases):
        assert time.monotonic() < deadline and not run.poll(), "no load reached its sustained phase"
        time.sleep(0.02)
    run.stop(signal.SIGINT)
    doc = finish(run, tmp_path)
    assert doc["interrupted"] and doc["signal"] == "SIGINT" and doc["exit_code"] == 130
    assert state_records(doc) == []  # a partial run is not kept for --export


@pytest.mark.slow
def test_a_load_hung_in_its_host_copies_loses_its_turn_and_the_next_gpu_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_mod, "TURN_LIMIT_S", 1.0)
    run = start(tmp_path, fault={UUIDS[0]: "hang@pcie", UUIDS[1]: ""})
    doc = finish(run, tmp_path)
    (f,) = [f for f in findings(doc, 0) if f["check"] == "active"]
    assert f["status"] == "failed" and "the host copies did not end within 1 s" in f["message"]
    assert "h2d_bytes_per_s" in doc["gpus"][1]["active"]["figures"]  # before GPU 0's turn, or after it was stopped
    assert doc["gpus"][1]["status"] == "ok"


@pytest.mark.slow
def test_gpus_in_mig_mode_held_by_others_or_lost_are_not_loaded(tmp_path):
    for record, why in (("constructed_mig_on.json", "MIG mode is on"), ("constructed_gpu_lost.json", "lost")):
        run = start(tmp_path, record)
        doc = finish(run, tmp_path)
        assert [ld.index for ld in run.loads] == [0] and run.p2p is None and doc["pairs"] == []
        assert why in doc["gpus"][1]["active"]["skipped"] and doc["gpus"][0]["active"]["figures"]
    doc = finish(start(tmp_path, "constructed_other_process.json"), tmp_path)
    assert "other process(es) hold the GPU" in doc["gpus"][0]["active"]["skipped"]
    assert doc["gpus"][0]["status"] == "degraded" and doc["gpus"][1]["active"]["figures"]


@pytest.mark.slow
def test_a_hung_pair_copy_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_mod, "P2P_S", 2.0)
    doc = finish(start(tmp_path, p2p_fault="hang"), tmp_path)
    assert len(doc["pairs"]) == 2 and all(p["bytes_per_s"] is None for p in doc["pairs"])
    pf = [f for f in doc["findings"] if f["check"] == "p2p"]
    assert {f["status"] for f in pf} == {"failed"} and "hung" in pf[0]["message"]


def test_a_passive_run_starts_nothing(tmp_path):
    run = DoctorRun(Nvml(RecordedNvml("constructed_remap_pending.json")), DoctorOptions(mode="passive", kernel_log=[]))
    run.start()
    assert run.poll() and run.loads == [] and run.sampler is None
    doc = build_document(run, "passive")
    validate(doc, "doctor")
    assert doc["exit_code"] == 7 and all(g["active"] is None for g in doc["gpus"])


LOADED = sorted(p.name for p in (HERE / "data" / "health").glob("recorded_*_loaded.json"))


@pytest.mark.slow
@pytest.mark.skipif(not LOADED, reason="no node recorded yet: bench/gpu/doctor_gpu.sh records them")
@pytest.mark.parametrize("record", LOADED or ["none"])
def test_a_recorded_node_under_load_fails_nothing(tmp_path, record):
    doc = finish(start(tmp_path, record), tmp_path)
    assert not findings(doc, status="failed"), [f["message"] for f in findings(doc, status="failed")]
    assert all(g["active"]["load"]["pcie"]["samples"] for g in doc["gpus"] if not g["active"].get("skipped"))
