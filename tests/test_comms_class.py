"""The comms-bound class (gputop.analysis.comms) and the all-reduce numbers (gputop.lessons.allreduce), on
synthetic samples and sweeps (the class logic is pure), and the NVLink facts read through the NVML choke point
with a fake pynvml.

The numbers below are made up to sit on either side of the thresholds (analysis/thresholds.py); none is a
measurement. The H200's NVLink facts (18 links at 26562 MB/s) are what a fake NVML reports here.
"""

from __future__ import annotations


import pynvml
import pytest

from gputop.analysis.classify import classify
from gputop.analysis.comms import group_comms
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.verdict import Verdict
from gputop.lessons.allreduce import fit_latency_bandwidth, link_peak, step_verdict, sweep_verdicts
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.sample import GpuReader
from gputop.telemetry.static import read_link, read_nvlink, read_static
from tests.fake_nvml import FakeNvml
from tests.test_classify import COMMS, H200, MATMUL, NVLINK_H200, window

NVLINK_PEAKS = compute_peaks(NVLINK_H200)


def test_the_nvlink_peak_is_active_links_times_their_speed():
    assert NVLINK_PEAKS["nvlink_bytes_per_s_per_dir"] == pytest.approx(18 * 26562e6)
    assert compute_peaks(H200)["nvlink_bytes_per_s_per_dir"] is None  # no NVLink facts: n/a


def test_nvlink_busy_while_the_sms_wait_is_comms_bound_with_the_links_share_of_its_peak():
    v = classify(window(**COMMS), NVLINK_H200, NVLINK_PEAKS)
    assert v.cls == "comms-bound" and v.subclass is None
    frac = 3.0e11 / (18 * 26562e6)
    assert v.evidence["nvlink_link_fraction"] == pytest.approx(frac, rel=1e-3)
    assert f"{100 * frac:.0f}% of the" in v.evidence_text and "NVLink" in v.evidence_text
    assert "latency-bound" not in v.mixed  # NCCL's few busy SMs are not a latency problem


def test_a_link_near_its_peak_is_subclass_link():
    v = classify(window(**dict(COMMS, nvlink_rx_bps=4.2e11, nvlink_tx_bps=4.1e11)), NVLINK_H200, NVLINK_PEAKS)
    assert (v.cls, v.subclass) == ("comms-bound", "link")


def test_nvlink_traffic_under_busy_tensor_cores_is_overlapped_not_comms_bound():
    v = classify(window(**dict(MATMUL, nvlink_rx_bps=3.0e11, nvlink_tx_bps=3.0e11)), NVLINK_H200, NVLINK_PEAKS)
    assert v.cls == "compute-bound"


def test_without_a_link_peak_or_nvlink_counters_there_is_no_comms_verdict():
    assert classify(window(**COMMS), H200, compute_peaks(H200)).cls != "comms-bound"
    no_gpm = dict(COMMS, nvlink_rx_bps=None, nvlink_tx_bps=None)
    assert classify(window(**no_gpm), NVLINK_H200, NVLINK_PEAKS).cls != "comms-bound"


def test_the_gpus_of_one_process_group_are_judged_together():
    a = classify(window(**COMMS), NVLINK_H200, NVLINK_PEAKS)
    b = classify(window(**dict(COMMS, nvlink_rx_bps=1.5e11, nvlink_tx_bps=1.5e11)), NVLINK_H200, NVLINK_PEAKS)
    c = classify(window(**MATMUL), NVLINK_H200, NVLINK_PEAKS)
    out = group_comms([a, b, c])
    assert a.evidence["group_gpus"] == b.evidence["group_gpus"] == 2 and "group_gpus" not in c.evidence
    assert a.evidence["group_link_fraction_min"] == b.evidence["nvlink_link_fraction"]
    assert "2 GPUs of this process group" in a.evidence_text and out == [a, b, c]
    lone = classify(window(**COMMS), NVLINK_H200, NVLINK_PEAKS)
    assert "group_gpus" not in group_comms([lone])[0].evidence


# -- the all-reduce run's numbers -----------------------------------------------------------------------------
def _sweep(latency_us: float, algbw_gbps: float, n: int = 2) -> list[dict]:
    pts = []
    for size in (4096, 65536, 1 << 20, 16 << 20, 256 << 20):
        t = latency_us * 1e-6 + size / (algbw_gbps * 1e9)
        algbw = size / t / 1e9
        pts.append({"size_bytes": size, "time_us": t * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (n - 1) / n})
    return pts


