"""The culprit of a run, named while it runs and kept for its document (gputop/session/culprit_log.py), its trace and
its replay: a recorded hang on 2 H100s (its rank 1 stops and runs nothing while GPU 0 waits in the all-reduce) whose
process lists name the ranks of a real gloo job instead (its rank 0 sleeps outside the loop, its rank 1 waits in
all_reduce), played through the run's monitor tick by tick with the real stack reader, recorded, then replayed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from test_rank_stacks import job, needs_pyspy, ranks_of  # noqa: F401 (job: the fixture)

from gputop.headless.replay import MarksFinder, replay_document
from gputop.session.monitor import Monitor
from gputop.session.report import build_document, render_text
from gputop.telemetry.trace import ReplaySource

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "gputop" / "schema" / "monitor.schema.json").read_text())
HANG = Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x2" / "hang_idle.jsonl.gz"
FACTS = {"status": "timeout", "pid": None, "exit_code": 6, "command_exit_code": 137, "ended": "timeout",
         "wall_s": 43.1, "signal": None, "errors": []}


def played_run(pids_of_gpu: dict[int, int], record: str, mon_ready=None) -> Monitor:
    """The hang trace through a culprit-judging monitor (its sampler stepped by hand), its pids those given
    (``mon_ready(monitor)`` may return them, once the monitor is made); each stack read the live node asks for, and
    each flight recorder dump, is let end before the next tick (a real run's end while it goes on)."""
    src = ReplaySource(str(HANG), speed=float("inf"))
    mon = Monitor(src, record=record, culprit=True)
    pids_of_gpu = mon_ready(mon) if mon_ready is not None else pids_of_gpu
    for tick in src.ticks:
        for i, g in enumerate(tick["gpus"]):
            for p in g.get("processes") or []:
                p["pid"] = p["pgid"] = pids_of_gpu[i]
    found = MarksFinder(src.marks, mon.static, src.ticks)
    mon.sampler.listeners = [found if fn is mon.finder else fn for fn in mon.sampler.listeners]
    mon.finder = found
    mon.mark("started", 0.0)
    mon.t0 = 0.0
    while not src.finished:
        mon.sampler.step()
        if mon.stacks.busy():
            assert mon.stacks.wait(60)
        while mon.flight is not None and mon.flight.busy():
            time.sleep(0.02)
    mon.poll_marks()
    mon.mark("exited 137")
    mon.stop()
    return mon


@pytest.mark.slow
@needs_pyspy
def test_a_run_names_its_culprit_while_it_stalls_and_its_replay_says_the_same(job, tmp_path):  # noqa: F811
    j = job("sleep")
    ranks_of(j, {0: "time.sleep", 1: "dist.all_reduce"})
    trace = str(tmp_path / "run.jsonl")
    mon = played_run({0: j.pids[1], 1: j.pids[0]}, trace)  # GPU 1 ran nothing: the sleeping rank's
    doc = build_document("run", mon, FACTS, ["torchrun", "train.py"], "2026-11-27T00:00:00+00:00")
    jsonschema.validate(json.loads(json.dumps(doc)), SCHEMA)
    c = doc["culprit"]
    assert c["kind"] == "outside" and c["culprit_ranks"] == [0] and c["culprit_gpus"] == [1]
    assert c["where"].startswith(f"rank 0 (pid {j.pids[0]}, GPU 1) is not in a collective: in rank_main at "
                                 "gloo_job.py:")
    assert 0 < c["named_after_s"] <= 30 and c["stall_began_s"] > 8  # the trace's work ends at ~16 s, then the stall
    g0, g1 = doc["gpus"]
    assert (g1["verdict"]["class"], g1["verdict"]["subclass"]) == ("culprit", "outside")
    assert "time.sleep(seconds)" in g1["verdict"]["evidence_text"]
    assert g0["verdict"]["job"]["culprit"]["culprit_gpus"] == [1]
    assert any(line.startswith(f"culprit: rank 0 (pid {j.pids[0]}, GPU 1) is not in a collective")
               for line in render_text(doc).splitlines())
    rows = [json.loads(line) for line in open(trace)]
    stacks = [r for r in rows if r["type"] == "stacks"]
    assert stacks and str(j.pids[0]) in stacks[0]["stacks"]
    again = replay_document(trace)  # the ranks are long gone: the trace holds what named them
    assert again["culprit"]["where"] == c["where"] and again["culprit"]["named_after_s"] == c["named_after_s"]
    assert again["gpus"][1]["verdict"]["class"] == "culprit"


def test_a_trace_without_stacks_rows_names_the_culprit_gpu_from_telemetry_alone():
    doc = replay_document(str(HANG))
    assert doc["gpus"][1]["verdict"]["class"] == "culprit"  # its GPU ran nothing while its peer stalled
    c = doc["culprit"]
    assert (c["basis"], c["kind"], c["culprit_gpus"], c["culprit_ranks"]) == ("telemetry", "outside", [1], [])
    assert c["sentence"].startswith("GPU 1: its rank is not in the collective GPU0 waits in for ")
    assert "culprit (from telemetry; no rank's stack was read): GPU 1: its rank" in render_text(doc)


@pytest.mark.slow
@needs_pyspy
def test_a_stall_asks_the_ranks_flight_recorders_for_a_dump_and_keeps_what_it_says(tmp_path):
    """The ranks keep their dump pipes as ProcessGroupNCCL does (tests/fault_jobs/fr_rank.py) and answer with real
    dumps of a job whose rank 1 never called the 6th all-reduce: once GPU 0 has stalled 2 s the run asks for a dump,
    and its document, trace and replay say rank 1 is behind; the stacks (rank 1's GPU ran nothing) name it too."""
    from test_flight_recorder import DUMPS, start_ranks

    ranks = []

    def with_ranks(mon):
        fr = mon.use_flight_recorder()
        ranks.extend(start_ranks(fr, {r: DUMPS / "behind_2" / f"rank_{r}" for r in (0, 1)}))
        return {0: ranks[0].pid, 1: ranks[1].pid}

    trace = str(tmp_path / "run.jsonl")
    try:
        mon = played_run({}, trace, with_ranks)
    finally:
        for p in ranks:
            p.kill()
            p.wait()
    doc = build_document("run", mon, FACTS, ["torchrun", "train.py"], "2026-11-27T00:00:00+00:00")
    mon.close()
    c = doc["culprit"]
    assert c["flight_recorder"]["kind"] == "behind" and c["flight_recorder"]["culprit_ranks"] == [1]
    assert c["flight_recorder_at_s"] >= c["stall_began_s"]
    assert c["culprit_ranks"] == [1] and c["culprit_gpus"] == [1]  # the stacks agree: rank 1's GPU ran nothing
    rows = [json.loads(line) for line in open(trace)]
    assert [r["result"]["mismatch"]["culprit_ranks"] for r in rows if r["type"] == "flight_recorder"] == [[1]]
    assert replay_document(trace)["culprit"]["flight_recorder"] == c["flight_recorder"]


@needs_pyspy
def test_ranks_whose_stacks_cannot_be_read_say_why_and_the_telemetry_verdict_stands(tmp_path):
    """The ranks are not Python (``sleep``): the document says so in one line a rank, and the GPU that ran nothing
    while its peer stalled is the culprit all the same, from telemetry."""
    sleepers = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    try:
        mon = played_run({0: sleepers[0].pid, 1: sleepers[1].pid}, str(tmp_path / "run.jsonl"))
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    doc = build_document("run", mon, FACTS, ["torchrun", "train.py"], "2026-11-27T00:00:00+00:00")
    c = doc["culprit"]
    assert (c["basis"], c["kind"], c["culprit_gpus"], c["culprit_ranks"]) == ("telemetry", "outside", [1], [])
    a, b = sleepers[0].pid, sleepers[1].pid
    assert c["sentence"].endswith(f"; the stacks: no rank's stack could be read (pid {a} (GPU 0): stack unknown: pid "
                                  f"{a} is not a Python process py-spy can read; pid {b} (GPU 1): stack unknown: pid "
                                  f"{b} is not a Python process py-spy can read)")
    assert render_text(doc).count("culprit (from telemetry; no rank's stack was read): GPU 1: its rank") == 1
    v1 = doc["gpus"][1]["verdict"]
    assert (v1["class"], v1["subclass"]) == ("culprit", "outside")  # the telemetry's: its GPU sat idle
    assert doc["gpus"][0]["verdict"]["class"] == "stalled"


def test_a_dump_of_a_running_job_names_no_mismatch_and_a_run_is_judged_on_its_own_gpus():
    """The 4-H100 corpus's shared-GPU run (no hang): the flight recorder dump taken 20 s into the running job had
    rank 2 one collective behind (the ranks' buffers read moments apart) and was named a mismatch culprit. A dump
    names a mismatch only when taken during a stall, and a trace from before the flag (none) counts it as one only
    after a stall began. A run's culprit block is its own GPUs' records (a neighbour's stalled job on the node is
    not the run's)."""
    from gputop.analysis.live import StacksRead
    from gputop.session.culprit_log import CulpritLog

    behind = {"kind": "behind", "seq": 7820, "op": "all_reduce", "culprit_ranks": [2], "sentence": "rank 2 behind"}
    log = CulpritLog.from_rows([{"type": "flight_recorder", "t": 30.7, "result": {"mismatch": behind},
                                 "stalled": False}])
    assert log.block(0.0) is None and log.records() is None
    old = CulpritLog.from_rows([{"type": "flight_recorder", "t": 30.7, "result": {"mismatch": behind}}])
    assert old.block(0.0) is None  # no flag, no stall seen: not a hang
    hung = CulpritLog.from_rows([{"type": "flight_recorder", "t": 30.7, "result": {"mismatch": behind},
                                  "stalled": True}])
    assert hung.block(0.0)["culprit_ranks"] == [2]
    neighbour = {2: {"kind": "outside", "sentence": "rank 0 (pid 20, GPU 2) is ...", "culprit_ranks": [0],
                     "culprit_gpus": [2], "culprit_pids": [20], "ranks": []}}
    mine = {0: {"kind": "left", "sentence": "pid 11 (GPU 1) left the job", "culprit_ranks": [None],
                "culprit_gpus": [1], "culprit_pids": [11], "ranks": []}}
    log = CulpritLog()
    log.reads += [StacksRead(9.2, 8.7, {}, neighbour), StacksRead(27.3, 26.8, {}, mine)]
    assert log.block(0.0)["culprit_gpus"] == [2]  # the node's first named culprit
    assert log.block(0.0, gpus={0, 1})["culprit_gpus"] == [1]  # the run's own


# The flight recorder dump of the healthy 15-minute DDP job on GPUs 2-3 of a 4-H100 node (2026-11-27 09:35 UTC,
# .devrun of the lead: bench/gpu/culprit/job.py --case healthy --seconds 900 under gputop --run), taken 33 s into it
# while the culprit corpus's job on GPUs 0-1 was stalled: rank 0 one collective behind (the ranks' buffers read
# moments apart), named as the healthy job's mismatch culprit.
HEALTHY_DUMP = {"asked": 2, "ranks": [0, 1], "why": None, "unreadable": [],
                "mismatch": {"kind": "behind", "process_group": "0", "seq": 34420, "culprit_ranks": [0],
                             "op": "all_reduce", "where": "job.py:81 (step)", "ops": {"1": "broadcast"},
                             "sizes": {"1": [[1]]},
                             "sentence": "rank 0 never called collective #34420 (broadcast) of process group 0 that "
                                         "rank 1 called: behind, at #34419 (all_reduce); its last collective was "
                                         "issued at job.py:81 (step)"},
                "collectives": {"per_s": 1788.0, "median_bytes": 16781312, "mean_bytes": 8393745, "count": 2000,
                                "span_s": 1.118, "ops": {"broadcast": 500, "all_reduce": 1500}, "small": False}}


class _Node:
    """What CulpritLog reads of the monitor's live node: its GPUs' NVML indices and a snapshot of their verdicts."""

    def __init__(self, names, stalled):
        from gputop.analysis.live import Judged, NodeSnapshot
        from gputop.analysis.verdict import Cls, Verdict
        self.names = names
        self._snap = NodeSnapshot(40.0, tuple(
            Judged(i, Verdict(Cls.STALLED, "collective", 0.9, {"stalled_for_s": 12.0}) if g in stalled
                   else Verdict(Cls.COMMS_BOUND, None, 0.6)) for i, g in enumerate(names)))

    def snapshot(self):
        return self._snap


class _Dumps:
    """The command's flight recorder as CulpritLog reads it: its latest dump, when it was read, and asks for more."""

    def __init__(self, result):
        self.latest, self.read_at, self.asked = result, 33.1, 0

    def dump_async(self):
        self.asked += 1
        return True


def test_a_neighbour_jobs_stall_is_not_the_runs_and_its_flight_recorder_dump_names_no_culprit():
    from gputop.session.culprit_log import CulpritLog

    log = CulpritLog(flight=_Dumps(HEALTHY_DUMP))
    log.live = _Node([0, 1, 2, 3], stalled={0})  # the neighbour's job (GPUs 0-1) stalled, this run's (2-3) not
    log.seen_on_gpus(5.0, {2, 3})
    log({"t": 20.0})  # (15 s after the job's start: not yet its collectives' sample at 20 s)
    assert log.flight.asked == 0  # a neighbour's stall asks this job's ranks for nothing
    assert log.block(0.0, {2, 3}) is None and log.records({2, 3}) is None
    rows = [{"type": "flight_recorder", "t": 33.1, "result": HEALTHY_DUMP, "stalled": False, "stalled_gpus": [0]}]
    assert CulpritLog.from_rows(rows).block(0.0, {2, 3}) is None  # replayed: the same
    rows[0].update(stalled=True, stalled_gpus=[0, 2])  # the run's own GPU stalled: its dump names rank 0
    assert CulpritLog.from_rows(rows).block(0.0, {2, 3})["culprit_ranks"] == [0]
    own = CulpritLog(flight=_Dumps(HEALTHY_DUMP))
    own.live = _Node([0, 1, 2, 3], stalled={2})
    own.seen_on_gpus(5.0, {2, 3})
    own({"t": 20.0})
    assert own.flight.asked == 1 and own.block(0.0, {2, 3})["culprit_ranks"] == [0]
