"""Who holds a job up: real ranks (torch.distributed over gloo on the CPU, started with mp.spawn) whose fault is
written down before gputop reads them, their stacks read with the real py-spy, and the culprit named
(gputop/session/stacks.py, gputop/analysis/rank_stacks.py). The NCCL/GPU cases run in bench/gpu (GPU machines)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from export_util import free_port
from gputop.analysis.rank_stacks import Rank, culprit_place, job_records, judge, place_of, view_lines
from gputop.session.stacks import Stack, read_stack, read_stacks, rank_of

JOB = Path(__file__).parent / "fault_jobs" / "gloo_job.py"
torch = pytest.importorskip("torch")
needs_pyspy = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "from gputop.session.stacks import py_spy; assert py_spy()"]).returncode,
    reason="py-spy is not installed")


class Job:
    """A gloo job in its own session; its ranks' pids once both said READY; killed as a group at the end."""

    def __init__(self, fault: str):
        self.proc = subprocess.Popen([sys.executable, str(JOB), fault, str(free_port()), "60"], stdout=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.pids: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(self.pids) < 2:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"the job ended before its ranks were ready (exit {self.proc.wait()})")
            if line.startswith("READY"):
                _, rank, pid = line.split()
                self.pids[int(rank)] = int(pid)
            assert time.monotonic() < deadline, "the ranks never got ready"

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


@pytest.fixture
def job(request):
    made = []

    def start(fault):
        made.append(Job(fault))
        return made[-1]

    yield start
    for j in made:
        j.close()


def ranks_of(j: Job, waiting_for: dict[int, str]) -> list[Rank]:
    """Each rank with its stack, once every rank's innermost program frame is the one the fault puts it in."""
    deadline = time.monotonic() + 30
    while True:
        stacks = read_stacks(list(j.pids.values()))
        places = {r: place_of(stacks[p].to_dict()) for r, p in j.pids.items()}
        if all(waiting_for[r] in (places[r].frame or {}).get("code", "") for r in j.pids):
            break
        assert time.monotonic() < deadline, f"the ranks never reached their places: {places}"
        time.sleep(0.2)
    return [Rank(p, rank_of(p) if rank_of(p) is not None else stacks[p].spawn_index, r, None, stacks[p].to_dict())
            for r, p in sorted(j.pids.items())]


@pytest.mark.slow
@needs_pyspy
def test_a_rank_that_sleeps_outside_the_loop_is_named_with_its_line(job):
    j = job("sleep")
    ranks = ranks_of(j, {0: "time.sleep", 1: "dist.all_reduce"})
    assert [r.rank for r in ranks] == [0, 1]  # mp.spawn's index (os.environ set in the rank is not /proc's)
    c = judge(ranks)
    assert c.kind == "outside" and c.culprits == [0]
    assert c.sentence.startswith(f"rank 0 (pid {j.pids[0]}, GPU 0) is not in a collective: in rank_main at "
                                 "gloo_job.py:")
    assert "(`time.sleep(seconds)  # the culprit: out of the loop`)" in c.sentence
    assert f"rank 1 (pid {j.pids[1]}, GPU 1) waits in all_reduce at gloo_job.py:" in c.sentence
    d = c.to_dict()
    assert d["culprit_ranks"] == [0] and d["culprit_pids"] == [j.pids[0]] and d["ranks"][1]["op"] == "all_reduce"


@pytest.mark.slow
@needs_pyspy
def test_ranks_in_different_collectives_are_a_mismatch(job):
    j = job("mismatch")
    c = judge(ranks_of(j, {0: "dist.broadcast", 1: "dist.all_reduce"}))
    assert c.kind == "mismatch"
    assert "rank 0" in c.sentence and "in broadcast at gloo_job.py:" in c.sentence
    assert "in all_reduce at gloo_job.py:" in c.sentence


