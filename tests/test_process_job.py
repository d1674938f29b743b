"""A node's processes grouped into jobs (gputop/telemetry/process_job.py, gputop/analysis/comms.py's ``node_jobs``
and ``job_pids``), on real process trees shaped as launchers shape them: torchrun starts each rank in a session of
its own (a group of one: the process group says nothing), ``mp.spawn``'s children and a shell script's ranks share
their parent's group, ranks that meet at one ``MASTER_ADDR:MASTER_PORT`` are one job, and two jobs started apart on
one node are two — never merged (issue 36's culprit judged a neighbour's ranks with a job's on a shared 4-GPU node).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fault_util import cmdline, sigkill, started
from gputop.analysis.comms import job_pids, node_jobs
from gputop.telemetry.process_job import JobReader, recorded_job

CLEAN = {k: v for k, v in os.environ.items()
         if k not in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")}

# a launcher that starts N ranks as torchrun does: each rank in a session of its own (start_new_session)
TORCHRUN_LIKE = textwrap.dedent("""
    import subprocess, sys, time
    ranks = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
             for _ in range(int(sys.argv[1]))]
    time.sleep(120)
""")
# mp.spawn's shape: children of one Python program, in its process group. Their target is time.sleep, not a
# function of the program: a spawned child of `python -c` cannot find the program's functions (its __main__ is
# built-in), died at once and was a zombie, cmdline empty, unless a poll caught it in the ms before
SPAWN_LIKE = textwrap.dedent("""
    import multiprocessing as mp, time
    if __name__ == "__main__":
        ps = [mp.get_context("spawn").Process(target=time.sleep, args=(120,)) for i in range(2)]
        [p.start() for p in ps]
        time.sleep(120)
""")
SHELL_TWO = "python3 -c 'import time; time.sleep(120)' & python3 -c 'import time; time.sleep(120)' & wait"


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (from every /proc/N/stat's parent field)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return out


def ranks_of(pid: int, n: int) -> list[int]:
    """The ``n`` rank processes ``pid`` started (those that run the ranks' code: not multiprocessing's resource
    tracker), once all are there (waited for: a start takes what the machine gives it)."""
    from export_util import wait_for

    def ranks():
        got = [c for c in children(pid) if b"time.sleep(120)" in cmdline(c) or b"spawn_main" in cmdline(c)]
        return sorted(got) if len(got) == n else None
    return wait_for(ranks, 60, f"{n} ranks of {pid}", step=0.05)


def reap_tree(p: subprocess.Popen) -> None:
    """SIGKILL ``p`` and everything under it (ranks in sessions of their own included), then reap ``p``."""
    todo, seen = [p.pid], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children(pid))
    sigkill(seen)
    p.wait()


def start(argv, **env):
    """``argv`` started in a session of its own, returned once its exec is done (its environment in place)."""
    return started(subprocess.Popen(argv, env=dict(CLEAN, **env), start_new_session=True), " ".join(argv).encode())


def listed(reader: JobReader, pids: list[int]) -> list[dict]:
    """The processes as the sampler lists them: pid, pgid and the job it read."""
    out = []
    for pid in pids:
        p = {"pid": pid, "pgid": os.getpgid(pid)}
        job = reader.of_process(p)
        p["job"], p["job_source"] = job.job, job.source
        out.append(p)
    return out


def tick(gpu_procs: list[list[dict]]) -> list[dict]:
    return [{"t": 1.0, "gpus": [{"index": i, "processes": ps} for i, ps in enumerate(gpu_procs)]}]


@pytest.fixture
def trees():
    started = []
    yield started
    for p in started:
        reap_tree(p)


def test_launchers_ranks_are_one_job_and_two_launchers_two(trees):
    """Two torchrun-like launchers of 2 ranks each, an mp.spawn-like program and a shell script of two ranks, all on
    one node at once: four jobs, each rank with its own job's peers only."""
    a = start([sys.executable, "-c", TORCHRUN_LIKE, "2"])
    b = start([sys.executable, "-c", TORCHRUN_LIKE, "2"])
    c = start([sys.executable, "-c", SPAWN_LIKE])
    d = start(["sh", "-c", SHELL_TWO])
    trees.extend([a, b, c, d])
    ranks = {name: ranks_of(p.pid, 2) for name, p in zip("abcd", (a, b, c, d))}
    reader = JobReader("node-a")
    procs = {name: listed(reader, pids) for name, pids in ranks.items()}
    assert {p["job"] for p in procs["a"]} == {f"launcher:{a.pid}@node-a"}
    assert {p["job"] for p in procs["b"]} == {f"launcher:{b.pid}@node-a"}
    assert {p["job"] for p in procs["c"]} == {f"pgid:{c.pid}@node-a"}  # the program's group
    assert {p["job"] for p in procs["d"]} == {f"pgid:{d.pid}@node-a"}  # the script's group
    # eight GPUs, one rank each: four jobs of two GPUs
    gpus = [[p] for name in "abcd" for p in procs[name]]
    assert sorted(node_jobs(tick(gpus), list(range(8)))) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert sorted(sorted(j) for j in job_pids(tick(gpus), list(range(8)))) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # a window asked of one rank from the monitor (its key, POST /profile) asks its job's GPU holders with it
    from gputop.session.profile_whom import job_of

    holders = {p for pids in ranks.values() for p in pids}
    for name, pids in ranks.items():
        assert job_of(pids[0], holders) == set(pids), name


