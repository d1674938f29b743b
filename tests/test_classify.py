"""The classifier on hand-built sample windows with the numbers real GPUs give (H200 reference points:
copy -> DRAM 87%, tensor 0; bf16 matmul -> tensor 94%, DRAM 16%, power cap at 74% clock; 1-element
kernels + sync -> SM activity 0.03% while NVML's duty cycle reads 16%; pageable H2D -> 9 GB/s, SMs 0),
and the one Verdict type it returns."""

from __future__ import annotations

import pytest

import json

from gputop.analysis import thresholds as T
from gputop.analysis.collectives import judge_job
from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.rules import input_starved, memory_bound
from gputop.analysis.rules.base import ramp
from gputop.analysis.timeline import format_timeline, merge, overall, timeline
from gputop.analysis.verdict import Verdict, display_name
from gputop.analysis.vocabulary import CLASSES
from verdict_util import check_verdict, quoted_numbers, unquoted

H200 = {
    "index": 0, "name": "NVIDIA H200", "compute_capability": [9, 0], "architecture": "Hopper", "sm_count": 132,
    "cuda_cores": 16896, "memory_bus_width_bits": 6016, "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201,
    "memory_total_bytes": 150754820096, "pcie_max_gen": 5, "pcie_max_width": 16, "pcie_cur_gen": 5,
    "pcie_cur_width": 16, "power_limit_w": 700.0, "gpm_supported": True,
}
# An A100 without GPM: the fallback path.
A100 = dict(H200, name="NVIDIA A100-SXM4-80GB", compute_capability=[8, 0], architecture="Ampere", sm_count=108,
            cuda_cores=6912, memory_bus_width_bits=5120, max_sm_clock_mhz=1410, max_mem_clock_mhz=1593,
            memory_total_bytes=85899345920, pcie_max_gen=4, pcie_cur_gen=4, power_limit_w=400.0, gpm_supported=False)
PEAKS = compute_peaks(H200)
A100_PEAKS = compute_peaks(A100)
GPM_KEYS = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_pct", "hmma_pct", "imma_pct", "dfma_pct",
            "fp64_pct", "fp32_pct", "fp16_pct", "int_pct")

IDLE = dict(util_gpu_pct=0.0, util_mem_pct=0.0, sm_active_pct=0.0, sm_occupancy_pct=0.0, dram_bw_pct=0.0,
            tensor_pct=0.0, hmma_pct=0.0, imma_pct=0.0, dfma_pct=0.0, fp64_pct=0.0, fp32_pct=0.0, fp16_pct=0.0,
            int_pct=0.0, pcie_tx_bps=2e4, pcie_rx_bps=2e4, sm_clock_mhz=1980, mem_clock_mhz=3201, clock_reasons=[],
            power_w=121.0, temp_c=35, mem_used_bytes=600 * 2**20, mem_total_bytes=150754820096, processes=None,
            lost=False)
MATMUL = dict(util_gpu_pct=100.0, util_mem_pct=24.0, sm_active_pct=96.0, sm_occupancy_pct=20.0, tensor_pct=94.0,
              hmma_pct=94.0, dram_bw_pct=16.0, power_w=690.0, sm_clock_mhz=1474,
              clock_reasons=["software power cap"], mem_used_bytes=2 * 2**30)
COPY = dict(util_gpu_pct=100.0, util_mem_pct=97.0, sm_active_pct=98.8, sm_occupancy_pct=79.7, dram_bw_pct=87.0,
            tensor_pct=0.0, fp32_pct=0.0, power_w=648.0, sm_clock_mhz=1968, mem_used_bytes=3 * 2**30)
TINY = dict(util_gpu_pct=16.0, sm_active_pct=0.03, sm_occupancy_pct=0.01, dram_bw_pct=0.0005, power_w=124.0,
            pcie_rx_bps=1.4e8, pcie_tx_bps=1.7e7)
PAGEABLE = dict(util_gpu_pct=17.0, sm_active_pct=0.0, dram_bw_pct=0.17, pcie_rx_bps=9.0e9, pcie_tx_bps=5.4e8,
                power_w=122.8)
FP32 = dict(util_gpu_pct=100.0, util_mem_pct=15.0, sm_active_pct=99.0, sm_occupancy_pct=60.0, fp32_pct=82.0,
            dram_bw_pct=9.0, power_w=520.0, sm_clock_mhz=1830)