def test_the_fit_recovers_the_latency_and_small_messages_are_latency_bound_large_ones_bandwidth_bound():
    pts = _sweep(20.0, 300.0)
    fit = fit_latency_bandwidth(pts)
    assert fit["latency_us"] == pytest.approx(20.0, rel=0.05)
    assert fit["half_bytes"] == pytest.approx(20e-6 * pts[-1]["algbw_gbps"] * 1e9, rel=0.05)
    link = link_peak({"kind": "nvlink", "gpus": [0, 1], "nvlink_links_active": 18, "nvlink_speed_mbps": 26562})
    vs = sweep_verdicts(pts, fit, link)
    assert [v.cls for v in vs] == ["latency-bound"] * 3 + ["comms-bound"] * 2
    assert vs[0].subclass == "collective latency"
    big = vs[-1]
    assert big.evidence["link_pct"] == pytest.approx(100 * pts[-1]["busbw_gbps"] / (18 * 26.562), rel=1e-3)
    assert "nvlink peak" in big.evidence_text


def test_a_pcie_link_peak_from_nvml_facts():
    peak = link_peak({"kind": "pcie", "gpus": [0, 1], "pcie_max_gen": 5, "pcie_cur_width": 16})
    assert peak["peak_gbps"] == pytest.approx(32 * 128 / 130 / 8 * 16) and "gen 5 x16" in peak["source"]
    assert link_peak(None) is None


def test_a_step_whose_exposed_all_reduce_is_a_fifth_of_it_is_comms_bound():
    def steps(off_ms):
        base = {"mode": "compute only", "step_ms": 10.0, "exposed_comm_ms": 0.0, "exposed_share": 0.0,
                "comm_ms": 5.0, "grad_bytes": 1 << 26}
        off = dict(base, mode="no overlap", step_ms=off_ms, exposed_comm_ms=off_ms - 10.0,
                   exposed_share=(off_ms - 10.0) / off_ms)
        on = dict(base, mode="overlap", step_ms=11.0, exposed_comm_ms=1.0, exposed_share=1 / 11, hidden_pct=80.0)
        return [base, on, off]

    v = step_verdict(steps(15.0))
    assert (v.cls, v.subclass) == ("comms-bound", "exposed") and v.evidence["overlap_hidden_pct"] == 80.0
    assert step_verdict(steps(11.0)).cls == "compute-bound"
    assert step_verdict([]) is None


