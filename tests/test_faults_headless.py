"""The fault matrix, headless: a real gputop process, real signals to real processes.

The oracle is gputop's fault specification (the exit-code table of README.md says the same):
0 ok; 1 the workload failed (raised, or exited non-zero without finishing: ``sys.exit(3)`` gives 1,
status "error"); 2 bad usage or input, one line on stderr, before anything runs (``-o``/``--csv`` into a
missing folder included); 5 the workload's process was killed by a signal (status "crashed"); 6 past
``--timeout`` (status "timeout"); 128+N when gputop itself is stopped by signal N (130 SIGINT, 143
SIGTERM, 129 SIGHUP; the document says ``"interrupted": true`` and ``"signal": "SIGTERM"``...). With
``--run -- CMD`` gputop exits with the command's own code (128+N when a signal N killed it), except 6 and
gputop's own 128+N. With ``--json`` stdout holds exactly one document in every case (``status``,
``exit_code`` = gputop's, ``errors`` non-empty on failure); ``-o FILE`` holds the same, also when
interrupted, with the points emitted before the signal. Nothing of a run outlives gputop: not the child,
not its children, even when gputop is SIGKILLed (then within ~3 s, and no document is expected).

Each cell starts ``python -m gputop`` in its own session, waits until the run is really under way (the
pid file the fault workload/command writes once its grandchild runs; for --watch, the fake pynvml's sample
mark), sends one real signal, and checks: gputop's exit code, the one JSON document on stdout and the
same in the ``-o`` file (status, ``interrupted``, ``signal``, ``exit_code``, the points kept), and that
no process of the run outlives gputop (the child and its grandchild when gputop has exited; anything else
seen under gputop within 3 s). A failing cell lists every difference at once (fault_util.Report).

``--run -- CMD`` and ``--watch`` need NVML: those cells run gputop on tests/fake_pynvml (a fake
``pynvml`` module answering from a real recorded H200 static record), so they behave the same with or
without a GPU. Run: ``python -m pytest tests/test_faults_headless.py tests/test_faults_tui.py``.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from fault_util import (PY, ROOT, TREE_CMD, Gputop, Proc, Report, env, others, read_pids, reaper,  # noqa: F401
                        signal_name, stderr_lines, wait_until)
from gputop.documents import validate as validate_run
from quick_util import slow

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
POINTS = [{"k": k, "gflops": float(k)} for k in (1, 2, 3)]  # what fault_tree emits before its grandchild starts
MONITOR_SCHEMA = json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text())
START_S = 60.0  # the longest a run may take to get under way (2 busy cores)
END_S = 60.0  # the longest gputop may take to end after the signal (grace periods included)
HELPERS_S = 3.0  # gputop's own helpers (a watchdog) may take this long to follow it
TIMEOUT_S = 3.0  # --timeout of the timeout cells: long enough that the points and the pid file come first
GRACE = ("--grace", "1")  # the stubborn cells: the grace period is a real wait, shortened (and --grace tested)


def validate_monitor(doc: dict) -> None:
    import jsonschema

    jsonschema.validate(doc, MONITOR_SCHEMA)


# -- starting the runs ------------------------------------------------------------------------------------
def start_workload(tmp_path: Path, reaper, *params: str, extra: tuple = ()) -> tuple[Gputop, Path, Path]:
    """``gputop --run fault_tree --device cpu --json -o F --param pid_file=P --param ...``."""
    pid_file, out = tmp_path / "pids.json", tmp_path / "doc.json"
    reaper.pid_files.append(pid_file)
    args = ["--run", "fault_tree", "--device", "cpu", "--json", "-o", str(out), "--param", f"pid_file={pid_file}"]
    for p in params:
        args += ["--param", p]
    g = Gputop(args + list(extra), tmp_path, env())
    reaper.gputops.append(g)
    return g, pid_file, out


def start_command(tmp_path: Path, reaper, *end: str, extra: tuple = ()) -> tuple[Gputop, Path, Path]:
    """``gputop --json -o F [extra] --run -- python tests/fault_cmds/tree_cmd.py P END...`` on the fake pynvml."""
    pid_file, out = tmp_path / "pids.json", tmp_path / "doc.json"
    reaper.pid_files.append(pid_file)
    g = Gputop(["--json", "-o", str(out), *extra, "--run", "--", PY, str(TREE_CMD), str(pid_file), *end], tmp_path,
               env(fake_nvml=True, GPUTOP_FAKE_NVML_MARK=str(tmp_path / "samples")))
    reaper.gputops.append(g)
    return g, pid_file, out


def under_way(g: Gputop, pid_file: Path) -> list[Proc]:
    """Wait until the child has emitted its points and started its grandchild; their pids."""
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the run's pid file", g.proc)
    g.snapshot()
    return procs


def samples(tmp_path: Path) -> int:
    try:
        return (tmp_path / "samples").stat().st_size
    except FileNotFoundError:
        return 0


def sampled(g: Gputop, tmp_path: Path, more: int = 3) -> None:
    """Wait until gputop has taken ``more`` further samples (the fake pynvml marks each)."""
    n = samples(tmp_path)
    wait_until(lambda: samples(tmp_path) >= n + more, START_S, f"{more} more samples", g.proc)


def both_documents(rep: Report, g: Gputop, out: Path, **expect) -> dict | None:
    """stdout holds exactly one document; ``-o`` holds the same one."""
    doc = rep.document(g.stdout, "stdout", **expect)
    if rep.expect(out.exists(), f"-o {out.name} was not written"):
        doc_file = rep.document(out.read_text(), f"-o {out.name}", **expect)
        if doc is not None and doc_file is not None:
            rep.expect(doc_file == doc, "the -o file holds a different document from stdout")
    return doc


def ended(g: Gputop, rep: Report, procs: list[Proc], code: int) -> int:
    """gputop's exit: its code, and nothing of the run alive (the recorded pids at once, helpers soon)."""
    rc = g.wait(END_S)
    rep.gone(procs, what="the run's processes, checked as gputop exited")
    rep.gone(others(g.seen, procs), within=HELPERS_S, what="other processes seen under gputop")
    rep.exit_code(rc, code)
    rep.no_traceback(g.stderr, "gputop's stderr")
    return rc