DMMA = dict(util_gpu_pct=100.0, util_mem_pct=20.0, sm_active_pct=97.0, sm_occupancy_pct=20.0, tensor_pct=85.0,
            dfma_pct=84.0, dram_bw_pct=12.0, power_w=600.0, sm_clock_mhz=1700)
STALLS = dict(util_gpu_pct=100.0, util_mem_pct=30.0, sm_active_pct=99.0, sm_occupancy_pct=40.0, fp32_pct=12.0,
              dram_bw_pct=25.0, power_w=330.0)


# A GPU of a data-parallel job waiting on its all-reduce (synthetic; tests/test_comms_class.py has the class).
NVLINK_H200 = dict(H200, nvlink_links_active=18, nvlink_speed_mbps=26562)
COMMS = dict(util_gpu_pct=100.0, sm_active_pct=14.0, sm_occupancy_pct=3.0, dram_bw_pct=8.0, power_w=240.0,
             nvlink_rx_bps=3.0e11, nvlink_tx_bps=3.0e11)

# NCCL's kernels waiting for a peer that never comes (made up after the 4-H100 corpus's hang traces).
STALLED = dict(util_gpu_pct=100.0, sm_active_pct=18.2, sm_occupancy_pct=4.8, int_pct=0.16, tensor_pct=0.0, fp32_pct=0.0,
               dram_bw_pct=0.001, power_w=130.0, nvlink_rx_bps=0.0, nvlink_tx_bps=0.0, pcie_rx_bps=1e6, pcie_tx_bps=1e6)


def window(n=20, rate=10.0, t0=0.0, **fields):
    base = dict(IDLE, **fields)
    return [dict(base, index=0, t=t0 + i / rate) for i in range(n)]


def nogpm(samples):
    return [dict(s, **{k: None for k in GPM_KEYS}) for s in samples]


def host(cpu, n=20, pid="4242", children=0.0, busiest=None):
    h = {"cpu_pct": 3.0, "cpu_per_core_pct": [busiest if busiest is not None else min(100.0, cpu)] + [2.0] * 15,
         "procs": {pid: {"cpu_pct": cpu, "children_cpu_pct": children, "children": 0}}}
    return [h] * n


def ticks_of(samples, hosts=None):
    hosts = hosts or [{}] * len(samples)
    return [{"t": s["t"], "gpus": [s], "host": h} for s, h in zip(samples, hosts)]


# -- one class per window --------------------------------------------------------------------------------
def test_ramp():
    assert ramp(None, (1, 2)) == 0 and ramp(0.5, (1, 2)) == 0 and ramp(1.5, (1, 2)) == 0.5 and ramp(9, (1, 2)) == 1


def test_bf16_matmul_at_its_power_cap_is_compute_bound_tensor_with_a_note():
    v = classify(window(**MATMUL), H200, PEAKS)
    assert (v.cls, v.subclass) == ("compute-bound", "tensor")
    assert v.confidence >= 0.8 and "throttled" not in v.mixed
    assert "tensor 94%" in v.evidence_text and "DRAM 16%" in v.evidence_text
    assert v.evidence["tensor_pct"] == pytest.approx(94.0)
    assert any("power cap" in n and "normal" in n for n in v.notes)
    assert "tensor" in v.advice and "precision" in v.advice
    assert v.missing == []


def test_fp32_and_fp64_pipes_are_named():
    v = classify(window(**FP32), H200, PEAKS)
    assert (v.cls, v.subclass) == ("compute-bound", "fp32") and "FP32 82%" in v.evidence_text
    assert "tensor cores" in v.advice
    v = classify(window(**DMMA), H200, PEAKS)
    assert (v.cls, v.subclass) == ("compute-bound", "fp64") and "DMMA" in v.evidence_text


def test_copy_is_memory_bound_with_the_dram_peak_in_the_evidence():
    v = classify(window(**COPY), H200, PEAKS)
    assert v.cls == "memory-bound" and v.confidence >= 0.8
    assert "DRAM 87% of 4.8" in v.evidence_text
    assert v.evidence["dram_bytes_per_s"] == pytest.approx(0.87 * PEAKS["dram_bytes_per_s"], rel=1e-3)
    assert "fusion" in v.advice or "fuse" in v.advice


def test_tiny_kernels_with_syncs_are_launch_bound_even_with_a_busy_cpu():
    v = classify(window(**TINY), H200, PEAKS, host=host(100.0), watched_pid="4242")
    assert (v.cls, v.subclass) == ("latency-bound", "launch")
    assert "SMs only 0.03% busy" in v.evidence_text and "16%" in v.evidence_text
    assert "CUDA graphs" in v.advice
    assert "input-starved" not in v.mixed


