"""Attribution anywhere on a GPU (issue 37), scored: gputop/evaluate/anywhere.py on the compact documents of the
2-H100 run (tests/data/attribution_anywhere/, README there), docs/diagnosis.md's table held equal to its output, and
the comparison's rules on documents made here by construction (a job whose every rank wrote its own profile)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gputop.evaluate import anywhere as A

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data():
    return A.load()


def test_the_table_in_docs_is_this_output(data):
    doc = (ROOT / "docs" / "diagnosis.md").read_text()
    table = re.search(r"<!-- anywhere-table:start -->\n(.*?)<!-- anywhere-table:end -->", doc, re.S).group(1)
    rs = A.rows(data)
    assert table == A.markdown(rs) + "\n" + A.summary(rs)


def test_the_run_is_what_the_docs_say_of_it(data):
    meta = data["meta"]
    assert "H100" in meta["device"] and meta["date"].startswith("2026-11-27") and "attribution_anywhere_gpu.sh" in \
        meta["command"]
    cases = {c["case"]: c for c in data["cases"]}
    assert list(cases) == [c for c in A.ORDER if c in cases] and len(cases) == 9
    for c in cases.values():  # the truth is the program's own profiler, never gputop
        assert c["truth"]["by"] in ("torch.profiler", "construction")
    rs = A.rows(data)
    by = {(r.case, r.seq): r for r in rs}
    # one process, a window at a step or on time (CUDA graph replays): within a point of its own profile
    for key in (("infer", 1), ("server", 1), ("server", 2), ("graphs", 1), ("decode", 2), ("shell_two", 1)):
        assert by[key].diff_pt is not None and by[key].diff_pt < 1.0, key
    assert by[("graphs", 1)].how.startswith("time") and by[("infer", 1)].how.startswith("step")
    # the misses the docs explain
    assert by[("torchrun_plain", 1)].how.startswith("time, 1 process") and by[("torchrun_plain", 1)].diff_pt > 40
    assert "pid 3587: no kernels" in by[("accelerate", 1)].compared  # the launcher, asked before its ranks held GPUs
    assert by[("tp_spawn", 1)].diff_pt > A.TARGET_PT and by[("accelerate", 2)].diff_pt > A.TARGET_PT
    assert "no kernels" in by[("decode", 1)].compared and "no kernels" in by[("decode", 3)].compared
    assert cases["decode"]["ended"] == "interrupted" and cases["decode"]["exit_code"] == 143
    assert all("no cupti-python" in r.how for r in rs if r.case == "cupy")


def _doc(windows):
    return {"status": "ok", "exit_code": 0, "command_exit_code": 0, "ended": "exited", "wall_s": 30.0,
            "gpus_used": [0, 1], "gpus": [{"used": True, "first_seen_s": 5.0}, {"used": True, "first_seen_s": 5.1}],
            "attribution": {"windows": windows, "why_none": None}}


def _proc(pid, started_at, cats):
    return {"pid": pid, "started_by": "step", "wall_s": 0.5, "kernel_count": 100, "basis": "kernels", "steps": 10,
            "started_at": started_at, "request_read_at": started_at - 0.5,
            "categories": [{"category": c, "us": us} for c, us in cats.items()]}


def test_a_jobs_window_is_compared_with_every_ranks_own_profile_where_each_wrote_one(tmp_path):
    """Rank 0 arrived last at the all-reduce (its NCCL share small), rank 1 waited for it: each rank's share says
    who waited, the job's is the one to compare with the job's own profile (the runs of 2026-11-26: DDP's ranks
    22% / 61%, the job 48% against 53%)."""
    r0 = _proc(101, 1000.0, {"GEMM/conv": 900.0, "communication": 100.0, "memcpy/memset": 50.0})
    r1 = _proc(102, 1000.004, {"GEMM/conv": 900.0, "communication": 700.0})
    w = {"seq": 1, "asked_because": "GPUTOP_PROFILE_AT=6", "asked_at_s": 6.0, "status": "ok", "pid": 102,
         "processes": 2, "started_by": "step", "wall_s": 0.5, "kernel_count": 200, "basis": "kernels",
         "started_at": 1000.004, "request_read_at": 999.504, "categories": r1["categories"], "per_process": [r0, r1]}
    (tmp_path / "shape_job.json").write_text(json.dumps(_doc([w])))
    gemm, nccl = "sm90_xmma_gemm_bf16bf16_bf16f32", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    (tmp_path / "shape_job.truth.json").write_text(json.dumps(
        {"by": "torch.profiler", "pid": 101, "kernels": [{"name": gemm, "device_us": 880.0},
                                                         {"name": nccl, "device_us": 120.0}]}))
    rows = A.rows(A.compact_dir(tmp_path))
    assert [r.case for r in rows] == ["job"]  # (a rank's truth file is not a shape)
    assert rows[0].compared.startswith("pid 101 (rank 0): GEMM/conv 90/88") and rows[0].diff_pt == pytest.approx(2.0)
    assert "(started 4 ms apart)" in rows[0].how and rows[0].read_to_start_s == pytest.approx(0.5)

    (tmp_path / "shape_job.truth.rank1.json").write_text(json.dumps(
        {"by": "torch.profiler", "pid": 102, "kernels": [{"name": gemm, "device_us": 900.0},
                                                         {"name": nccl, "device_us": 500.0}]}))
    rows = A.rows(A.compact_dir(tmp_path))
    # the job: GEMM 1800 / 2600 = 69% against 1780 / 2400 = 74%; NCCL 31% against 26%
    assert rows[0].compared.startswith("the job's 2 ranks: GEMM/conv 69/74, communication 31/26")
    assert rows[0].diff_pt == pytest.approx(100 * (1780 / 2400 - 1800 / 2600))


def test_a_window_without_kernels_or_unavailable_is_said_not_compared(tmp_path):
    w1 = {"seq": 1, "asked_because": "GPUTOP_PROFILE_AT=6", "asked_at_s": 11.0, "status": "ok", "pid": 7,
          "processes": 1, "started_by": "time", "wall_s": 3.0, "kernel_count": 0, "basis": "ops",
          "categories": [{"category": "other", "us": 10.0}],
          "idle": {"why_none": "the program has not initialised CUDA: no kernels"}}
    w2 = {"seq": 2, "asked_because": "the live verdict held compute-bound for 5 s", "asked_at_s": 20.0,
          "status": "unavailable", "why_none": "the program started its own profiler", "pid": 7}
    (tmp_path / "shape_late.json").write_text(json.dumps(_doc([w1, w2])))
    rows = A.rows(A.compact_dir(tmp_path))  # (no truth file at all)
    assert rows[0].diff_pt is None and "no kernels (the program has not initialised CUDA" in rows[0].compared
    assert rows[1].diff_pt is None and rows[1].how == "unavailable: the program started its own profiler"
    assert A.summary(rows).startswith("0 of 0 windows with kernels")


@pytest.mark.parametrize("marker, name", [("anywhere-table-2", "h100x4_2026-11-27b.json"),
                                          ("anywhere-table-3", "h200x2_2026-11-27.json"),
                                          ("anywhere-table-4", "h100x4_2026-11-27s8.json")])
def test_the_later_runs_tables_in_docs_are_their_output(marker, name):
    """The run again on 2 H100s (the fixes in) and the multi-rank shapes on 2 H200s (the warm-up step, the aligned
    truths): each of docs/diagnosis.md's tables is its compact documents' output."""
    data = A.load(A.DATA.parent / name)
    doc = (ROOT / "docs" / "diagnosis.md").read_text()
    table = re.search(rf"<!-- {marker}:start -->\n(.*?)<!-- {marker}:end -->", doc, re.S).group(1)
    rs = A.rows(data)
    assert table == A.markdown(rs) + "\n" + A.summary(rs)
    assert all(c["truth"]["by"] in ("torch.profiler", "construction") for c in data["cases"])


def test_the_aligned_truths_and_the_warm_up_step_agree_on_tensor_parallel_and_torchrun():
    """On 2 H200s after the fix: the multi-rank shapes whose truths were skewed agree within 5 pt; accelerate's DDP
    is still off (its ranks began 11 ms apart: the docs say so)."""
    rs = {(r.case, r.seq): r for r in A.rows(A.load(A.DATA.parent / "h200x2_2026-11-27.json"))}
    assert rs[("tp_spawn", 1)].diff_pt is not None and rs[("tp_spawn", 1)].diff_pt <= 5.0
    assert rs[("torchrun_plain", 1)].diff_pt <= 5.0 and rs[("infer", 1)].diff_pt <= 5.0
    assert rs[("accelerate", 1)].diff_pt > 5.0


def test_after_the_end_mark_every_shape_with_a_profile_of_its_own_agrees_within_5_pt():
    """On 2 H100s in session 8 (the window's end mark, a job's window 1.5 s at least): every window with kernels of
    the 8 shapes with their own profile within 5 pt, the multi-rank ones' ranks started within 15 ms; CuPy's window is
    all GEMM, as its construction (an fp16 GEMM loop)."""
    data = A.load(A.DATA.parent / "h100x4_2026-11-27s8.json")
    rs = A.rows(data)
    compared = [r for r in rs if r.diff_pt is not None]
    assert {r.case for r in compared} == {"tp_spawn", "torchrun_plain", "accelerate", "shell_two", "infer", "server",
                                          "graphs", "decode"}
    assert all(r.diff_pt <= A.TARGET_PT for r in compared)
    by = {(r.case, r.seq): r for r in rs}
    for case in ("tp_spawn", "accelerate", "torchrun_plain", "shell_two"):
        assert by[(case, 1)].compared.startswith("the job's 2 ranks"), case
        assert int(re.search(r"started (\d+) ms apart", by[(case, 1)].how).group(1)) <= 15, case
    assert re.search(r", 1\.50 s$", by[("tp_spawn", 1)].how) and re.search(r", 1\.50 s$", by[("accelerate", 1)].how)
    cupy = next(c for c in data["cases"] if c["case"] == "cupy")
    assert cupy["truth"]["by"] == "construction" and "GEMM" in cupy["truth"]["why"]
    assert by[("cupy", 1)].compared.startswith("pid") and "GEMM/conv 100/0" in by[("cupy", 1)].compared
    assert all(c["exit_code"] == 0 for c in data["cases"])