# -- gputop --run NAME ------------------------------------------------------------------------------------
# the quick loop: SIGTERM; the full suite: every stop signal
@pytest.mark.parametrize("sig", [slow(signal.SIGINT), signal.SIGTERM, slow(signal.SIGHUP)], ids=signal_name)
def test_run_name_signal_to_gputop(tmp_path, reaper, sig):
    g, pid_file, out = start_workload(tmp_path, reaper)
    procs = under_way(g, pid_file)
    g.send(sig)
    rep = Report(f"--run fault_tree, {signal_name(sig)} to gputop")
    code = 128 + sig
    ended(g, rep, procs, code)
    doc = both_documents(rep, g, out, code=code, status="interrupted", interrupted=True, sig=signal_name(sig),
                         validate=validate_run)
    if doc is not None:
        rep.expect(doc.get("points") == POINTS,
                   f"points {doc.get('points')!r}, expected the 3 emitted before the signal")
    rep.finish()


@pytest.mark.slow
def test_run_name_sigterm_with_a_stubborn_child(tmp_path, reaper):
    """The child (and its grandchild) ignore SIGINT/SIGTERM/SIGHUP: killed after the grace period (--grace 1)."""
    g, pid_file, out = start_workload(tmp_path, reaper, "stubborn=true", extra=GRACE)
    procs = under_way(g, pid_file)
    g.send(signal.SIGTERM)
    rep = Report("--run fault_tree stubborn=true, SIGTERM to gputop")
    ended(g, rep, procs, 143)
    doc = both_documents(rep, g, out, code=143, status="interrupted", interrupted=True, sig="SIGTERM",
                         validate=validate_run)
    if doc is not None:
        rep.expect(doc.get("points") == POINTS, f"points {doc.get('points')!r}, expected the 3 emitted")
    rep.finish()