def test_busy_sms_with_no_unit_near_its_peak_are_latency_bound_stalls():
    v = classify(window(**STALLS), H200, PEAKS)
    assert (v.cls, v.subclass) == ("latency-bound", "stalls")


def test_sms_full_of_warps_with_no_unit_at_a_peak_is_on_chip_memory_bound():
    """An elementwise loop over data that fits in L2: SMs busy, many warps, DRAM and pipes low."""
    v = classify(window(**dict(STALLS, sm_occupancy_pct=75.0, dram_bw_pct=12.0)), H200, PEAKS)
    assert (v.cls, v.subclass) == ("memory-bound", "cache") and v.confidence <= memory_bound.CACHE_SCORE
    assert v.display_name() == "memory-bound (on-chip memory)" and "75% occupancy" in v.evidence_text


def test_integer_pipe():
    v = classify(window(**dict(STALLS, int_pct=85.0)), H200, PEAKS)
    assert (v.cls, v.subclass) == ("compute-bound", "int")


def test_pageable_copies_are_pcie_bound_not_launch_bound():
    v = classify(window(**PAGEABLE), H200, PEAKS, host=host(100.0), watched_pid="4242")
    assert (v.cls, v.subclass) == ("pcie-bound", "pageable")
    assert "9 GB/s" in v.evidence_text and "14% of the 63 GB/s link" in v.evidence_text
    assert "pin" in v.advice
    v = classify(window(util_gpu_pct=20.0, pcie_rx_bps=54e9, pcie_tx_bps=1e8), H200, PEAKS,
                 host=host(4.0), watched_pid="4242")
    assert (v.cls, v.subclass) == ("pcie-bound", "link")


def test_pcie_traffic_overlapped_with_compute_is_a_note():
    v = classify(window(**dict(MATMUL, pcie_rx_bps=30e9)), H200, PEAKS)
    assert v.cls == "compute-bound" and "pcie-bound" not in v.mixed
    assert any("PCIe also busy" in n for n in v.notes)


def bursty(n=20):
    """A DataLoader with num_workers=0: the GPU computes 1 sample in 4, idle while the CPU transforms."""
    out = []
    for i, s in enumerate(window(n)):
        if i % 4 == 0:
            s.update(util_gpu_pct=70.0, sm_active_pct=60.0, tensor_pct=40.0, hmma_pct=40.0, dram_bw_pct=20.0,
                     power_w=300.0)
        else:
            s.update(util_gpu_pct=2.0, sm_active_pct=0.2)
        out.append(s)
    return out


def test_gpu_idle_between_bursts_with_a_busy_feeder_is_input_starved():
    v = classify(bursty(), H200, PEAKS, host=host(99.0), watched_pid="4242")
    assert v.cls == "input-starved" and v.confidence >= 0.6
    assert "99% CPU" in v.evidence_text
    assert "num_workers" in v.advice and "pin_memory" in v.advice
    assert "5 bursts" in v.evidence_text
    # the same bursts with a feeder idle on the CPU (blocked on I/O, sleeping): still starved, less sure
    v2 = classify(bursty(), H200, PEAKS, host=host(3.0), watched_pid="4242")
    assert v2.cls == "input-starved" and v2.confidence < v.confidence
    assert any("I/O" in n for n in v2.notes)


def test_one_burst_and_an_idle_feeder_is_not_starvation():
    """The tail of a run: one busy sample, then nothing, the process not busy."""
    w = window()
    w[0].update(util_gpu_pct=100.0, sm_active_pct=95.0, tensor_pct=90.0)
    v = classify(w, H200, PEAKS, host=host(2.0), watched_pid="4242")
    assert v.cls == "idle" and v.confidence < 0.5  # most samples idle; nothing fits the whole window


def test_input_starved_without_a_watched_process_is_less_sure_and_says_so():
    hosts = [{"cpu_pct": 7.0, "cpu_per_core_pct": [100.0] + [2.0] * 15}] * 20
    v = classify(bursty(), H200, PEAKS, host=hosts)
    assert v.cls == "input-starved" and v.confidence <= input_starved.NO_FEEDER_CONFIDENCE
    assert any("process tree" in m for m in v.missing)


def test_a_workload_data_wait_hint_makes_input_starved():
    v = classify(window(**dict(MATMUL, util_gpu_pct=55.0, tensor_pct=30.0, hmma_pct=30.0, sm_active_pct=50.0)),
                 H200, PEAKS, hints={"data_wait_fraction": 0.4})
    assert v.cls == "input-starved" and v.evidence["data_wait_fraction"] == 0.4
    assert "waited for data 40%" in v.evidence_text


