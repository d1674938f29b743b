"""``gputop --doctor``'s passive checks, on NVML answers played back at the pynvml boundary (tests/data/health/: a
2-H100 node's answers, each fault the few answers that differ; constructed in NVML's documented shapes until a
card with that fault is recorded) and on kernel-log records: every degraded and failed path, and what stays ok."""

from __future__ import annotations

import pytest

from fake_health import DATA, RECORDED, RecordedNvml, load_record
from gputop.analysis.doctor_findings import DEGRADED, FAILED, NA, OK
from gputop.analysis.doctor_passive import passive_findings, window_findings, xid_findings
from gputop.telemetry.health import read_cpu_affinity, read_health, read_kernel_xids, read_pcie_link
from gputop.telemetry.nvml import Nvml


def health(record, index: int) -> dict:
    lib = RecordedNvml(record)
    h = read_health(Nvml(lib), index)
    assert not [k for k in lib.missing if "MemoryInfo" not in k], lib.missing  # every call gputop made is recorded
    return h


def found(record, index: int, check: str):
    """The finding ``check`` of GPU ``index`` read from ``record`` (None: no such finding)."""
    return next((f for f in passive_findings(health(record, index)) if f.check == check), None)


def overlay(answers: dict | None = None, errors: dict | None = None) -> dict:
    """The recorded healthy node with a few answers changed (a fault made here, in the record's own shapes): an
    answer given here replaces the node's error for that call (an H100 has no retired pages: NotSupported)."""
    rec = load_record(DATA / RECORDED)
    answers, errors = answers or {}, errors or {}
    return {**rec, "answers": {k: v for k, v in {**rec["answers"], **answers}.items() if k not in errors},
            "errors": {k: v for k, v in {**rec["errors"], **errors}.items() if k not in answers}}


@pytest.mark.parametrize("record", [RECORDED, "constructed_h100x2_healthy.json"])
def test_a_healthy_h100_pair_has_no_finding_beyond_ok(record):
    """The node recorded on 2 H100s (its passive doctor exited 0 twice there), and the constructed base of the
    fault files."""
    for i in (0, 1):
        fs = passive_findings(health(record, i))
        assert {f.status for f in fs} == {OK}, [f.message for f in fs if f.status != OK]
        assert {f.check for f in fs} >= {"ecc", "row_remap", "clocks_idle", "power_limit", "nvlink_state"}
        assert all(f.gpu == i for f in fs)


@pytest.mark.parametrize("record, gpu, check, status, words", [
    ("constructed_gpu_lost.json", 1, "gpu_lost", FAILED, "fell off the bus"),
    ("constructed_ecc_volatile_dbe.json", 1, "ecc", FAILED, "uncorrectable (double-bit) memory errors"),
    ("constructed_ecc_off.json", 0, "ecc", DEGRADED, "switched on at the next reset"),
    ("constructed_remap_failure.json", 1, "row_remap", FAILED, "qualifies for RMA"),
    ("constructed_remap_pending.json", 0, "row_remap", DEGRADED, "waits for a GPU reset"),
    ("constructed_remap_exhausted.json", 0, "row_remap", DEGRADED, "2 memory bank(s) have no spare row"),
    ("constructed_retired_pages_limit.json", 0, "retired_pages", FAILED, "64 retired pages"),
    ("constructed_retired_pages_pending.json", 1, "retired_pages", DEGRADED, "waits for a driver reload"),
    ("constructed_hw_slowdown.json", 0, "clocks_idle", FAILED, "hardware slowdown, hardware power brake"),
    ("constructed_hot_idle.json", 0, "clocks_idle", DEGRADED, "software thermal slowdown at rest"),
    ("constructed_hot_idle.json", 0, "temperature_idle", DEGRADED, "within 5 C of the slowdown threshold 90 C"),
    ("constructed_app_clock_low.json", 1, "clocks_idle", DEGRADED, "lowered to 1410 MHz (default 1980 MHz)"),
    ("constructed_power_limit_low.json", 0, "power_limit", DEGRADED, "lowered to 500 W (default 700 W)"),
    ("constructed_other_process.json", 0, "processes", DEGRADED, "4194301 python3"),
    ("constructed_nvlink_down.json", 1, "nvlink_state", FAILED, "NVLink 7 down while 17 are up"),
])
def test_each_constructed_fault_is_judged_with_its_number_and_source(record, gpu, check, status, words):
    f = found(record, gpu, check)
    assert f is not None and f.status == status and words in f.message, f
    assert f.gpu == gpu
    if check != "gpu_lost":
        assert f.value is not None and f.expected is not None and f.source, f
    other = 1 - gpu  # the other GPU of the node is untouched by its neighbour's fault
    assert {x.status for x in passive_findings(health(record, other))} <= {OK}


