"""PyTorch's flight recorder (gputop/session/flight_recorder.py, gputop/analysis/fr_dumps.py): switched on in a
command's environment, dumped on demand through each rank's FIFO, its dumps judged. The dumps are real: written by
torch's own flight recorder in gloo jobs on this CPU (tests/fault_jobs/fr_job.py; tests/data/flight_recorder/, one
folder a fault, its truth in its name); the pipes are real FIFOs kept by real processes as ProcessGroupNCCL keeps
them (tests/fault_jobs/fr_rank.py). NCCL's own pipe on GPUs: bench/gpu/culprit_corpus_gpu.sh."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from export_util import free_port
from gputop.analysis.fr_dumps import DumpError, collective_rate, first_mismatch, load, rank_of_file
from gputop.analysis.rank_stacks import with_flight_recorder
from gputop.session.flight_recorder import BUFFER, FlightRecorder

DUMPS = Path(__file__).parent / "data" / "flight_recorder"
JOBS = Path(__file__).parent / "fault_jobs"


def dumps_of(folder: Path) -> dict[int, dict]:
    return {rank_of_file(p.name): load(p.read_bytes()) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("case, kind, culprits, words", [
    ("behind_2", "behind", [1], "rank 1 never called collective #6 (all_reduce) of process group 0 that rank 0 "
                                "called: behind, at #5 (all_reduce); its last collective was issued at fr_job.py:"),
    ("behind_4", "behind", [3], "rank 3 never called collective #6 (all_reduce) of process group 0 that ranks 0, 1, "
                                "2 called"),
    ("op_4", "op", [1], "collective #6 of process group 0: different collectives (rank 1 broadcast; ranks 0, 2, 3 "
                        "all_reduce); issued at fr_job.py:"),
    ("op_2", "op", [0], "different collectives (rank 0 all_reduce; rank 1 broadcast)"),  # a tie: the lowest rank
    ("sizes_2", "sizes", [0], "all_reduce with different sizes (rank 0 [[1024]]; rank 1 [[2048]])"),
    ("healthy_2", "none", [], "every rank called collective #6 (all_reduce) of process group 0 the same way"),
])
def test_the_first_mismatched_collective_of_real_dumps(case, kind, culprits, words):
    got = first_mismatch(dumps_of(DUMPS / case))
    assert (got["kind"], got["culprit_ranks"], got["seq"]) == (kind, culprits, 6)
    assert words in got["sentence"], got["sentence"]


def test_the_rate_and_size_of_a_jobs_collectives_from_its_json_dump():
    d = dumps_of(DUMPS / "small_json_2")
    assert first_mismatch(d) is None  # every collective matched and completed
    r = collective_rate(d[0])
    assert r["count"] == 150 and r["median_bytes"] == 4096 and r["ops"] == {"all_reduce": 150}
    assert r["per_s"] > 1000 and r["small"]  # 150 4-KiB all-reduces in well under 0.15 s on this CPU
    assert collective_rate(dumps_of(DUMPS / "behind_2")[0]) is None  # 5 entries: too few to say a rate


def test_a_dump_that_names_a_class_is_refused_and_nothing_in_it_runs(tmp_path):
    mark = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return os.system, (f"touch {mark}",)

    with pytest.raises(DumpError, match="names no class, this one names posix.system"):
        load(pickle.dumps({"entries": [Evil()]}))
    assert not mark.exists()
    real = (DUMPS / "op_2" / "rank_0").read_bytes()
    for bad, why in ((real[: len(real) // 2], "not a flight recorder dump"), (b"", "the dump is empty"),
                     (b'{"entries": 3}', "no entries"), (b"\x00" * 64, "not a flight recorder dump")):
        with pytest.raises(DumpError, match=why) as exc:
            load(bad)
        assert "\n" not in str(exc.value)


def test_the_flight_recorder_is_switched_on_unless_the_user_set_it():
    fr = FlightRecorder()
    try:
        env = fr.env({"PATH": "/bin"})
        assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == env["TORCH_FR_BUFFER_SIZE"] == str(BUFFER)
        assert env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == os.path.join(fr.folder, "pipe_")
        assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == os.path.join(fr.folder, "dump_")
        assert oct(os.stat(fr.folder).st_mode & 0o777) == "0o700"
        mine = fr.env({"TORCH_FR_BUFFER_SIZE": "50", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/x/p_",
                       "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/x/d_"})
        assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in mine and mine["TORCH_FR_BUFFER_SIZE"] == "50"
        assert (fr.pipe_stem, fr.dump_stem) == ("/x/p_", "/x/d_") and "TORCH_FR_DUMP_TEMP_FILE" not in mine
    finally:
        fr.close()
    assert not os.path.exists(fr.folder)


def start_ranks(fr: FlightRecorder, dumps: dict[int, Path]) -> list[subprocess.Popen]:
    env = fr.env(dict(os.environ))
    procs = [subprocess.Popen([sys.executable, str(JOBS / "fr_rank.py"), str(r), str(p)], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, text=True, start_new_session=True) for r, p in dumps.items()]
    for p in procs:
        assert p.stdout.readline().startswith("READY")
    return procs


def test_a_dump_asked_through_each_ranks_pipe_is_read_and_judged():
    fr = FlightRecorder()
    ranks = start_ranks(fr, {r: DUMPS / "behind_4" / f"rank_{r}" for r in range(4)})
    try:
        assert len(fr.pipes()) == 4
        got = fr.dump()
        assert got["asked"] == 4 and got["ranks"] == [0, 1, 2, 3] and got["why"] is None
        assert got["mismatch"]["kind"] == "behind" and got["mismatch"]["culprit_ranks"] == [3]
        os.kill(ranks[2].pid, signal.SIGKILL)  # a rank gone: its pipe has no reader; the others still answer
        ranks[2].wait()
        again = fr.dump(wait_s=3.0)
        assert again["asked"] == 3 and again["ranks"] == [0, 1, 3]
    finally:
        for p in ranks:
            p.kill()
            p.wait()
        fr.close()


def test_no_pipe_is_one_line_and_no_wait():
    fr = FlightRecorder()
    try:
        t0 = time.monotonic()
        got = fr.dump()
        assert got["asked"] == 0 and got["why"].startswith("no rank made a flight recorder pipe")
        assert time.monotonic() - t0 < 5
    finally:
        fr.close()


def test_the_dumps_name_the_culprit_where_the_stacks_named_none():
    """NCCL's ranks are past their asynchronous collectives, each at its next sync point: both GPUs stalled, the
    stacks at the same kind of place, no culprit by stack; the flight recorder says rank 1 called another op."""
    rank = lambda r, pid: {"pid": pid, "rank": r, "gpu": r, "gpu_class": "stalled", "place": "outside"}  # noqa: E731
    record = {"kind": "none", "sentence": "every rank is at the same kind of place", "culprit_pids": [],
              "culprit_ranks": [], "culprit_gpus": [], "ranks": [rank(0, 10), rank(1, 11)]}
    finding = first_mismatch(dumps_of(DUMPS / "op_4"))
    out = with_flight_recorder({0: dict(record), 1: dict(record)}, finding)
    assert out[0]["kind"] == "mismatch" and out[0]["culprit_ranks"] == [1] and "where" not in out[0]
    assert out[1]["where"].startswith("rank 1 (pid 11, GPU 1) called another collective #6 than its peers "
                                      "(broadcast) (issued at fr_job.py:")
    assert out[0]["sentence"].startswith("from the flight recorder: collective #6")
    named = dict(record, kind="outside", culprit_ranks=[0])  # the stacks named one: they stand, the finding beside
    kept = with_flight_recorder({0: named, 1: named}, finding)
    assert kept[0]["kind"] == "outside" and kept[0]["flight_recorder"] is finding


@pytest.mark.parametrize("case", ["op_2", "sizes_2"])
def test_two_ranks_that_differ_are_a_tie_and_the_rank_the_stacks_named_is_the_mismatchs_culprit(case):
    """The 2-H100 corpus (2026-11-27): in `op` and `size` the stacks named rank 1 (its Python at the sync after its
    broadcast, its peer in all_reduce); the dumps of two ranks that differ name the lower rank (a tie): rank 1 is
    the culprit of a mismatch, the dumps' words beside the stacks'."""
    rank = lambda r, pid: {"pid": pid, "rank": r, "gpu": r, "gpu_class": "stalled", "place": "outside"}  # noqa: E731
    finding = first_mismatch(dumps_of(DUMPS / case))
    assert finding["culprit_ranks"] == [0]  # the tie
    named = {"kind": "outside", "sentence": "rank 1 (pid 11, GPU 1) is not in a collective", "culprit_pids": [11],
             "culprit_ranks": [1], "culprit_gpus": [1], "ranks": [rank(0, 10), rank(1, 11)]}
    out = with_flight_recorder({0: dict(named), 1: dict(named)}, finding)
    assert out[1]["kind"] == "mismatch" and out[1]["culprit_ranks"] == [1]
    assert out[1]["sentence"] == f"rank 1 (pid 11, GPU 1) is not in a collective; from the flight recorder: " \
                                 f"{finding['sentence']}"
    behind = first_mismatch(dumps_of(DUMPS / "behind_2"))  # rank 1 behind: not a tie of two that differ
    assert with_flight_recorder({0: dict(named)}, behind)[0]["kind"] == "outside"


@pytest.mark.slow
@pytest.mark.parametrize("fault, kind, culprit", [("behind", "behind", 3), ("op", "op", 1)])
def test_fresh_dumps_of_a_real_gloo_job_say_the_same(tmp_path, fault, kind, culprit):
    pytest.importorskip("torch")
    port = str(free_port())
    stem = str(tmp_path / "rank_")
    subprocess.run([sys.executable, str(JOBS / "fr_job.py"), fault, port, stem, "4"], check=True, timeout=300,
                   capture_output=True)
    got = first_mismatch(dumps_of(tmp_path))
    assert (got["kind"], got["culprit_ranks"]) == (kind, [culprit])


def test_many_small_collectives_are_named_on_every_gpu_of_the_job():
    """The rate and size a real gloo job's flight recorder showed (150 all-reduces of 4 KiB in ~0.05 s) said on the
    verdicts of a recorded 2-H100 job, whatever each GPU's own class; a job of large collectives is left alone."""
    from gputop.analysis.collectives import small_collectives
    from gputop.headless.replay import replay_monitor

    info = collective_rate(dumps_of(DUMPS / "small_json_2")[0])
    mon = replay_monitor(str(Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x2" / "comms_mlp.jsonl.gz"))
    verdicts = [g.verdict for g in mon.diagnose().gpus]
    small_collectives(verdicts, info)
    for v in verdicts:
        assert v.notes[0].startswith(f"{info['per_s']:.0f} collectives a second of 4 KiB (median; 150 all_reduce in "
                                     "the flight recorder's last ")
        assert "latency, not bandwidth" in v.notes[0] and v.evidence["collective_median_bytes"] == 4096
        assert v.job["collectives"]["small"] is True
    big = [g.verdict for g in mon.diagnose().gpus]
    small_collectives(big, dict(info, median_bytes=64 << 20, small=False))
    assert all("collectives" not in v.job for v in big)
