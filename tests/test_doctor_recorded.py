"""``gputop --doctor``'s runs on a real node judged again: the documents it wrote on 2 H100s on 2026-11-27 (2
passive, 4 quick and 3 full runs, tests/data/health/doctor_h100x2_2026-11-27/) and the node's NVML answers recorded
at rest, put through today's :func:`gputop.analysis.doctor.judge`.

On that node every run came out degraded (exit 7) because CRC data errors grew on all 18 NVLinks of both GPUs, 5-11
a second in all, at rest as under the load, with no replay or recovery error: under the 100 a second at which NVIDIA
says they matter, now said and not judged (gputop/analysis/doctor_passive.py). What stays beyond ok is GPU 0's
software thermal slowdown in three runs, which nvidia-smi's own counter confirms from outside gputop."""

from __future__ import annotations

import gzip
import re

import pytest

from fake_health import RECORDED, RUNS, RecordedNvml, recorded_document
from gputop.analysis.doctor import judge
from gputop.analysis.doctor_findings import OK
from gputop.session.doctor_document import exit_code_for
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import read_static

DOCS = sorted(p.name.removesuffix(".json.gz") for p in RUNS.glob("*.json.gz"))
# the exit codes once the NVLink CRC rule follows NVIDIA's 100 a second (the documents themselves say 7, but passive)
EXIT = {"passive_1": 0, "passive_2": 0, "quick_1": 0, "quick_2": 7, "quick_3": 0, "quick_4": 0,
        "full_1": 7, "full_2": 7, "full_3": 0}
THERMAL = ("clocks_loaded", "bf16_sustained_flops", "sm_clock_loaded_mhz")  # slowdown, and what it costs


def rejudged(doc: dict) -> dict:
    """The document's node as the run handed it to judge(): its GPUs' facts read from the recorded NVML answers."""
    nvml = Nvml(RecordedNvml(RECORDED))
    gpus = [{**{k: g[k] for k in ("index", "name", "health", "health_after", "xids", "active", "peaks")},
             "static": read_static(nvml, g["index"]), "window_s": doc["wall_s"]} for g in doc["gpus"]]
    return judge({"gpus": gpus, "pairs": doc["pairs"], "xid_log": doc["xid_log"]})


def smi_counter(when: str, reason: str) -> list[int]:
    """Each GPU's 'Clocks Event Reasons Counters' entry ``reason`` (microseconds) in ``nvidia-smi -q``."""
    text = gzip.decompress((RUNS / f"nvidia-smi-q-{when}.txt.gz").read_bytes()).decode()
    return [int(v) for v in re.findall(rf"^\s+{reason}\s+: (\d+) us$", text, re.M)]


def test_the_runs_on_record_are_all_here():
    assert DOCS == sorted(EXIT)
    assert [recorded_document(d)["mode"] for d in ("passive_1", "quick_1", "full_1")] == ["passive", "quick", "full"]


@pytest.mark.parametrize("name", sorted(EXIT))
def test_every_finding_is_judged_as_on_the_node_but_the_nvlink_crc_errors(name):
    doc = recorded_document(name)
    v = rejudged(doc)
    now = {(f.check, f.gpu, tuple(f.gpus or ())): f for f in v["findings"]}
    assert len(now) == len(doc["findings"])
    for f in doc["findings"]:
        n = now[(f["check"], f.get("gpu"), tuple(f.get("gpus") or ()))]
        if f["check"] == "nvlink_errors":  # degraded on the node: CRC data errors only, far under 100 a second
            assert f["status"] == "degraded" and "crc_data" in f["message"] and "replay" not in f["message"]
            assert n.status == OK and "crc_data +" in n.message and "over 18 link(s)" in n.message
            assert 5.0 < n.value < 12.0 and n.unit == "per second", n.message
        else:
            assert (n.status, n.message) == (f["status"], f["message"])
    assert exit_code_for(v["status"]) == EXIT[name] and doc["exit_code"] == (0 if name.startswith("passive") else 7)


def test_what_stays_beyond_ok_is_gpu_0s_thermal_slowdown_which_nvidia_smi_counted_too():
    beyond = {}
    for name in DOCS:
        for f in rejudged(recorded_document(name))["findings"]:
            if f.status != OK:
                beyond.setdefault(name, set()).add((f.gpu, f.check))
                assert f.gpu == 0 and f.check in THERMAL, (name, f.message)
                if f.check == "clocks_loaded":
                    assert "software thermal slowdown" in f.message and "the cooling does not keep up" in f.message
    assert sorted(beyond) == ["full_1", "full_2", "quick_2"]
    assert beyond["full_2"] == {(0, c) for c in THERMAL}  # 1260 MHz against GPU 1's 1395: 10% slower
    # from outside gputop: the driver's own time in software thermal slowdown, before and after the runs
    assert smi_counter("before", "SW Thermal Slowdown") == [0, 0]
    on0, on1 = smi_counter("after", "SW Thermal Slowdown")
    assert on0 > 30e6 and on1 == 0  # GPU 0: 53 s of it; GPU 1: none
    assert smi_counter("after", "HW Thermal Slowdown") == [0, 0]  # the board's own protection never engaged


def test_the_nvlink_crc_errors_grew_at_rest_too():
    """Between the two passive runs (well under a second apart, no load) the counters still grew: the links'
    background rate, not the doctor's traffic."""
    def crc(doc, gpu):
        return sum(lk["errors"]["crc_data"] for lk in doc["gpus"][gpu]["health"]["nvlinks"])

    a, b = recorded_document("passive_1"), recorded_document("passive_2")
    assert all(crc(b, i) > crc(a, i) for i in (0, 1))
    assert all(sum(lk["errors"][k] for lk in b["gpus"][i]["health"]["nvlinks"] for k in ("replay", "recovery")) == 0
               for i in (0, 1))