def test_thermal_slowdown_is_throttled_with_the_load_underneath_in_mixed():
    v = classify(window(**dict(MATMUL, sm_clock_mhz=1100, clock_reasons=["hardware thermal slowdown"])), H200, PEAKS)
    assert (v.cls, v.subclass) == ("throttled", "thermal")
    assert "compute-bound" in v.mixed and "hardware thermal slowdown" in v.evidence_text


def test_a_power_cap_holding_clocks_far_down_is_throttled():
    v = classify(window(**dict(MATMUL, power_w=299.0, sm_clock_mhz=800)), dict(H200, power_limit_w=300.0), PEAKS)
    assert (v.cls, v.subclass) == ("throttled", "power")
    assert "40% of max" in v.evidence_text


def test_memory_capacity():
    full = 0.95 * H200["memory_total_bytes"]
    v = classify(window(mem_used_bytes=full), H200, PEAKS)
    assert v.cls == "memory-capacity" and "95% of" in v.evidence_text and "batch" in v.advice
    # 93% while running flat out: the load is the verdict, capacity is mixed in
    v = classify(window(**dict(MATMUL, mem_used_bytes=0.93 * H200["memory_total_bytes"])), H200, PEAKS)
    assert v.cls == "compute-bound" and "memory-capacity" in v.mixed
    # 98%: the next allocation fails whatever runs
    v = classify(window(**dict(MATMUL, mem_used_bytes=0.98 * H200["memory_total_bytes"])), H200, PEAKS)
    assert v.cls == "memory-capacity" and "compute-bound" in v.mixed
    v = classify(window(), H200, PEAKS, hints={"oom": True})
    assert (v.cls, v.subclass) == ("memory-capacity", "oom") and "out-of-memory" in v.evidence_text


def test_idle():
    v = classify(window(), H200, PEAKS)
    assert v.cls == "idle" and v.confidence >= 0.9 and v.mixed == []
    # a busy CPU with a GPU that did nothing at all is still idle, with a note
    v = classify(window(), H200, PEAKS, host=host(100.0), watched_pid="4242")
    assert v.cls == "idle" and any("busy on the CPU" in n for n in v.notes)


def test_a_window_of_whole_ticks_reads_gpu_position_and_host():
    other = window(**COPY)
    ts = [{"t": a["t"], "gpus": [a, b], "host": h} for a, b, h in zip(window(**TINY), other, host(100.0))]
    assert classify(ts, H200, PEAKS, gpu=1).cls == "memory-bound"
    v = classify(ts, H200, PEAKS, gpu=0)
    assert v.cls == "latency-bound" and v.evidence["feeder_cpu_pct"] == 100.0


def test_verdict_dict_has_every_field():
    d = classify(window(**COPY), H200, PEAKS).to_dict()
    assert d["class"] in CLASSES and set(d) >= {"class", "label", "subclass", "confidence", "evidence",
                                                  "evidence_text", "advice", "mixed", "missing", "notes"}


# -- without GPM -----------------------------------------------------------------------------------------
def test_no_gpm_falls_back_to_duty_cycles_and_power_with_lower_confidence():
    v = classify(nogpm(window(**dict(MATMUL, power_w=380.0, sm_clock_mhz=1410))), A100, A100_PEAKS)
    assert v.cls == "compute-bound" and v.subclass is None
    assert v.confidence <= T.NO_GPM_CONFIDENCE
    assert any(m.startswith("GPM") and "needs Hopper" in m for m in v.missing)
    assert "no GPM" in v.evidence_text

    v = classify(nogpm(window(**dict(COPY, power_w=330.0, sm_clock_mhz=1410))), A100, A100_PEAKS)
    assert v.cls == "memory-bound" and v.confidence <= T.NO_GPM_CONFIDENCE

    v = classify(nogpm(window(**dict(TINY, power_w=70.0, sm_clock_mhz=1410))), A100, A100_PEAKS)
    assert v.cls == "latency-bound" and v.confidence <= T.NO_GPM_CONFIDENCE


def test_no_gpm_pcie_from_nvml_counter_every_tenth_sample():
    w = nogpm(window(**dict(PAGEABLE, power_w=70.0, sm_clock_mhz=1410)))
    for i, s in enumerate(w):
        if i % 10:
            s["pcie_rx_bps"] = s["pcie_tx_bps"] = None
    v = classify(w, A100, A100_PEAKS, host=host(100.0), watched_pid="4242")
    assert v.cls == "pcie-bound"