@needs_pyspy
def test_a_stack_that_cannot_be_read_says_why_in_one_line(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        got = read_stack(sleeper.pid)
        assert not got.ok and got.why == f"pid {sleeper.pid} is not a Python process py-spy can read"
    finally:
        sleeper.kill()
        sleeper.wait()
    gone = read_stack(sleeper.pid)
    assert gone.why == f"pid {sleeper.pid} is not running"
    # a zombie: exited, not reaped
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        z = read_stack(pid)
        assert "zombie" in z.why and "\n" not in z.why
    finally:
        os.waitpid(pid, 0)


def test_a_py_spy_that_hangs_is_killed_after_its_timeout(tmp_path):
    hang = tmp_path / "py-spy"
    seconds = f"60.{os.getpid()}"  # this test's own hung program: another suite on the machine runs the same test
    hang.write_text(f"#!/bin/sh\nexec sleep {seconds}\n")
    hang.chmod(0o755)
    me = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        t0 = time.monotonic()
        got = read_stack(me.pid, timeout_s=0.5, program=str(hang))
        assert got.why == f"py-spy did not answer for pid {me.pid} within 0.5 s (killed)"
        assert time.monotonic() - t0 < 10  # bounded by the timeout, not by the hung program's 60 s
    finally:
        me.kill()
        me.wait()
    left = subprocess.run(["pgrep", "-f", f"exec sleep {seconds}|^sleep {seconds}$"], capture_output=True,
                          text=True).stdout.split()
    assert not left, f"the hung py-spy outlived its timeout: {left}"


# a Python program that says it is past its start-up (a file of its own), then waits on line 3
WAITING = "import sys, time\nopen(sys.argv[1], 'w').close()\nwhile True: time.sleep(0.5)"


def waiting_programs(tmp_path, n: int) -> list[subprocess.Popen]:
    """``n`` Python programs at WAITING's line 3, each once it said so: before that it has no stack to read."""
    procs = [subprocess.Popen([sys.executable, "-c", WAITING, str(tmp_path / f"ready{i}")]) for i in range(n)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(n)):
        assert time.monotonic() < deadline, f"{sum((tmp_path / f'ready{i}').exists() for i in range(n))} of {n} started"
        assert all(p.poll() is None for p in procs), [p.returncode for p in procs]
        time.sleep(0.02)
    return procs


@needs_pyspy
def test_a_python_program_is_read_where_it_waits(tmp_path):
    """One real program's stack (the quick loop's; 64 at once are slow): its innermost frame is the line it waits on."""
    (me,) = waiting_programs(tmp_path, 1)
    try:
        got = read_stack(me.pid)
        assert got.ok and got.frames[0].line == 3, (got.why, got.frames[:1])
    finally:
        me.kill()
        me.wait()


@pytest.mark.slow
@needs_pyspy
def test_sixty_four_ranks_are_read_at_once(tmp_path):
    procs = waiting_programs(tmp_path, 64)
    try:
        got = read_stacks([p.pid for p in procs])
        readable = [s for s in got.values() if s.ok]
        assert len(got) == 64
        assert len(readable) >= 60, [s.why for s in got.values() if not s.ok][:3]
        assert all(s.frames and s.frames[0].line == 3 for s in readable)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def stack(pid, frames=None, why=None) -> dict:
    return Stack(pid, frames=[], why=why).to_dict() | ({"frames": frames} if frames else {})


def frame(name, short, line, code=None, file=None):
    return {"name": name, "short": short, "file": file or f"/job/{short}", "line": line, "code": code}


def test_a_rank_that_exited_is_the_culprit_whatever_the_others_do():
    ranks = [Rank(10, 0, 0, "idle", stack(10, why="pid 10 exited before its stack was read")),
             Rank(11, 1, 1, "stalled", stack(11, [frame("item", "train.py", 30, "loss.item()")]))]
    c = judge(ranks)
    assert c.kind == "left" and c.culprits == [0]
    assert c.sentence.startswith("rank 0 (pid 10, GPU 0) left the job (pid 10 exited before its stack was read)")


def test_with_nccl_the_gpus_say_who_waits():
    """NCCL's collectives return at once: the waiting rank's Python is at its next sync point, in no collective.
    The rank whose GPU is not in the stalled collective is the culprit."""
    lib = "/usr/lib/python3.12/site-packages/torch/_tensor.py"
    ranks = [Rank(20, 0, 0, "host-bound", stack(20, [frame("load", "data.py", 16, "time.sleep(5)"),
                                                      frame("main", "train.py", 40, "batch = load()")])),
             Rank(21, 1, 1, "stalled", stack(21, [frame("item", "torch/_tensor.py", 10, file=lib),
                                                   frame("main", "train.py", 44, "loss.item()")])),
             Rank(22, 2, 2, "stalled", stack(22, [frame("main", "train.py", 44, "loss.item()")]))]
    c = judge(ranks)
    assert c.kind == "gpu" and c.culprits == [0]
    assert c.sentence.startswith("rank 0 (pid 20, GPU 0) is not in the collective its peers wait in (its GPU: "
                                 "host-bound); it is in load at data.py:16 (`time.sleep(5)`), called from main at "
                                 "train.py:40")
    assert "ranks 1, 2 wait on their GPU (in main at train.py:44 (`loss.item()`))" in c.sentence


def test_ranks_all_at_one_place_name_no_culprit_here():
    ranks = [Rank(30 + i, i, i, "stalled", stack(30 + i, [frame("main", "train.py", 44, "loss.item()")]))
             for i in range(4)]
    c = judge(ranks)
    assert c.kind == "none" and c.culprits == []
    assert "ranks 0-3 wait on their GPU" in c.sentence and "another node" in c.sentence


@pytest.mark.slow
@needs_pyspy
def test_the_live_node_names_the_culprit_with_its_line_from_the_ranks_real_stacks(job):
    """A recorded hang on 2 H100s (rank 1 stops and runs nothing while GPU 0 waits in the all-reduce) whose process
    lists name the ranks of a real gloo job instead (its rank 0 sleeps outside the loop, its rank 1 waits in
    all_reduce): fed to the live node tick by tick with a real stack reader, the GPU of the sleeping rank is the
    culprit, with the line it sleeps at."""
    import copy

    from gputop.analysis.live import LiveNode
    from gputop.analysis.peaks import compute_peaks
    from gputop.session.stacks import StackWatch
    from gputop.telemetry.trace import ReplaySource

    j = job("sleep")
    ranks_of(j, {0: "time.sleep", 1: "dist.all_reduce"})  # both ranks at their places
    src = ReplaySource(str(Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x2" / "hang_idle.jsonl.gz"),
                       speed=float("inf"))
    pid_of_gpu = {0: j.pids[1], 1: j.pids[0]}  # GPU 1 ran nothing: the sleeping rank's; GPU 0 waited
    statics = src.static()
    watch = StackWatch()
    node = LiveNode([0, 1], statics, [compute_peaks(s) for s in statics], stacks=watch)
    waited = False
    for tick in src.ticks:
        tick = copy.deepcopy(tick)
        for i, g in enumerate(tick["gpus"]):
            for p in g.get("processes") or []:
                p["pid"] = pid_of_gpu[i]
        node.feed(tick)
        if watch._asked_at is not None and not waited:  # the node asked once GPU 0 read stalled: let the read end
            assert watch.wait(60)
            waited = True
    assert waited, "the node never asked for the ranks' stacks"
    v0, v1 = node.snapshot().verdicts()
    assert (v0.cls, v0.subclass) == ("stalled", "collective"), v0.evidence_text
    assert (v1.cls, v1.subclass) == ("culprit", "outside"), v1.evidence_text
    where = v1.job["culprit"]["where"]
    assert where.startswith(f"rank 0 (pid {j.pids[0]}, GPU 1) is not in a collective: in rank_main at gloo_job.py:")
    assert where in v1.evidence_text and "time.sleep(seconds)" in where
    assert v0.notes[0].startswith("from the ranks' stacks: rank 0 (pid")
    assert v0.job["culprit"]["culprit_gpus"] == [1]


@needs_pyspy
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, setpriv and /usr/bin/python3 to read a stack as another user")
def test_a_process_not_ours_to_read_says_what_to_grant_in_one_line():
    """gputop run as nobody reads a root process: the kernel refuses ptrace (the real py-spy's real error)."""
    from gputop.session.stacks import py_spy

    folder = tempfile.mkdtemp()
    os.chmod(folder, 0o755)
    program = os.path.join(folder, "py-spy")
    shutil.copy(py_spy(), program)
    os.chmod(program, 0o755)
    me = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = f"from gputop.session.stacks import read_stack; print(read_stack({me.pid}, program={program!r}).why)"
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                              f"PYTHONPATH={Path(__file__).resolve().parents[1]}", "/usr/bin/python3", "-c", code],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout == (f"not allowed to read pid {me.pid}'s memory (ptrace): run gputop as the process's user "
                              "or root; in a container add the SYS_PTRACE capability (docker run --cap-add "
                              "SYS_PTRACE, or the pod's securityContext); or set kernel.yama.ptrace_scope=0\n"), out
    finally:
        me.kill()
        me.wait()
        shutil.rmtree(folder)


@needs_pyspy
def test_processes_that_exit_while_they_are_read_are_one_line_each():
    """Python programs that live 0-60 ms, read as they end: each read is a stack or one line why not, never an
    exception or a wait, and no py-spy is left running."""
    whys, pids = set(), []
    for i in range(12):
        p = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({i * 0.005})"])
        got = read_stack(p.pid, timeout_s=10)
        p.wait()
        pids.append(p.pid)
        if not got.ok:
            assert "\n" not in got.why and str(p.pid) in got.why, got.why
            whys.add(got.why.replace(str(p.pid), "N"))
    assert whys <= {"pid N is not running", "pid N exited before its stack was read",
                    "pid N is a zombie (it exited; its parent has not reaped it): no stack to read",
                    "py-spy found no Python thread in pid N",
                    # read in its first or last milliseconds (a loaded machine), its interpreter not (or no longer)
                    # mapped: py-spy finds no Python in it
                    "pid N is not a Python process py-spy can read"} | {w for w in whys if w.startswith("py-spy could not")}
    for pid in pids:  # (py-spy runs with the read: none of ours outlives it)
        left = subprocess.run(["pgrep", "-f", f"py-spy dump --pid {pid} "], capture_output=True, text=True).stdout
        assert not left.split(), left


@pytest.mark.slow
@needs_pyspy
def test_a_job_held_idle_by_a_rank_that_never_joined_has_its_stacks_read(job):
    """Two GPUs held by a job's processes and idle (the first seconds of a recorded 2-H100 run, before its work,
    repeated for 30 s, its process lists naming the ranks of a real gloo job whose rank 1 sleeps before it joins
    the group while rank 0 waits in init_process_group): no GPU is stalled, yet after 20 s idle the node reads the
    ranks' stacks and names rank 1, on its own GPU's verdict too."""
    import copy

    from gputop.analysis.live import IDLE_JOB_S, LiveNode
    from gputop.analysis.peaks import compute_peaks
    from gputop.session.stacks import StackWatch
    from gputop.telemetry.trace import ReplaySource

    j = job("nojoin")
    ranks_of(j, {0: "dist.init_process_group", 1: "time.sleep"})
    src = ReplaySource(str(Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x2" / "hang_idle.jsonl.gz"))
    idle = src.ticks[20]
    statics = src.static()
    got = []
    watch = StackWatch()
    node = LiveNode([0, 1], statics, [compute_peaks(s) for s in statics], stacks=watch, on_stacks=got.append)
    for n in range(int((IDLE_JOB_S + 10) * 10)):
        tick = copy.deepcopy(idle)
        tick["t"] = n * 0.1
        for i, g in enumerate(tick["gpus"]):
            g["t"] = tick["t"]
            g["processes"] = [{"pid": j.pids[i], "pgid": j.pids[0], "name": "python"}]
        node.feed(tick)
        if watch.busy():
            assert watch.wait(60)
        if got:
            break
    assert got, "the idle job's stacks were never read"
    assert got[0].t >= IDLE_JOB_S and not got[0].stalled
    v0, v1 = node.snapshot().verdicts()  # no GPU stalled: rank 1's own verdict says it holds rank 0 in its set-up
    assert v0.cls == "idle" and v0.notes[0].startswith("from the ranks' stacks: rank 1 (pid")
    assert (v1.cls, v1.subclass) == ("culprit", "outside") and "idle" in v1.mixed
    record = got[0].records[1]
    assert record["kind"] == "outside" and record["culprit_ranks"] == [1]
    assert record["where"].startswith(f"rank 1 (pid {j.pids[1]}, GPU 1) is not in a collective: in rank_main at "
                                      "gloo_job.py:")
    assert "rank 0 (pid" in record["sentence"] and "waits in init_process_group" in record["sentence"]


def test_a_rank_at_the_line_its_peers_wait_at_waits_with_them():
    """The 4-H100 corpus's data-loader stall (tests/data/traces/culprit_h100x4/dataloader): 0.5 s into it, rank 1's
    GPU still read input-starved, but rank 1 is at the very `.item()` line where ranks 0 and 2 wait; rank 3 is in
    its data loader. Rank 3 alone is named. Where no such rank stands apart by its line (a size mismatch at the same
    line), the GPU that is not in the stall is still named."""
    item = [frame("step", "job.py", 82, "return metric[0].item()")]
    ranks = [Rank(40, 0, 0, "stalled", stack(40, item)), Rank(41, 1, 1, "input-starved", stack(41, item)),
             Rank(42, 2, 2, "comms-bound", stack(42, item)),
             Rank(43, 3, 3, "idle", stack(43, [frame("step", "job.py", 75, "x = next(loader).cuda()")]))]
    c = judge(ranks)
    assert c.kind == "gpu" and c.culprits == [3], c.sentence
    same_line = [Rank(50, 0, 0, "stalled", stack(50, item)), Rank(51, 1, 1, "latency-bound", stack(51, item))]
    c = judge(same_line)
    assert c.kind == "gpu" and c.culprits == [1]


def _node_of(pids_jobs: list[tuple[int, str]], classes: list[str], stacks_read: dict):
    """A live node's parts _stack_records_of reads: four GPUs, one process each (pid, job), each GPU's verdict,
    and a stack reader that has read ``stacks_read``."""
    from types import SimpleNamespace

    from gputop.analysis.verdict import Verdict

    class Read:
        read_at = 100.0
        asked: list = []

        def ask(self, pids, force=False):
            self.asked = list(pids)
            return True

        def latest(self, t=None):
            return stacks_read

    window = [{"t": 100.5, "gpus": [{"index": i, "processes": [{"pid": pid, "pgid": pid, "job": job}]}
                                    for i, (pid, job) in enumerate(pids_jobs)]}]
    verdicts = [Verdict(c, evidence={"stalled_for_s": 1.0} if c == "stalled" else {}, t_start=90.0, t_end=100.5)
                for c in classes]
    got = []
    node = SimpleNamespace(positions=[0, 1, 2, 3], names=[0, 1, 2, 3], stacks=Read(), on_stacks=got.append,
                           stacks_used_at=None, waits_since={})
    return node, verdicts, window, got


def test_a_stall_found_to_start_again_later_keeps_the_culprit_its_read_named():
    """Live on 4 H100s (bench/gpu/tui_culprit_tmux.sh, 2026-11-27): the culprit line came on screen 15 s into a stall
    and was gone at the next capture. The stalled GPU's regime was found to start again later (its stall's age
    shorter), so the read that named the culprit, taken before that new start, counted as "from before the wait"
    until the next read. The wait's start is now the first one seen while the job keeps waiting."""
    from gputop.analysis.live import _stack_records_of

    read = {10: {"rank": 0, "stack": stack(10, [frame("step", "job.py", 82, "return metric[0].item()")])},
            11: {"rank": 1, "stack": stack(11, [frame("fault", "job.py", 89, "time.sleep(3600)")])}}
    node, verdicts, window, _ = _node_of([(10, "launcher:1@n"), (11, "launcher:1@n"), (20, "launcher:2@n"),
                                          (21, "launcher:2@n")], ["stalled", "idle", "idle", "idle"], read)
    verdicts[0].evidence["stalled_for_s"] = 5.0  # since 95.5: the read at 100.0 is of the wait
    assert _stack_records_of(node, verdicts, window)[1]["culprit_ranks"] == [1]
    verdicts[0].evidence["stalled_for_s"] = 0.3  # the regime starts again at 100.2: after the read
    again = _stack_records_of(node, verdicts, window)
    assert again is not None and again[1]["culprit_ranks"] == [1]
    verdicts[0] = type(verdicts[0])("compute-bound", t_start=90.0, t_end=100.5)  # the job works again
    assert _stack_records_of(node, verdicts, window) is None and node.waits_since == {}
    verdicts[0] = type(verdicts[0])("stalled", evidence={"stalled_for_s": 0.3}, t_start=90.0, t_end=100.5)
    assert _stack_records_of(node, verdicts, window) is None, "a new wait: the read from before it says nothing"


def test_two_jobs_on_one_node_are_judged_each_on_its_own_ranks():
    """The 2-H100 corpus's shape (2026-11-27): a stalled 2-rank job on GPUs 0-1 (rank 1 sleeps) beside another
    job's 2 ranks working on GPUs 2-3, every rank the leader of a session of its own (torchrun's). Only the stalled
    job's stacks are asked for and judged; the neighbour's working rank is never its culprit."""
    from gputop.analysis.live import _stack_records_of

    item = [frame("step", "job.py", 82, "return metric[0].item()")]
    read = {10: {"rank": 0, "stack": stack(10, item)},
            11: {"rank": 1, "stack": stack(11, [frame("fault", "job.py", 89, "time.sleep(3600)")])},
            20: {"rank": 0, "stack": stack(20, [frame("step", "other.py", 23, "y = torch.matmul(x, w)")])},
            21: {"rank": 1, "stack": stack(21, [frame("step", "other.py", 23, "y = torch.matmul(x, w)")])}}
    node, verdicts, window, got = _node_of([(10, "launcher:1@n"), (11, "launcher:1@n"), (20, "launcher:2@n"),
                                            (21, "launcher:2@n")],
                                           ["stalled", "idle", "input-starved", "compute-bound"], read)
    records = _stack_records_of(node, verdicts, window)
    assert sorted(node.stacks.asked) == [10, 11]  # the waiting job's ranks only
    assert sorted(records) == [0, 1]
    assert records[1]["culprit_ranks"] == [1] and records[1]["culprit_pids"] == [11]
    assert "time.sleep(3600)" in records[1]["where"]
    assert len(got) == 1 and sorted(got[0].records) == [0, 1]
    # the same node read as one job (no job read, groups of one: a trace from before): everyone judged together
    for g in window[0]["gpus"]:
        g["processes"][0].pop("job")
    node.stacks_used_at = None
    together = _stack_records_of(node, verdicts, window)
    assert sorted(together) == [0, 1, 2, 3]


def test_the_stack_view_says_a_waiting_rank_outside_python_collectives_waits_on_its_gpu():
    """Live on 4 H100s (bench/gpu/tui_culprit_tmux.sh, 2026-11-27): rank 0 sat in `.item()` (its GPU in the stuck
    all-reduce) and the view's heading for it read "not in a collective", as the culprit's did; the judgement's own
    sentence said "waits on its GPU". The heading now says so too."""
    item = frame("step", "job.py", 82, "return metric[0].item()")
    read = {40: {"rank": 0, "stack": stack(40, [item])},
            41: {"rank": 1, "stack": stack(41, [frame("fault", "job.py", 89, "time.sleep(3600)")])}}
    lines = view_lines({0: [40], 1: [41]}, {0: "stalled", 1: "idle"}, read)
    assert lines[0].startswith("rank 1 (pid 41, GPU 1) is not in the collective its peers wait in"), lines
    heads = [ln for ln in lines if ln.startswith(("culprit: ", "rank "))][1:]
    assert heads[0].startswith("culprit: rank 1 (pid 41, GPU 1): not in a collective: in fault at job.py:89"), heads
    assert heads[1] == "rank 0 (pid 40, GPU 0): waits on its GPU (in step at job.py:82 (`return metric[0].item()`))"


def test_every_gpus_record_names_the_culprits_place_in_a_short_line():
    """The monitor's culprit line under a stalled GPU's verdict (gputop/tui/monitor/panels.py) reads the stalled
    GPU's record, which holds the judgement but not the culprit's ``where``: the place comes from the ranks."""
    read = {40: {"rank": 0, "stack": stack(40, [frame("step", "job.py", 82, "return metric[0].item()")])},
            41: {"rank": 1, "stack": stack(41, [frame("fault", "job.py", 89, "time.sleep(3600)")])}}
    records = job_records({0: [40], 1: [41]}, {0: "stalled", 1: "idle"}, read)
    want = "rank 1 (pid 41, GPU 1): in fault at job.py:89 (`time.sleep(3600)`)"
    assert "where" not in records[0] and culprit_place(records[0]) == culprit_place(records[1]) == want
    assert culprit_place({}) is None and culprit_place({"sentence": "no culprit"}) == "no culprit"


def test_a_gpu_already_judged_the_culprit_is_not_said_to_be_in_class_culprit():
    """Live on 4 H100s the stack view read "rank 1 ... is not in the collective its peers wait in (its GPU:
    culprit)": the class of a GPU the previous read had blamed. The blame is not evidence of itself."""
    read = [Rank(40, 0, 0, "stalled", stack(40, [frame("step", "job.py", 82, "return metric[0].item()")])),
            Rank(41, 1, 1, "culprit", stack(41, [frame("fault", "job.py", 89, "time.sleep(3600)")]))]
    c = judge(read)
    assert c.kind == "gpu" and c.culprits == [1]
    assert c.sentence.startswith("rank 1 (pid 41, GPU 1) is not in the collective its peers wait in; it is in fault "
                                 "at job.py:89"), c.sentence