def test_the_idle_pcie_link_is_not_judged_at_rest():
    """A GPU lowers its link at idle: the doctor judges the link under load, not this one."""
    assert found("constructed_pcie_gen3.json", 0, "pcie_link_loaded") is None
    assert {f.status for f in passive_findings(health("constructed_pcie_gen3.json", 0))} == {OK}


def test_the_retired_page_limits_are_dcgms():
    over = overlay({"nvmlDeviceGetRetiredPages(gpu0,0)": list(range(47)),
                    "nvmlDeviceGetRetiredPages(gpu0,1)": list(range(16))},
                   {"nvmlDeviceGetRemappedRows(gpu0)": 3, "nvmlDeviceGetRowRemapperHistogram(gpu0)": 3})
    f = found(over, 0, "retired_pages")  # 63 in all: DCGM_LIMIT_MAX_RETIRED_PAGES
    assert f.status == FAILED and f.value == 63 and "DCGM_LIMIT_MAX_RETIRED_PAGES" in f.source
    over["answers"]["nvmlDeviceGetRetiredPages(gpu0,0)"] = list(range(46))
    f = found(over, 0, "retired_pages")  # 62, of which 16 double-bit: over the soft limit of 15
    assert f.status == DEGRADED and f.value == 16
    over["answers"]["nvmlDeviceGetRetiredPages(gpu0,1)"] = list(range(15))
    assert found(over, 0, "retired_pages").status == OK


def test_a_gpu_without_ecc_or_persistence_is_said_not_failed():
    over = overlay({"nvmlDeviceGetPersistenceMode(gpu0)": 0}, {"nvmlDeviceGetEccMode(gpu0)": 3})
    assert found(over, 0, "ecc").status == NA
    f = found(over, 0, "persistence")
    assert f.status == OK and "persistence mode is off" in f.message


def test_no_nvlink_up_at_all_is_said_as_none_connected():
    answers = {f"nvmlDeviceGetNvLinkState(gpu0,{k})": 0 for k in range(18)}
    f = found(overlay(answers), 0, "nvlink_state")
    assert f.status == OK and "no NVLink up (0 of 18)" in f.message and "fabricmanager" in f.message


def test_the_link_under_load_and_the_cpus_are_read_from_nvml():
    lib = RecordedNvml("constructed_pcie_x8.json")
    assert read_pcie_link(Nvml(lib), 1) == (5, 8)
    assert read_cpu_affinity(Nvml(lib), 1) == list(range(56, 112))


# -- XIDs --------------------------------------------------------------------------------------------------------------
KMSG = [  # /dev/kmsg records (PRI,SEQ,TS_USEC,FLAGS;MESSAGE), as the kernel writes them
    "4,1201,5000000000,-;NVRM: Xid (PCI:0000:2a:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
    " SUBSYSTEM=pci",  # a record's continuation line
    "4,1202,5100000000,-;NVRM: Xid (PCI:0000:18:00): 94, pid=77, name=train, Contained: CE User Channel (0x9).",
    "4,1203,5200000000,-;NVRM: Xid (PCI:0000:18:00): 13, pid=77, Graphics Exception: ESR 0x515e28=0x0",
    "6,1204,5300000000,-;usb 1-1: new high-speed USB device",
    "4,1205,5400000000,-;NVRM: Xid (PCI:0000:99:00): 79, pid=1, GPU has fallen off the bus.",  # not one of ours
]
BUSES = ["00000000:18:00.0", "00000000:2A:00.0"]


def test_xids_are_found_per_gpu_with_their_age():
    got = read_kernel_xids(BUSES, KMSG, uptime_s=5600.0)
    assert got["readable"] and got["why"] is None
    assert [(x["xid"], x["age_s"]) for x in got["by_gpu"][0]] == [(94, 500.0), (13, 400.0)]
    assert [(x["xid"], x["pid"], x["age_s"]) for x in got["by_gpu"][1]] == [(79, "1234", 600.0)]
    assert "fallen off the bus" in got["by_gpu"][1][0]["text"]


def test_xids_read_from_dmesg_text_too():
    got = read_kernel_xids(BUSES, ["[ 5000.250000] NVRM: Xid (PCI:0000:18:00): 48, pid=9, DBE (0x1)"], uptime_s=5001.0)
    assert got["by_gpu"][0][0]["xid"] == 48 and got["by_gpu"][0][0]["age_s"] == pytest.approx(0.8, abs=0.05)


def test_hardware_xids_are_judged_by_the_catalogue_and_the_application_s_listed():
    xids = read_kernel_xids(BUSES, KMSG, uptime_s=5600.0)["by_gpu"]
    on0 = {f.value: f for f in xid_findings(0, xids[0])}
    assert on0[94].status == DEGRADED and "contained ECC error" in on0[94].message and "[XID]" in on0[94].message
    assert on0[13].status == OK and "graphics engine exception" in on0[13].message
    (on1,) = xid_findings(1, xids[1])
    assert on1.status == FAILED and "Xid 79 x1, the last 10 min ago: GPU has fallen off the bus" in on1.message


