"""A job judged whole over its nodes (analysis/cluster_jobs.py) and what a fix would win back
(analysis/cluster_winback.py), on rows made by hand: each rule's case and the cases it must not take. The same
rules over real exporters and a real Prometheus: test_cluster_jobs.py."""

from __future__ import annotations

import pytest

from gputop.analysis import cluster as C
from gputop.analysis.cluster_jobs import judge_jobs
from gputop.analysis.cluster_winback import fp32_to_tensor, max_sm_clock, share, window_share


def gpu(node: str, i: int, cls: str | None, job: str = "j", **numbers) -> C.ClusterGpu:
    return C.ClusterGpu(node, str(i), uuid=f"GPU-{node}-{i}", jobs=[job], cls=cls, instance=f"{node}:9401", **numbers)


def test_a_stall_names_the_node_whose_gpus_are_outside_it_even_one_gone():
    rows = [gpu("a", i, "stalled") for i in range(4)] + [gpu("b", 0, "idle"), gpu("b", 1, "host-bound"),
                                                          gpu("c", 0, "stalled")]
    j = judge_jobs(rows)["j"]
    assert (j.finding, j.culprit_nodes, j.gpus, j.nodes) == ("stall", ["b"], 7, ["a", "b", "c"])
    assert "5 GPUs on a, c wait in a collective" in j.sentence and "2 GPUs are host-bound, idle" in j.sentence
    rows[4].reporting = rows[5].reporting = False  # node b's exporter is gone
    j = judge_jobs(rows)["j"]
    assert j.culprit_nodes == ["b"] and "2 GPUs stopped reporting" in j.sentence
    j = judge_jobs([gpu("a", 0, "stalled"), gpu("b", 0, "stalled")])["j"]  # everyone waits: nobody to blame
    assert j.finding == "stall" and j.culprit_nodes == [] and "a deadlock" in j.sentence


def test_two_nodes_sharing_a_name_are_named_by_their_targets():
    rows = [C.ClusterGpu("vm", "0", uuid="GPU-1", jobs=["j"], cls="stalled", instance="127.0.0.1:1"),
            C.ClusterGpu("vm", "0", uuid="GPU-2", jobs=["j"], cls="idle", instance="127.0.0.1:2")]
    j = judge_jobs(rows)["j"]
    assert j.nodes == ["vm (127.0.0.1:1)", "vm (127.0.0.1:2)"] and j.culprit_nodes == ["vm (127.0.0.1:2)"]


def test_a_straggler_node_works_or_waits_on_its_host_while_the_others_wait_in_collectives():
    waiting = [gpu("a", i, "comms-bound", tensor_pct=20.0, sm_clock_mhz=1980.0, util_pct=90.0) for i in range(3)]
    busy = gpu("b", 0, "compute-bound", tensor_pct=88.0, sm_clock_mhz=1980.0)
    j = judge_jobs(waiting + [busy])["j"]
    assert (j.finding, j.straggler_node) == ("straggler", "b") and "more work: its GPUs' busiest unit 88%" in j.sentence
    hot = gpu("b", 0, "throttled", tensor_pct=22.0, sm_clock_mhz=1400.0)
    assert "slower: SM clock 1400 MHz vs 1980" in judge_jobs(waiting + [hot])["j"].sentence
    host = gpu("b", 0, "input-starved", util_pct=30.0)
    j = judge_jobs(waiting + [host])["j"]
    assert j.straggler_node == "b" and "its host" in j.sentence and "30% vs 90%" in j.sentence
    # no node waits: nobody straggles; one node alone: nothing across nodes to say
    assert judge_jobs([gpu("a", 0, "compute-bound"), gpu("b", 0, "compute-bound")])["j"].finding is None
    assert judge_jobs(waiting)["j"].finding is None


def test_a_node_whose_clocks_lag_the_jobs_others_straggles():
    rows = [gpu("a", i, "compute-bound", sm_clock_mhz=1980.0) for i in range(2)] + \
        [gpu("b", i, "compute-bound", sm_clock_mhz=1500.0) for i in range(2)]
    j = judge_jobs(rows)["j"]
    assert (j.finding, j.straggler_node) == ("straggler", "b") and "1500 MHz vs 1980" in j.sentence


def test_comms_across_nodes_needs_pcie_both_ways_and_nvlink_idle():
    def comms(node, i, **kw):
        return gpu(node, i, "pcie-bound", pcie_rx_bps=25e9, pcie_tx_bps=28e9, **kw)
    j = judge_jobs([comms("a", 0), comms("b", 0)])["j"]
    assert j.finding == "comms across nodes" and "PCIe busy both ways" in j.sentence
    assert judge_jobs([comms("a", 0, nvlink_bps=9e10), comms("b", 0)])["j"].finding is None  # NVLink carries it
    one_way = [gpu("a", 0, "pcie-bound", pcie_rx_bps=25e9, pcie_tx_bps=1e8), comms("b", 0)]
    assert judge_jobs(one_way)["j"].finding is None  # a copy one way is a GPU's own transfer
    assert judge_jobs([comms("a", 0), comms("a", 1)])["j"].finding is None  # one node: its own gputop says so


def test_a_gpu_two_jobs_hold_is_judged_in_each():
    shared = gpu("a", 0, "stalled")
    shared.jobs = ["x", "y"]
    got = judge_jobs([shared, gpu("b", 0, "idle", job="x")])
    assert got["x"].culprit_nodes == ["b"] and got["y"].culprit_nodes == []


def test_what_a_fix_wins_back_by_class():
    assert share("input-starved", sm_pct=30.0, util_pct=60.0) == pytest.approx(0.4)  # the GPU's idle share
    assert share("host-bound", sm_pct=25.0) == pytest.approx(0.75)  # no utilisation exported: the SMs'
    assert share("comms-bound", sm_pct=18.0, util_pct=100.0) == pytest.approx(0.82)  # the SMs' idle share
    assert share("latency-bound", util_pct=40.0) == pytest.approx(0.6)  # no SM activity exported: the GPU's
    assert share("stalled") == share("culprit") == share("idle") == 1.0
    assert share("throttled", sm_clock_mhz=1485.0, max_clock_mhz=1980.0) == pytest.approx(0.25)
    assert share("throttled", sm_clock_mhz=1485.0) is None  # no maximum known
    assert share("compute-bound", sm_pct=10.0) == share("memory-capacity") == 0.0
    assert share("compute-bound", sm_pct=95.0, subclass="tensor") == 0.0
    h100 = {"name": "NVIDIA H100 80GB HBM3"}  # FP32 66.9 TFLOP/s, BF16 dense 989 TFLOP/s: published figures
    assert fp32_to_tensor(h100) == pytest.approx(66.9 / 989.4, rel=1e-3)
    assert window_share("compute-bound", [{"sm_active_pct": 95.0}], h100, "fp32") == pytest.approx(
        0.95 * (1 - 66.9 / 989.4), rel=1e-3)
    assert max_sm_clock("NVIDIA H100 80GB HBM3") == 1980 and max_sm_clock("a GPU nobody knows") is None
    window = [{"sm_active_pct": 20.0, "util_gpu_pct": 50.0}, {"sm_active_pct": None, "util_gpu_pct": 40.0}]
    assert window_share("latency-bound", window) == pytest.approx((0.8 + 0.6) / 2)
    assert window_share("throttled", [{"sm_clock_mhz": 990.0}], h100) == pytest.approx(0.5)