# -- NVLink facts through the NVML choke point ------------------------------------------------------------------
class NvlinkNvml(FakeNvml):
    """The fake pynvml with two GPUs joined by 18 NVLinks (or none, with ``links=0``)."""

    def __init__(self, static, links=18, **kw):
        super().__init__(static, **kw)
        self.links = links
        self.kib = {pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: 0, pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: 0}

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"handle{i}"

    def nvmlDeviceGetFieldValues(self, h, ids):
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            out[i].fieldId, out[i].scopeId = fid, scope
            out[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            value = {pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT: self.links,
                     pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON: 26562}.get(fid)
            if fid in self.kib and self.links:  # cumulative KiB over all links (scope UINT_MAX)
                assert scope == 0xFFFFFFFF
                out[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                out[i].value.ullVal = self.kib[fid]
                continue
            if value is None:
                out[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                out[i].value.uiVal = value
        return out

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= self.links:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == pynvml.NVML_P2P_CAPS_INDEX_NVLINK
        return pynvml.NVML_P2P_STATUS_OK if self.links else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED


STATIC = dict(H200, driver_version="580.1", cuda_driver_version="13.0", uuid="GPU-0", pci_bus_id="0000:01:00.0",
              max_graphics_clock_mhz=1980)


def test_read_static_has_the_nvlink_facts_and_read_link_says_what_joins_two_gpus():
    nvml = Nvml(NvlinkNvml(STATIC))
    assert read_nvlink(nvml, 0) == {"nvlink_links": 18, "nvlink_links_active": 18, "nvlink_speed_mbps": 26562}
    static = read_static(nvml, 1)
    assert compute_peaks(static)["nvlink_bytes_per_s_per_dir"] == pytest.approx(18 * 26562e6)
    link = read_link(nvml, 0, 1)
    assert link["kind"] == "nvlink" and link["gpus"] == [0, 1]
    assert link_peak(link)["peak_gbps"] == pytest.approx(18 * 26.562)


def test_without_nvlink_the_link_is_pcie_and_missing_fields_are_na_with_a_reason():
    nvml = Nvml(NvlinkNvml(STATIC, links=0))
    link = read_link(nvml, 0, 1)
    assert link["kind"] == "pcie" and link_peak(link)["peak_gbps"] == pytest.approx(32 * 128 / 130 / 8 * 16)
    old = Nvml(FakeNvml(STATIC))  # bindings without these calls: n/a, never an exception
    assert read_nvlink(old, 0) == {"nvlink_links": None, "nvlink_links_active": None, "nvlink_speed_mbps": None}
    assert old.na_reasons["nvlink_fields"] == "FunctionNotFound"


# -- every GPU of a torchrun tree ------------------------------------------------------------------------------
def test_the_finder_sees_each_gpu_of_a_tree_whose_ranks_left_its_session():
    """torchrun starts each rank in a session of its own; they are still the tree's (by parent), so each GPU a
    rank appears on (NVML's process list) is one the monitor diagnoses."""
    import os
    import subprocess
    import sys

    from gputop.session.finder import GpuFinder

    ranks = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
             for _ in range(2)]
    try:
        finder = GpuFinder(pid=os.getpid())
        for t in (0.0, 0.1):
            finder({"t": t, "gpus": [{"processes": [{"pid": ranks[0].pid}]}, {"processes": [{"pid": ranks[1].pid}]},
                                     {"processes": [{"pid": 1}]}]})
        first, how = finder.result()
        assert how == "process list" and sorted(first) == [0, 1]
    finally:
        for r in ranks:
            r.kill()
            r.wait()


def test_without_gpm_nvlink_rx_tx_come_from_nvmls_cumulative_counters():
    fake = NvlinkNvml(dict(STATIC, gpm_supported=False))
    reader = GpuReader(Nvml(fake), 0)
    assert reader.gpm is None
    first = reader.read(t=10.0)
    assert first["nvlink_rx_bps"] is None and first["nvlink_tx_bps"] is None  # the first read opens the window
    fake.kib[pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX] += 2 * 1024 * 1024  # 2 GiB in, 1 GiB out, in 0.5 s
    fake.kib[pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX] += 1024 * 1024
    s = reader.read(t=10.5)
    assert s["nvlink_rx_bps"] == pytest.approx(4 * 2**30) and s["nvlink_tx_bps"] == pytest.approx(2 * 2**30)


def test_a_gpu_without_nvlink_counters_is_not_asked_again():
    fake = NvlinkNvml(dict(STATIC, gpm_supported=False), links=0)
    reader = GpuReader(Nvml(fake), 0)
    for t in (1.0, 1.1, 1.2):
        s = reader.read(t=t)
        assert s["nvlink_rx_bps"] is None and s["nvlink_tx_bps"] is None
    asked = [c for c in fake.calls if c == "nvmlDeviceGetFieldValues"]
    assert len(asked) == 1 and reader.nvlink.ok is False


def test_a_documents_gpu_verdicts_are_judged_together_too():
    """A document's verdicts, read back as Verdicts (the analysis edits no document dict)."""
    a = Verdict.from_dict(classify(window(**COMMS), NVLINK_H200, NVLINK_PEAKS).to_dict())
    half = dict(COMMS, nvlink_rx_bps=1.5e11, nvlink_tx_bps=1.5e11)
    b = Verdict.from_dict(classify(window(**half), NVLINK_H200, NVLINK_PEAKS).to_dict())
    group_comms([a, b, None])
    a, b = a.to_dict(), b.to_dict()
    assert a["evidence"]["group_gpus"] == 2
    assert a["evidence"]["group_link_fraction_min"] == b["evidence"]["nvlink_link_fraction"]
    assert a["evidence_text"].endswith(f"2 GPUs of this process group, the least busy link at "
                                       f"{100 * b['evidence']['nvlink_link_fraction']:.0f}%")
    again = [Verdict.from_dict(a), Verdict.from_dict(b)]
    group_comms(again)  # twice: said once
    assert again[0].evidence_text.count("process group") == 1