def test_ranks_that_meet_at_one_address_are_one_job_whatever_launched_them(trees):
    """Two ranks started by hand, apart (each its own session), with one MASTER_ADDR:MASTER_PORT: one job; a third
    at another port is another."""
    r = [start([sys.executable, "-c", "import time; time.sleep(120)"], MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
         for port in ("29511", "29511", "29512")]
    trees.extend(r)
    procs = listed(JobReader("node-a"), [p.pid for p in r])
    assert [p["job"] for p in procs] == ["rendezvous:127.0.0.1:29511@node-a"] * 2 + ["rendezvous:127.0.0.1:29512@node-a"]
    assert sorted(node_jobs(tick([[p] for p in procs]), [0, 1, 2])) == [[0, 1], [2]]


def test_a_trace_without_jobs_groups_by_process_group_and_ignores_groups_of_one():
    """A trace recorded before jobs were read: processes that share a group are one job; a group only one GPU
    process holds (torchrun's ranks each lead one) says nothing, so such ranks are not split into a job each."""
    torchrun = [[{"pid": 11, "pgid": 11}], [{"pid": 12, "pgid": 12}], [{"pid": 13, "pgid": 13}]]
    assert node_jobs(tick(torchrun), [0, 1, 2]) == [[0, 1, 2]]
    two = [[{"pid": 21, "pgid": 20}], [{"pid": 22, "pgid": 20}], [{"pid": 31, "pgid": 30}], [{"pid": 32, "pgid": 30}]]
    assert sorted(node_jobs(tick(two), [0, 1, 2, 3])) == [[0, 1], [2, 3]]
    three = [[{"pid": 40, "pgid": 40}], [{"pid": 41, "pgid": 40}], [{"pid": 50, "pgid": 50}], [{"pid": 51, "pgid": 50}]]
    assert sorted(node_jobs(tick(three), [0, 1, 2, 3])) == [[0, 1], [2, 3]]  # a group its leader shares: a job
    assert recorded_job({"pid": 5, "pgid": 5, "job": "torchelastic:x", "job_source": "torchelastic"}).job == "torchelastic:x"


def test_a_process_read_in_the_midst_of_its_exec_is_read_again(tmp_path):
    """A process read just as it execs (its parent's wait over, its new environment not yet in place) reads an
    empty /proc/PID/environ: its place in the tree answers for that tick, and the next read takes its environment
    (the first full suite on record once read a fresh rank then and kept its launcher's job)."""
    pid = tmp_path / "4242"
    pid.mkdir()
    # /proc/PID/stat: pid (comm) state ppid pgrp session ... starttime (the 22nd field)
    (pid / "stat").write_text("4242 (python) S 77 4242 4242 " + " ".join(["0"] * 15) + " 123456 0\n")
    (pid / "environ").write_bytes(b"")
    (pid / "cgroup").write_text("0::/\n")
    reader = JobReader("node-a", proc=str(tmp_path))
    assert reader.of_process({"pid": 4242, "pgid": 4242}).job == "launcher:77@node-a"
    (pid / "environ").write_bytes(b"PATH=/bin\0MASTER_ADDR=127.0.0.1\0MASTER_PORT=29511\0")
    assert reader.of_process({"pid": 4242, "pgid": 4242}).job == "rendezvous:127.0.0.1:29511@node-a"
    # a settled read is kept: the same process (pid and start time) is not read again
    (pid / "environ").write_bytes(b"PATH=/bin\0")
    assert reader.of_process({"pid": 4242, "pgid": 4242}).job == "rendezvous:127.0.0.1:29511@node-a"
