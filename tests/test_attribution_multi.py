"""Profiler windows on a job of several GPUs (--profile with torchrun): each rank's window answers for the GPU its
process held, and a window whose NCCL share is tiny refutes a comms-bound verdict (analysis.attribution._refuted).

The recorded trace is Lightning's DDP on 2 H100s (tests/data/traces/heldout_multi_h100x2): gputop's counters read
comms-bound (collectives) there while torch.profiler in the program put NCCL at 2% of its kernel time. The windows
here are built from that profile (its rank 0 truth file: the top kernels' names and times over 5 steps, NCCL's
share, the step's time): the inputs a window of that program carries."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gputop.analysis.attribution import apply_window, attribute, job_categories, window_for_gpu
from gputop.analysis.verdict import Verdict
from gputop.headless.replay import replay_monitor
from gputop.session.report import build_document

ROOT = Path(__file__).resolve().parents[1]
HELD2 = ROOT / "tests" / "data" / "traces" / "heldout_multi_h100x2"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def lightning_window(pid: int) -> dict:
    """Rank 0's profile as a loader's answer: its kernels (NCCL at its measured share), 5 steps' wall time."""
    t = json.loads((HELD2 / "held_lightning_ddp_truth_rank0.json").read_text())
    steps = t["profiled_steps"]
    kernels = [{"name": n, "count": steps, "device_us": us} for n, us in t["top_kernels"]]
    nccl_us = t["nccl_share"] * t["kernel_us_per_step"] * steps
    kernels.append({"name": NCCL, "count": steps, "device_us": nccl_us})
    wall = t["step_s"] * steps
    busy = t["kernel_us_per_step"] * steps / 1e6
    return {"pid": pid, "wall_s": wall, "gpu_busy_s": busy, "steps": steps, "step_kind": "optimizer step",
            "ops": [], "kernels": kernels}


def test_a_window_with_nccl_under_a_tenth_of_kernel_time_refutes_comms_bound():
    a = attribute(lightning_window(1))
    comms = next(c["share"] for c in a["categories"] if c["category"] == "communication")
    assert comms < 0.1
    verdict = Verdict("comms-bound", "collectives", 0.7, evidence_text="NVLink 2 GB/s", advice="overlap")
    out = apply_window(verdict, a).to_dict()
    assert out["class"] != "comms-bound" and out["class"] == a["finding"]["class"] and "comms-bound" in out["mixed"]
    assert 0.5 <= out["confidence"] <= 0.8 and "not waiting in collectives" in out["evidence_text"]
    no_finding = apply_window(verdict, dict(a, finding=None)).to_dict()
    assert no_finding["class"] == "comms-bound" and no_finding["confidence"] == 0.35
    kept = dict(a, categories=[{"category": "communication", "share": 0.6, "us": 1.0, "count": 1}])
    assert apply_window(verdict, kept).cls == "comms-bound"  # NCCL's share high: comms stands


def test_each_gpu_of_the_job_takes_its_own_ranks_window():
    mon = replay_monitor(str(HELD2 / "held_lightning_ddp.jsonl.gz"))
    try:
        pids = mon.pids_by_gpu()
        ranks = {g: sorted(p for p in ps if p is not None) for g, ps in pids.items()}
        assert sorted(ranks) == [0, 1] and all(ranks.values())
        per = [{"pid": ranks[g][0], **attribute(lightning_window(ranks[g][0]))} for g in (0, 1)]
        window = {"seq": 1, "status": "ok", "pid": per[0]["pid"], **per[0], "per_process": per}
        assert window_for_gpu([window], set(pids[1]))["pid"] == ranks[1][0]
        assert window_for_gpu([window], {-1}) is None
        facts = {"status": "ok", "pid": mon.pid, "exit_code": 0, "command_exit_code": 0, "ended": "exited",
                 "wall_s": 1.0, "signal": None, "errors": []}
        before = build_document("replay", mon, facts, None, None)
        doc = build_document("replay", mon, facts, None, None, attribution={"seconds": 3.0, "windows": [window],
                                                                            "why_none": None})
    finally:
        mon.close()
    assert before["verdict"]["class"] == "comms-bound" and doc["verdict"]["class"] != "comms-bound"  # the run's too
    assert "comms-bound" in doc["verdict"]["mixed"]
    for g0, g in zip(before["gpus"], doc["gpus"]):
        assert g0["verdict"]["class"] == "comms-bound"  # the counters alone (the known miss)
        v = g["verdict"]
        assert v["class"] != "comms-bound" and "comms-bound" in v["mixed"], (g["index"], v["class"])
        assert any(re.search(r"NCCL's kernels [0-9]% of kernel time", n) for n in v["notes"]), v["notes"]