def test_run_name_child_killed_from_outside(tmp_path, reaper):
    g, pid_file, out = start_workload(tmp_path, reaper)
    procs = under_way(g, pid_file)
    child = next(p for p in procs if p.role == "child")
    child.kill()  # SIGKILL, as the OOM killer would
    rep = Report("--run fault_tree, SIGKILL to the workload's process")
    ended(g, rep, procs, 5)
    doc = both_documents(rep, g, out, code=5, status="crashed", errors=True, validate=validate_run)
    if doc is not None:
        rep.expect(doc.get("points") == POINTS, f"points {doc.get('points')!r}, expected the 3 emitted")
    rep.finish()


@pytest.mark.parametrize("end,code,status", [slow("exit3", 1, "error"), ("segv", 5, "crashed")],  # quick: segv
                         ids=["exit3", "segv"])
def test_run_name_child_fails(tmp_path, reaper, end, code, status):
    """``sys.exit(3)`` in the workload: exit 1, "error"; a segfault: exit 5, "crashed"."""
    g, pid_file, out = start_workload(tmp_path, reaper, f"end={end}")
    rep = Report(f"--run fault_tree end={end}")
    rc = g.wait(END_S)
    procs = read_pids(pid_file)
    if rep.expect(procs is not None, "the workload never wrote its pid file"):
        rep.gone(procs, what="the run's processes, checked as gputop exited")
    rep.exit_code(rc, code)
    rep.no_traceback(g.stderr, "gputop's stderr")
    doc = both_documents(rep, g, out, code=code, status=status, errors=True, validate=validate_run)
    if doc is not None:
        rep.expect(doc.get("points") == POINTS, f"points {doc.get('points')!r}, expected the 3 emitted")
    rep.finish()


@pytest.mark.slow
@pytest.mark.parametrize("stubborn", [False, True], ids=["obeys", "stubborn"])
def test_run_name_timeout(tmp_path, reaper, stubborn):
    """Past --timeout: exit 6, "timeout"; a child that ignores the stop request is killed after the grace."""
    g, pid_file, out = start_workload(tmp_path, reaper, f"stubborn={str(stubborn).lower()}",
                                      extra=("--timeout", str(TIMEOUT_S), *(GRACE if stubborn else ())))
    procs = under_way(g, pid_file)
    rep = Report(f"--run fault_tree --timeout {TIMEOUT_S:g} (stubborn={stubborn})")
    ended(g, rep, procs, 6)
    doc = both_documents(rep, g, out, code=6, status="timeout", errors=True, validate=validate_run)
    if doc is not None:
        rep.expect(doc.get("points") == POINTS, f"points {doc.get('points')!r}, expected the 3 emitted")
        said = " ".join(e.get("message", "") for e in doc.get("errors", []) + doc.get("warnings", []))
        if stubborn:
            rep.expect("killed after 1 s more" in said, f"--grace 1 is not what the document says: {said!r}")
        else:
            rep.expect("killed" not in said, f"a child that obeyed the stop was killed: {said!r}")
    rep.finish()


def test_run_name_gputop_sigkilled_leaves_nothing(tmp_path, reaper):
    g, pid_file, _ = start_workload(tmp_path, reaper)
    procs = under_way(g, pid_file)
    g.send(signal.SIGKILL)
    rep = Report("--run fault_tree, SIGKILL to gputop")
    rc = g.wait(END_S)
    rep.gone(procs + others(g.seen, procs), within=HELPERS_S, what="the run's processes after gputop was SIGKILLed")
    rep.exit_code(rc, -signal.SIGKILL)
    rep.finish()