def test_few_samples_halve_the_confidence():
    full = classify(window(**COPY), H200, PEAKS).confidence
    few = classify(window(n=3, **COPY), H200, PEAKS)
    assert few.confidence == pytest.approx(full * 0.5, abs=0.02) and any("only 3 samples" in n for n in few.notes)


# -- mixed windows -------------------------------------------------------------------------------------
def test_a_window_across_a_phase_change_says_it_is_mixed():
    w = window(n=10, **MATMUL) + window(n=10, t0=1.0, **COPY)
    v = classify(w, H200, PEAKS)
    assert v.cls in ("compute-bound", "memory-bound")
    other = "memory-bound" if v.cls == "compute-bound" else "compute-bound"
    assert other in v.mixed and any("window changes" in n for n in v.notes)
    assert v.confidence < classify(window(**COPY), H200, PEAKS).confidence


def test_ridge_point_kernel_is_mixed_compute_and_memory():
    v = classify(window(**dict(COPY, fp32_pct=75.0, dram_bw_pct=70.0)), H200, PEAKS)
    assert v.cls == "compute-bound" and "memory-bound" in v.mixed


# -- timeline ----------------------------------------------------------------------------------------------
def test_timeline_merges_equal_windows_into_segments():
    samples = bursty(60)
    for s in samples:
        s["t"] = s["t"]
    starved = ticks_of(samples, host(99.0, n=60))
    compute = ticks_of(window(n=60, t0=6.0, **MATMUL), host(100.0, n=60))
    segs = timeline(starved + compute, 0, H200, PEAKS, watched_pid="4242")
    assert [s.cls for s in segs] == ["input-starved", "compute-bound"]
    assert segs[0].t_start == 0.0 and segs[0].t_end == pytest.approx(6.0)
    assert segs[1].t_end == pytest.approx(12.0) and segs[1].windows == 3
    assert segs[1].verdict.evidence["samples"] == 60
    lines = format_timeline(segs)
    assert "input-starved" in lines[0] and "compute-bound (tensor cores)" in lines[1]
    assert format_timeline([s.to_dict() for s in segs]) == lines  # a document's timeline reads the same
    ov = overall(segs).to_dict()
    assert ov["class"] in ("input-starved", "compute-bound") and ov["share"] == 0.5
    assert set(ov["time_by_class_s"]) == {"input-starved", "compute-bound"}
    other = {"input-starved", "compute-bound"} - {ov["class"]}
    assert other <= set(ov["mixed"])


def test_timeline_startup_segment_and_overall_ignores_it():
    ticks = ticks_of(window(n=30)) + ticks_of(window(n=40, t0=3.0, **COPY))
    segs = timeline(ticks, 0, H200, PEAKS, t_on_gpu=3.0)
    assert segs[0].subclass == "startup" and segs[0].t_end == pytest.approx(3.0)
    assert segs[1].cls == "memory-bound"
    ov = overall(segs).to_dict()
    assert ov["class"] == "memory-bound" and ov["share"] == 1.0


def test_mostly_idle_run_is_idle_and_short_work_still_wins_otherwise():
    ticks = ticks_of(window(n=100)) + ticks_of(window(n=20, t0=10.0, **COPY))
    assert overall(timeline(ticks, 0, H200, PEAKS)).cls == "idle"  # 83% idle
    ticks = ticks_of(window(n=40)) + ticks_of(window(n=40, t0=4.0, **COPY))
    assert overall(timeline(ticks, 0, H200, PEAKS)).cls == "memory-bound"


def test_an_idle_gap_between_input_starved_windows_is_part_of_the_starvation():
    a = ticks_of(bursty(20), host(99.0))
    gap = ticks_of(window(n=20, t0=2.0), host(99.0))
    b = ticks_of([dict(s, t=s["t"] + 4.0) for s in bursty(20)], host(99.0))
    segs = timeline(a + gap + b, 0, H200, PEAKS, watched_pid="4242")
    assert [s.cls for s in segs] == ["input-starved"]


def test_timeline_hints_by_time():
    ticks = ticks_of(window(n=40))
    segs = timeline(ticks, 0, H200, PEAKS, hints=lambda a, b: {"oom": a <= 3.0 < b})
    assert [s.cls for s in segs] == ["idle", "memory-capacity"]