# -- real windows of two ranks (tests/data/attribution/ddp_windows_h100x2.json) ---------------------------------------
WINDOWS2 = json.loads((ROOT / "tests" / "data" / "attribution" / "ddp_windows_h100x2.json").read_text())


def _comms(p: dict) -> float:
    return sum(c["share"] for c in p["categories"] if c["category"] == "communication")


def test_a_late_ranks_small_nccl_share_does_not_refute_its_jobs_collectives():
    """DDP ResNet-50 with its all-reduce after backward, both ranks profiled at the same steps, twice: the rank
    that was late has few NCCL microseconds (its peer waited in NCCL for it), and which rank is late changes from
    one window to the next. A comms-bound verdict stands on both GPUs while any rank of the job waits in NCCL."""
    windows = WINDOWS2["ddp_resnet50_after_backward"]["windows"]
    shares = [sorted(_comms(p) for p in w["per_process"]) for w in windows]
    assert all(lo < 0.10 <= hi for lo, hi in shares[1:]) and shares[0][1] > 0.5  # a rank under 10%, its peer over
    pids = [p["pid"] for p in windows[0]["per_process"]]
    assert [round(_comms(p), 2) for p in windows[0]["per_process"]] != \
        [round(_comms(p), 2) for p in windows[1]["per_process"]]
    verdict = Verdict("comms-bound", "collectives", 0.8, evidence_text="NVLink 5 GB/s", advice="overlap")
    for pid in pids:
        w = window_for_gpu(windows, {pid})
        assert w["pid"] == pid and w["job_comms_share"] == max(_comms(p) for p in windows[-1]["per_process"])
        assert apply_window(verdict, w).cls == "comms-bound"
    late = min(windows[-1]["per_process"], key=_comms)
    alone = {**late, "job_comms_share": None}  # judged on its own window, it would have been refuted
    assert apply_window(verdict, alone).cls != "comms-bound"


def test_lightnings_ranks_windows_on_two_gpus():
    """Lightning's DDP (held out) under --profile on 2 H100s: both ranks' windows start at the same step; the GPU
    idles most of each (the host is the limit: its finding), and one rank waits in NCCL (40% of its kernel time)
    while the other has 2%: the job's comms-bound is not refuted, host-bound is the windows' finding."""
    (w,) = WINDOWS2["held_lightning_ddp"]["windows"]
    a, b = w["per_process"]
    assert abs(a["started_at"] - b["started_at"]) < 0.05 and a["steps"] == b["steps"] == 10
    assert sorted(round(_comms(p), 2) for p in (a, b)) == [0.02, 0.4]
    assert all(p["finding"]["class"] == "host-bound" and p["gpu_idle_share"] > 0.5 for p in (a, b))


def test_the_jobs_nccl_share_over_its_ranks_agrees_with_the_programs_own_profile():
    """Each rank's NCCL share moves with which rank was late; summed over the job's ranks it is stable, and it is
    what the program's own torch.profiler (every rank, after a synchronize) puts it at."""
    case = WINDOWS2["ddp_resnet50_after_backward"]
    truth = sum(t["nccl_share"] * t["kernel_us"] for t in case["truth"]) / sum(t["kernel_us"] for t in case["truth"])
    for w in case["windows"]:
        job = {c["category"]: c for c in job_categories(w["per_process"])}
        ranks = [_comms(p) for p in w["per_process"]]
        assert max(ranks) - min(ranks) > 0.35  # the ranks apart
        assert abs(job["communication"]["share"] - truth) < 0.06, (job["communication"], truth)  # the job's agrees
        assert abs(sum(c["share"] for c in job.values()) - 1) < 0.01