# -- gputop --run -- CMD ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=signal_name)
def test_command_signal_to_gputop(tmp_path, reaper, sig):
    g, pid_file, out = start_command(tmp_path, reaper, "hang")
    procs = under_way(g, pid_file)
    sampled(g, tmp_path)  # the command has been seen on the GPU: there are partial results to keep
    g.send(sig)
    rep = Report(f"--run -- CMD, {signal_name(sig)} to gputop")
    code = 128 + sig
    ended(g, rep, procs, code)
    doc = both_documents(rep, g, out, code=code, status="interrupted", interrupted=True, sig=signal_name(sig),
                         validate=validate_monitor)
    if doc is not None:
        rep.expect(doc.get("gpus_used") == [0], f"gpus_used {doc.get('gpus_used')!r}: the samples before the "
                                                "signal (the command on GPU 0) were not kept")
    rep.finish()


@pytest.mark.parametrize("end,code,status", [
    (("exit", "3"), 3, "error"),  # the command's own exit code
    (("segv",), 139, "crashed"),  # 128 + SIGSEGV, as a shell says
], ids=["exit3", "segv"])
@pytest.mark.slow
def test_command_fails(tmp_path, reaper, end, code, status):
    g, pid_file, out = start_command(tmp_path, reaper, *end)
    rep = Report(f"--run -- CMD {' '.join(end)}")
    rc = g.wait(END_S)
    procs = read_pids(pid_file)
    if rep.expect(procs is not None, "the command never wrote its pid file"):
        rep.gone(procs, what="the command's processes, checked as gputop exited")
    rep.exit_code(rc, code)
    rep.no_traceback(g.stderr, "gputop's stderr")
    both_documents(rep, g, out, code=code, status=status, errors=True, validate=validate_monitor)
    rep.finish()


@pytest.mark.slow
def test_command_killed_from_outside(tmp_path, reaper):
    g, pid_file, out = start_command(tmp_path, reaper, "hang")
    procs = under_way(g, pid_file)
    next(p for p in procs if p.role == "child").kill()
    rep = Report("--run -- CMD, SIGKILL to the command")
    ended(g, rep, procs, 137)
    both_documents(rep, g, out, code=137, status="crashed", errors=True, validate=validate_monitor)
    rep.finish()


@pytest.mark.slow
def test_command_timeout(tmp_path, reaper):
    g, pid_file, out = start_command(tmp_path, reaper, "hang", extra=("--timeout", str(TIMEOUT_S)))
    procs = under_way(g, pid_file)
    rep = Report(f"--run -- CMD --timeout {TIMEOUT_S:g}")
    ended(g, rep, procs, 6)
    both_documents(rep, g, out, code=6, status="timeout", errors=True, validate=validate_monitor)
    rep.finish()


def test_command_gputop_sigkilled_leaves_nothing(tmp_path, reaper):
    g, pid_file, _ = start_command(tmp_path, reaper, "hang")
    procs = under_way(g, pid_file)
    g.send(signal.SIGKILL)
    rep = Report("--run -- CMD, SIGKILL to gputop")
    rc = g.wait(END_S)
    rep.gone(procs + others(g.seen, procs), within=HELPERS_S,
             what="the command's processes after gputop was SIGKILLed")
    rep.exit_code(rc, -signal.SIGKILL)
    rep.finish()


# -- gputop --watch PID -----------------------------------------------------------------------------------
def start_watched(reaper) -> Proc:
    """A process that is not gputop's: it must outlive the watch."""
    p = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, start_new_session=True)
    reaper.popens.append(p)
    return Proc.of(p.pid, "watched process")