def test_merge_weights_evidence_by_duration():
    a = classify(window(**COPY), H200, PEAKS)
    b = classify(window(**dict(COPY, dram_bw_pct=67.0)), H200, PEAKS)
    m = merge([a, b], [3.0, 1.0])
    assert m.evidence["dram_bw_pct"] == pytest.approx(82.0) and m.cls == "memory-bound"
    assert m.evidence["samples"] == 40


# -- the one verdict type ------------------------------------------------------------------------------------
def every_kind_of_verdict() -> dict:
    """A verdict of every class and subclass the classifier gives, from the windows above."""
    full = H200["memory_total_bytes"]
    out = {
        "tensor": classify(window(**MATMUL), H200, PEAKS),
        "fp32": classify(window(**FP32), H200, PEAKS),
        "dmma": classify(window(**DMMA), H200, PEAKS),
        "int": classify(window(**dict(STALLS, int_pct=85.0)), H200, PEAKS),
        "copy": classify(window(**COPY), H200, PEAKS),
        "cache": classify(window(**dict(STALLS, sm_occupancy_pct=75.0, dram_bw_pct=12.0)), H200, PEAKS),
        "launch": classify(window(**TINY), H200, PEAKS, host=host(100.0), watched_pid="4242"),
        "stalls": classify(window(**STALLS), H200, PEAKS),
        "underfilled": classify(window(**dict(STALLS, sm_active_pct=60.0)), H200, PEAKS),
        "pageable": classify(window(**PAGEABLE), H200, PEAKS, host=host(100.0), watched_pid="4242"),
        "link": classify(window(util_gpu_pct=20.0, pcie_rx_bps=54e9, pcie_tx_bps=1e8), H200, PEAKS,
                         host=host(4.0), watched_pid="4242"),
        "starved": classify(bursty(), H200, PEAKS, host=host(99.0), watched_pid="4242"),
        "comms": classify(window(**COMMS), NVLINK_H200, compute_peaks(NVLINK_H200)),  # tests/test_comms_class.py
        "stalled": classify(window(**STALLED), NVLINK_H200, compute_peaks(NVLINK_H200)),  # tests/test_multi_gpu_corpus.py
        "starved-host-core": classify(bursty(), H200, PEAKS, host=[{"cpu_per_core_pct": [100.0] + [2.0] * 15}] * 20),
        "data-wait": classify(window(**dict(MATMUL, util_gpu_pct=55.0, tensor_pct=30.0, hmma_pct=30.0,
                                            sm_active_pct=50.0)), H200, PEAKS, hints={"data_wait_fraction": 0.4}),
        "thermal": classify(window(**dict(MATMUL, sm_clock_mhz=1100, clock_reasons=["hardware thermal slowdown"])),
                            H200, PEAKS),
        "power": classify(window(**dict(MATMUL, power_w=299.0, sm_clock_mhz=800)), dict(H200, power_limit_w=300.0),
                          PEAKS),
        "capacity": classify(window(mem_used_bytes=0.95 * full), H200, PEAKS),
        "oom": classify(window(), H200, PEAKS, hints={"oom": True}),
        "idle": classify(window(), H200, PEAKS, host=host(100.0), watched_pid="4242"),
        "host-bound": classify(window(processes=[{"pid": 4242}]), H200, PEAKS, host=host(99.0), watched_pid="4242"),
        "waiting": classify(window(processes=[{"pid": 4242}]), H200, PEAKS, host=host(2.0), watched_pid="4242"),
        "no-gpm compute": classify(nogpm(window(**dict(MATMUL, power_w=380.0, sm_clock_mhz=1410))), A100, A100_PEAKS),
        "no-gpm memory": classify(nogpm(window(**dict(COPY, power_w=330.0, sm_clock_mhz=1410))), A100, A100_PEAKS),
        "no-gpm latency": classify(nogpm(window(**dict(TINY, power_w=70.0, sm_clock_mhz=1410))), A100, A100_PEAKS),
    }
    ticks = ticks_of(window(n=30)) + ticks_of(window(n=40, t0=3.0, **COPY))
    segs = timeline(ticks, 0, H200, PEAKS, t_on_gpu=3.0)
    out["startup"] = Verdict.from_dict(segs[0].to_dict()["verdict"])
    out["merged"] = Verdict.from_dict(segs[1].to_dict()["verdict"])
    # a job-level class: a job's GPU that runs nothing while its peer has been stalled for 30 s (the job judged together)
    stalled = classify(window(**STALLED), NVLINK_H200, compute_peaks(NVLINK_H200))
    stalled.evidence["stalled_for_s"] = 30.0
    idle = classify(window(processes=[{"pid": 4242}]), H200, PEAKS, host=host(2.0), watched_pid="4242")
    judge_job([stalled, idle])
    out["culprit"] = idle
    return out