def test_an_old_xid_is_history_and_an_unknown_one_is_pointed_to_the_catalogue():
    old = [{"xid": 79, "pid": None, "text": "", "age_s": 3 * 86400.0}]
    (f,) = xid_findings(0, old)
    assert f.status == OK and "older than 24 h: history" in f.message and "3.0 d ago" in f.message
    (f,) = xid_findings(0, [{"xid": 999, "pid": None, "text": "", "age_s": 5.0}])
    assert f.status == OK and "see NVIDIA's Xid catalogue" in f.message
    (f,) = xid_findings(0, [{"xid": 48, "pid": None, "text": "", "age_s": None}])  # age unknown: judged
    assert f.status == FAILED


def test_an_unreadable_kernel_log_is_said_not_guessed(tmp_path, monkeypatch):
    import gputop.telemetry.health as health_mod

    monkeypatch.setattr(health_mod, "KMSG", str(tmp_path / "kmsg-absent"))
    got = read_kernel_xids(BUSES)
    assert not got["readable"] and "cannot be opened" in got["why"] and got["by_gpu"] == {}
    log = tmp_path / "kmsg-root-only"
    log.write_text("")
    log.chmod(0)
    monkeypatch.setattr(health_mod, "KMSG", str(log))
    import os

    if os.geteuid() != 0:  # root reads anything
        got = read_kernel_xids(BUSES)
        assert not got["readable"] and "run as root" in got["why"]


# -- counters over the run's window ----------------------------------------------------------------------------------
def _with(h: dict, replays=None, link_errors=None) -> dict:
    out = {**h, "pcie": {**h["pcie"]}, "nvlinks": [dict(lk, errors=dict(lk["errors"])) for lk in h["nvlinks"]]}
    if replays is not None:
        out["pcie"]["replay_counter"] = replays
    for (link, name), v in (link_errors or {}).items():
        out["nvlinks"][link]["errors"][name] = v
    return out


def test_nvlink_replays_during_the_run_fail_and_crc_errors_fail_at_100_a_second_over_the_links():
    before = health(RECORDED, 0)
    fs = {f.check: f for f in window_findings(0, before, _with(before, link_errors={(3, "replay"): 2}), 60.0)}
    assert fs["nvlink_errors"].status == FAILED and "link 3 replay +2" in fs["nvlink_errors"].message
    fs = {f.check: f for f in window_findings(0, before, _with(before, link_errors={(5, "crc_flit"): 40}), 60.0)}
    f = fs["nvlink_errors"]  # 0.7 a second: under the 100 a second at which NVIDIA says CRC errors matter
    assert f.status == OK and "crc_flit +40 over 1 link(s) (0.7 a second" in f.message and f.value == 0.67
    fs = {f.check: f for f in window_findings(0, before, _with(before, link_errors={(5, "crc_data"): 9000}), 60.0)}
    assert fs["nvlink_errors"].status == FAILED and "150 a second" in fs["nvlink_errors"].message
    # 18 links at 6000 each: 1800 a second summed over them (DCGM's *_TOTAL field), each link alone under 100
    many = {(k, "crc_data"): 6000 for k in range(18)}
    fs = {f.check: f for f in window_findings(0, before, _with(before, link_errors=many), 60.0)}
    assert fs["nvlink_errors"].status == FAILED and "over 18 link(s)" in fs["nvlink_errors"].message
    fs = {f.check: f for f in window_findings(0, before, before, 60.0)}
    assert fs["nvlink_errors"].status == OK and fs["pcie_replays"].status == OK


def test_pcie_replays_above_dcgms_rate_degrade():
    before = health(RECORDED, 1)
    (f, _) = window_findings(1, _with(before, replays=100), _with(before, replays=109), 60.0)
    assert f.check == "pcie_replays" and f.status == DEGRADED and f.value == 9.0 and "109 since" in f.message
    (f, _) = window_findings(1, _with(before, replays=100), _with(before, replays=108), 60.0)
    assert f.status == OK


# -- nodes recorded on real GPUs (bench/gpu/doctor_gpu.sh writes them; copied into tests/data/health/) ----------------
NODES = sorted(p.name for p in DATA.glob("recorded_*.json") if not p.name.endswith("_loaded.json"))


@pytest.mark.skipif(not NODES, reason="no node recorded yet: bench/gpu/doctor_gpu.sh records them")
@pytest.mark.parametrize("record", NODES or ["none"])
def test_a_recorded_node_is_read_whole_and_fails_nothing(record):
    rec = load_record(DATA / record)
    for i in range(rec["gpus"]):
        fs = passive_findings(health(record, i))
        assert not [f.message for f in fs if f.status == FAILED], record