def test_watch_sigterm(tmp_path, reaper):
    watched = start_watched(reaper)
    out = tmp_path / "doc.json"
    g = Gputop(["--watch", str(watched.pid), "--json", "-o", str(out)], tmp_path,
               env(fake_nvml=True, GPUTOP_FAKE_NVML_MARK=str(tmp_path / "samples")))
    reaper.gputops.append(g)
    wait_until(lambda: samples(tmp_path) >= 3, START_S, "gputop sampling", g.proc)
    g.send(signal.SIGTERM)
    rep = Report("--watch PID, SIGTERM to gputop")
    rc = g.wait(END_S)
    rep.gone(g.seen, within=HELPERS_S, what="processes seen under gputop")
    rep.expect(watched.alive(), "the watched process (not gputop's) was killed")
    rep.exit_code(rc, 143)
    rep.no_traceback(g.stderr, "gputop's stderr")
    doc = both_documents(rep, g, out, code=143, status="interrupted", interrupted=True, sig="SIGTERM",
                         validate=validate_monitor)
    if doc is not None:
        rep.expect(doc.get("pid") == watched.pid, f"pid {doc.get('pid')!r}, expected the watched {watched.pid}")
    rep.finish()


# -- bad output paths: exit 2 before anything runs ----------------------------------------------------------
@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("mode,flag", [("name", "-o"), ("name", "--csv"), ("command", "-o"), ("watch", "-o")])
def test_unwritable_output_exits_2_before_running(tmp_path, reaper, mode, flag, json_flag):
    pid_file, bad = tmp_path / "pids.json", tmp_path / "no" / "such" / "folder" / "x.out"
    reaper.pid_files.append(pid_file)
    head = [flag, str(bad)] + (["--json"] if json_flag else [])
    watched = None
    if mode == "name":
        args = ["--run", "fault_tree", "--device", "cpu", "--param", f"pid_file={pid_file}", *head]
        e = env()
    elif mode == "command":
        args = [*head, "--run", "--", PY, str(TREE_CMD), str(pid_file), "exit", "0"]
        e = env(fake_nvml=True)
    else:
        watched = start_watched(reaper)
        args = ["--watch", str(watched.pid), "--seconds", "2", *head]
        e = env(fake_nvml=True)
    g = Gputop(args, tmp_path, e)
    reaper.gputops.append(g)
    rep = Report(f"{mode} with {flag} into a missing folder{' and --json' if json_flag else ''}")
    rc = g.wait(END_S)
    rep.exit_code(rc, 2)
    rep.expect(not pid_file.exists(), "the workload/command ran (it wrote its pid file)")
    if watched is not None:
        rep.expect(watched.alive(), "the watched process was killed")
    err = stderr_lines(g.stderr)
    rep.expect(len(err) == 1, f"{len(err)} lines on stderr, expected one: {g.stderr[:800]!r}")
    rep.no_traceback(g.stderr, "stderr")
    rep.expect(not bad.exists(), f"{bad} was created")
    if json_flag:
        rep.document(g.stdout, "stdout", code=2, status="error", errors=True,
                     validate=validate_run if mode == "name" else None)
    else:
        rep.expect(g.stdout == "", f"stdout {g.stdout[:200]!r}, expected nothing")
    rep.finish()


# -- stdout that cannot be written ----------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["--list"],
    ["--run", "fault_ok", "--device", "cpu", "--json"],
], ids=["list", "run-json"])
def test_stdout_to_dev_full(tmp_path, reaper, args):
    with open("/dev/full", "wb") as full:
        g = Gputop(args, tmp_path, env(), stdout=full)
    reaper.gputops.append(g)
    rep = Report(f"gputop {' '.join(args)} > /dev/full")
    rc = g.wait(END_S)
    rep.gone(g.seen, within=HELPERS_S)
    rep.expect(rc > 0, f"exit code {rc}, expected a failure (> 0)")
    err = stderr_lines(g.stderr)
    rep.expect(len(err) == 1, f"{len(err)} lines on stderr, expected one: {g.stderr[:800]!r}")
    rep.no_traceback(g.stderr, "stderr")
    rep.finish()