def test_the_windows_above_give_every_class():
    got = {v.cls for v in every_kind_of_verdict().values()}
    assert got == set(CLASSES)


@pytest.mark.parametrize("name", list(every_kind_of_verdict()))
def test_each_verdict_has_the_document_shape_and_its_sentence_quotes_its_evidence(name):
    v = every_kind_of_verdict()[name]
    check_verdict(v.to_dict(), "monitor")
    check_verdict(v.to_dict(), "run")  # one shape in both schemas
    assert quoted_numbers(v.evidence_text) or name == "startup"


def test_a_sentence_quoting_a_number_the_evidence_does_not_hold_is_caught():
    v = every_kind_of_verdict()["copy"].to_dict()
    assert unquoted(v) == []
    assert unquoted(dict(v, evidence=dict(v["evidence"], dram_bw_pct=80.0))) == ["87"]  # the sentence says 87%
    assert unquoted(dict(v, evidence_text=v["evidence_text"].replace("87%", "88%"))) == ["88"]


def test_verdict_dict_round_trips():
    v = classify(window(t0=5.0, **COPY), H200, PEAKS)
    d = json.loads(json.dumps(v.to_dict()))
    assert set(d) == {"class", "label", "subclass", "confidence", "evidence", "evidence_text", "advice", "mixed",
                      "missing", "notes", "scores", "window"}
    assert d["label"] == "memory-bound" and d["evidence"]["dram_bw_pct"] == 87.0
    assert Verdict.from_dict(d) == v
    assert Verdict.from_dict(dict(d, share=0.5, time_by_class_s={"memory-bound": 2.0})) == v  # an overall's extras


def test_display_name_is_the_label_and_the_subclass_label():
    assert Verdict("compute-bound", "tensor").display_name() == "compute-bound (tensor cores)"
    assert Verdict("idle").display_name() == "idle"
    # a workload's free-text subclass, and any verdict dict (a document's, a timeline segment)
    assert display_name({"class": "latency-bound", "subclass": "launch overhead"}) == \
        "latency/launch-bound (launch overhead)"
    segs = timeline(ticks_of(window(n=40, **MATMUL)), 0, H200, PEAKS)
    assert display_name(segs[0].to_dict()) == display_name(segs[0].verdict) == "compute-bound (tensor cores)"
    assert "compute-bound (tensor cores)" in format_timeline(segs)[0]


def test_a_verdict_takes_only_the_vocabulary_numbers_and_one_advice():
    with pytest.raises(ValueError, match="kernel-bound"):
        Verdict("kernel-bound")
    with pytest.raises(ValueError, match="confidence"):
        Verdict("idle", confidence=1.5)
    with pytest.raises(TypeError, match="numbers only"):
        Verdict("idle", evidence={"reasons": ["hardware slowdown"]})
    with pytest.raises(TypeError, match="numbers only"):
        Verdict("idle", evidence={"gpm": True})
    with pytest.raises(TypeError, match="one string"):
        Verdict("idle", advice=["a", "b"])
    assert Verdict("compute-bound", "amp speedup", None, {"speedup": 6.1}, "6.1x", "use AMP").confidence is None


def test_a_verdict_knows_the_window_it_judged():
    v = classify(window(n=20, t0=5.0, **COPY), H200, PEAKS)
    assert v.window == {"t_start": 5.0, "t_end": pytest.approx(6.9), "seconds": pytest.approx(1.9)}
    assert Verdict("idle").to_dict()["window"] is None  # not judged on a window
    t0 = 100.0
    ticks = ticks_of(window(n=30, t0=t0)) + ticks_of(window(n=60, t0=t0 + 3.0, **COPY))
    segs = timeline(ticks, 0, H200, PEAKS, t_on_gpu=t0 + 3.0)
    for seg in segs:  # the segment's times are since the first tick; its verdict's are the ticks' own
        w = seg.verdict.window
        assert (w["t_start"] - t0, w["t_end"] - t0) == (pytest.approx(seg.t_start), pytest.approx(seg.t_end))
        assert w["seconds"] == pytest.approx(seg.t_end - seg.t_start)
    ov = overall(segs).to_dict()
    assert ov["window"]["t_start"] == pytest.approx(t0 + 3.0) and ov["window"]["t_end"] == pytest.approx(t0 + 9.0)


def test_the_per_sample_memo_changes_no_verdict():
    """A monitor classifies overlapping windows every second; the memo of each sample's own class must give
    the verdicts a fresh classifier gives, window after window of the demo trace."""
    import gputop.analysis.classify as C
    from gputop.analysis.peaks import compute_peaks
    from gputop.telemetry.sampler import Sampler
    from gputop.telemetry.trace import ReplaySource, demo_trace_path

    src = ReplaySource(demo_trace_path(), speed=float("inf"))
    sampler = Sampler(src, rate_hz=10)
    static = src.static()[0]
    peaks = compute_peaks(static)
    C._sample_classes.clear()
    for _ in range(30):
        for _ in range(10):
            sampler.step()
        window = sampler.window(3.0)
        warm = C.classify(window, static, peaks, gpu=0).to_dict()
        C._sample_classes.clear()
        assert C.classify(window, static, peaks, gpu=0).to_dict() == warm


# -- host-bound (issue 11) ---------------------------------------------------------------------------------
def test_a_busy_process_holding_an_idle_gpu_is_host_bound_and_a_waiting_one_is_idle():
    on_gpu = dict(processes=[{"pid": 4242}])
    v = classify(window(**dict(on_gpu, util_gpu_pct=1.0, sm_active_pct=0.1)), H200, PEAKS, host=host(99.0),
                 watched_pid="4242")
    assert v.cls == "host-bound" and v.confidence >= 0.8, (v.cls, v.scores)
    assert v.evidence["feeder_cpu_pct"] == 99.0 and v.evidence["gpu_idle_pct"] == 99.0
    assert "99% CPU" in v.evidence_text and "idle 99%" in v.evidence_text and "DataLoader" in v.advice
    w = classify(window(**on_gpu), H200, PEAKS, host=host(3.0), watched_pid="4242")
    assert (w.cls, w.subclass) == ("idle", "waiting") and "waits" in w.evidence_text
    # the same busy CPU without a CUDA context on this GPU (start-up, another GPU): not host-bound
    x = classify(window(), H200, PEAKS, host=host(99.0), watched_pid="4242")
    assert x.cls == "idle" and x.subclass is None


def test_a_steady_trickle_of_tiny_kernels_is_launch_bound_not_input_starved():
    """A decode loop: kernels in every sample, SMs busy for a few % of the kernels' time, the Python loop at
    one core; kernel duty only 9%. One label, confident: latency-bound (launch)."""
    decode = dict(util_gpu_pct=9.0, sm_active_pct=0.4, sm_occupancy_pct=0.2, dram_bw_pct=0.5, processes=[{"pid": 4242}])
    v = classify(window(**decode), H200, PEAKS, host=host(100.0), watched_pid="4242")
    assert (v.cls, v.subclass) == ("latency-bound", "launch") and v.confidence >= 0.7, (v.cls, v.scores)
    assert v.scores["input-starved"] < 0.3 and v.scores["host-bound"] < 0.3


def test_a_process_driving_another_gpu_is_not_host_bound_on_the_one_it_only_holds():
    on_gpu = dict(processes=[{"pid": 4242}])
    busy = window(**dict(MATMUL, **on_gpu))
    held = window(**on_gpu)
    ticks = [{"t": a["t"], "gpus": [a, dict(b, index=1)], "host": h}
             for a, b, h in zip(busy, held, host(100.0))]
    v = classify(ticks, H200, PEAKS, watched_pid="4242", gpu=1)
    assert v.cls == "idle" and v.evidence["feeder_busy_elsewhere_fraction"] == 1.0, (v.cls, v.scores)
    assert classify(ticks, H200, PEAKS, watched_pid="4242", gpu=0).cls == "compute-bound"


def test_a_nearly_idle_gpu_with_rare_bursts_and_a_busy_feeder_is_host_bound():
    """Heavy CPU transforms with num_workers=0: one short burst a second, the GPU idle 97% of the time."""
    samples = window(n=40, processes=[{"pid": 4242}])
    for i in (5, 15, 25, 35):
        samples[i] = dict(samples[i], util_gpu_pct=30.0, sm_active_pct=25.0, tensor_pct=10.0)
    v = classify(samples, H200, PEAKS, host=host(100.0, n=40), watched_pid="4242")
    assert v.cls == "host-bound", (v.cls, v.scores)
    assert v.scores["input-starved"] > 0.5  # it fits too (the GPU waits on its input): listed as mixed
