"""Profiler windows for any Python program however it is launched, and on a process already running (issue 37): real
child processes on the CPU (torch.profiler records host ops there; GPU windows are bench/gpu/attribution_anywhere_gpu.sh's),
under a real gputop on the fake NVML (tests/fake_pynvml: NVML lists the processes that made their file in
``holders/``, as a process appears in NVML's list once it has a CUDA context) or asked directly through the files of
gputop/runner/profile_loader/protocol.py.

Shapes: a plain tensor loop (no nn.Module, no optimizer: the window starts and ends on time from the loader's
thread), a threaded server (forward passes on worker threads), a shell script that starts two Pythons, a prepared
process watched with ``--watch PID --profile``. Bad input: an unprepared process, one that is not Python, a loader of
another protocol, two gputops asking at once, a process that exits or is killed mid-window."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import protocol as P
from gputop.session import profile_target as PT
from test_attribution import (HOLD, LOOP, PY, ROOT, SCHEMA, TRAIN, gputop, gputop_process, wait_for_loader,
                              windowed)

# A loop of torch.matmul and additions: no nn.Module, no optimizer (a benchmark, a custom kernel loop).
PLAIN = """
import sys, time, torch
""" + HOLD + """
x = torch.randn(64, 64)
t0, n = time.time(), 0
while time.time() - t0 < float(sys.argv[1]) and not os.path.exists("stop"):  # (a test ends it with the file)
    y = torch.matmul(x, x) + 1.0
    n += 1
print("plain loop done", n > 0)
sys.exit(5)
"""

# A server: requests served by two worker threads, each a forward pass without gradients; the main thread waits.
SERVER = HOLD + """
import queue, sys, threading, time, torch
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
requests = queue.Queue()

def worker():
    with torch.no_grad():
        while True:
            x = requests.get()
            if x is None:
                return
            model(x)

workers = [threading.Thread(target=worker) for _ in range(2)]
for w in workers:
    w.start()
t0 = time.time()
while time.time() - t0 < float(sys.argv[1]):
    requests.put(torch.randn(16, 64))
    time.sleep(0.002)
for w in workers:
    requests.put(None)
for w in workers:
    w.join()
print("served")
"""


# HOLD for N processes at once: each, once ready, waits for the others, and they appear in NVML's list together (a
# folder of their files renamed onto the empty holders/), as a job's ranks do after their first collective; else
# gputop, asked to ask at a time (GPUTOP_PROFILE_AT), would ask the one that came first, the other still importing
# torch on a busy machine.
HOLD_TOGETHER = """import os, time
_holders = os.environ["GPUTOP_FAKE_NVML_HOLDERS"]
_ready = _holders + ".ready"
os.makedirs(_ready, exist_ok=True)
open(os.path.join(_ready, str(os.getpid())), "w").close()
_end = time.time() + 60
while len(os.listdir(_ready)) < N and time.time() < _end:
    time.sleep(0.02)
_new = _holders + ".new-%d" % os.getpid()
os.makedirs(_new)
for _pid in os.listdir(_ready):
    open(os.path.join(_new, _pid), "w").close()
try:
    os.rename(_new, _holders)  # onto the empty folder, at once; the other process's rename finds it full
except OSError:
    pass
"""


def together(prog: str, n: int) -> str:
    """``prog`` with HOLD_TOGETHER in HOLD's place, for ``n`` processes."""
    assert HOLD in prog
    return prog.replace(HOLD, HOLD_TOGETHER.replace("< N", f"< {n}"))


def prepared(tmp_path, prog: str, *args, name="prog.py", env_extra=None):
    """A Python program started as a job script would after ``eval "$(gputop --profile-env)"`` (the line
    gputop prints, run by a real shell), its loader's folder found."""
    (tmp_path / name).write_text(prog)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_") and k != "PYTHONPATH"}
    env.update({P.BASE_ENV: str(tmp_path / "pbase"), "PYTHONPATH": str(ROOT), **(env_extra or {})})
    line = subprocess.run([PY, "-m", "gputop", "--profile-env"], capture_output=True, text=True, env=env,
                          timeout=60).stdout
    assert line.startswith("export PYTHONPATH=") and line.count("\n") == 1 and P.BASE_ENV in line
    env.pop("PYTHONPATH")
    proc = subprocess.Popen(["sh", "-c", f'{line.strip()}; exec "$0" "$@"', PY, name, *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, wait_for_loader(proc, env)


def answered(folder: str, seq: int, timeout: float = 90) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = P.read_answer(folder, seq)
        if got is not None:
            return got
        time.sleep(0.05)
    raise AssertionError(f"no answer to request {seq} in {folder}")


@pytest.mark.slow
def test_a_plain_tensor_loop_gets_a_window_on_time_from_the_loaders_thread(tmp_path):
    """No module call, no optimizer step within the window's seconds: the loader's own thread starts the window at
    the request's start time plus its seconds and ends it its seconds later; it holds every thread's ops (the
    program's main thread's matmuls here) and the program's output is its own."""
    proc, folder = prepared(tmp_path, PLAIN, "60")
    try:
        end = time.monotonic() + 60
        while "torch" not in (P.read_json(os.path.join(folder, P.LOADED)) or {}).get("frameworks", []):
            assert time.monotonic() < end and proc.poll() is None
            time.sleep(0.05)
        start_at = time.time() + 0.5
        assert P.ask(folder, P.Request(0.5, 10, start_at, os.getpid())) == (1, False)
        w = answered(folder, 1)
    finally:
        (tmp_path / "stop").write_text("")
        out, err = proc.communicate(timeout=60)
    assert w["status"] == "ok", w
    assert w["started_by"] == "time" and w["ops_threads"] == "all" and w["steps"] == 0
    # started by time, its seconds after the start time (no step came), and ended after its seconds (not at the
    # program's end, 60 s on)
    assert start_at + 0.5 <= w["started_at"] < start_at + 30 and 0.5 <= w["wall_s"] < 30
    ops = {o["name"]: o["count"] for o in w["ops"]}
    assert ops.get("aten::matmul", 0) > 10 and ops.get("aten::add", 0) > 10
    assert "External init callback" not in err and "profiler_start" not in err  # Kineto's lines are not the program's
    assert set(w) <= set(P.ANSWER_FIELDS)


@pytest.mark.slow
def test_a_plain_loop_under_gputop_run_profile_gets_its_window(tmp_path):
    (tmp_path / "plain.py").write_text(windowed(PLAIN))
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "0.5", "--", PY, "plain.py", "60", cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "0.5"})
    assert r.returncode == 5 and "plain loop done True" in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    w = doc["attribution"]["windows"][0]
    assert w["status"] == "ok" and w["started_by"] == "time" and w["ops_threads"] == "all"
    assert {o["name"] for o in w["top_ops"]} >= {"aten::matmul"}


@pytest.mark.slow
def test_a_threaded_server_gets_a_window_of_its_workers_forward_passes(tmp_path):
    """Forward passes on two worker threads (the main thread feeds them): the window starts at a worker's forward
    pass, counts the passes of both, and Kineto's line about a start off torch's thread stays out of the output."""
    (tmp_path / "server.py").write_text(windowed(SERVER))
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "30", "--profile-steps", "3", "--", PY,
               "server.py", "60", cwd=tmp_path, env_extra={"GPUTOP_PROFILE_AT": "0.5"})
    assert r.returncode == 0 and "served" in r.stderr, r.stderr
    assert "External init callback" not in r.stderr
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    assert w["status"] == "ok" and w["started_by"] == "step" and w["ops_threads"] == "all"
    assert (w["steps"], w["step_kind"]) == (30, "forward pass")
    ops = {o["name"]: o["count"] for o in w["top_ops"]}
    assert ops.get("aten::addmm", 0) >= 60  # two Linear layers a pass, 30 passes over both workers


@pytest.mark.slow
def test_a_shell_script_that_starts_two_pythons_has_both_asked_together(tmp_path):
    """Two Python processes under one shell (not a Python launcher), both on the GPU: both answer the same window,
    started at the same time; the shell is never asked."""
    (tmp_path / "plain.py").write_text(windowed(together(PLAIN, 2)))
    script = f"{PY} plain.py 60 & {PY} plain.py 60 & wait"
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "0.5", "--", "sh", "-c", script, cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "1"}, timeout=120)
    assert r.returncode == 0 and r.stderr.count("plain loop done True") == 2, r.stderr
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    per = w["per_process"]
    holders = {int(p.name) for p in (tmp_path / "holders").iterdir()}
    assert {p["pid"] for p in per} == holders and len(holders) == 2
    a, b = per
    # at one start time: the two windows overlap (asked one after the other, the second would start after the first)
    assert a["started_by"] == b["started_by"] == "time"
    assert max(a["started_at"], b["started_at"]) < min(a["started_at"] + a["wall_s"], b["started_at"] + b["wall_s"])


# A multiprocessing Pool of forked workers, each on the GPU with a plain loop (its loader started by os.fork's hook).
POOL = """
import glob, multiprocessing, os, sys, time

def work(seconds):
""" + "\n".join("    " + line for line in together(HOLD, 2).splitlines()) + """
    import torch
    x, t0 = torch.randn(64, 64), time.time()
    mine = os.path.join(os.environ["GPUTOP_PROFILE_DIR"], str(os.getpid()))
    while time.time() - t0 < seconds and not glob.glob(mine + "/window-*"):  # until its window is written
        torch.matmul(x, x)
    return os.getpid()

if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print("workers", len(set(pool.map(work, [60, 60], chunksize=1))))
"""


@pytest.mark.slow
def test_a_pool_of_forked_workers_each_on_the_gpu_answer(tmp_path):
    (tmp_path / "pool.py").write_text(POOL)
    r = gputop("--json", "--run", "--profile", "--profile-seconds", "0.5", "--", PY, "pool.py", cwd=tmp_path,
               env_extra={"GPUTOP_PROFILE_AT": "1"}, timeout=120)
    assert r.returncode == 0 and "workers 2" in r.stderr, r.stderr
    w = json.loads(r.stdout)["attribution"]["windows"][0]
    assert {p["pid"] for p in w["per_process"]} == {int(p.name) for p in (tmp_path / "holders").iterdir()}
    assert all(p["started_by"] == "time" for p in w["per_process"])


@pytest.mark.slow
def test_watch_pid_profile_asks_a_prepared_process_and_leaves_it_as_it_was(tmp_path):
    """A training program started prepared (the --profile-env line): ``gputop --watch PID --profile`` asks it for a
    window at once and reports it (stopped with Ctrl-C once the window is in, as a user ends a watch); the program goes
    on and ends with its own output and exit code; its folder stays for the next gputop."""
    proc, folder = prepared(tmp_path, TRAIN.replace("float(sys.argv[1])", "60 if not os.path.exists('stop') else 0"),
                            "60")
    try:
        watch = gputop_process("--json", "--watch", str(proc.pid), "--profile", "--profile-seconds", "0.5",
                               "--profile-steps", "0", cwd=tmp_path)
        try:
            end = time.monotonic() + 90
            while not os.path.exists(os.path.join(folder, "window-1.json")):
                assert watch.poll() is None, watch.communicate()
                assert time.monotonic() < end, "no window in 90 s"
                time.sleep(0.05)
        finally:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        assert watch.returncode == 130, err
        doc = json.loads(out)
        jsonschema.validate(doc, SCHEMA)
        assert doc["interrupted"] is True
        w = doc["attribution"]["windows"][0]
        assert w["status"] == "ok" and w["pid"] == proc.pid and w["asked_because"] == "asked at the watch's start"
        assert w["started_by"] == "step" and w["steps"] >= 1 and w["basis"] == "ops"
        assert proc.poll() is None and Path(folder).is_dir()
    finally:
        (tmp_path / "stop").write_text("")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3 and out.startswith("trained"), err


def test_watch_profile_of_a_process_not_prepared_or_not_python_is_one_line(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    (tmp_path / "idle.py").write_text("import time; time.sleep(60)\n")
    plain_py = subprocess.Popen([PY, "-S", str(tmp_path / "idle.py")])
    try:
        for pid, said in ((plain_py.pid, "was not started with gputop's profile loader"),
                          (sleeper.pid, "is not a Python program (")):
            r = gputop("--watch", str(pid), "--profile", cwd=tmp_path, timeout=60)
            assert r.returncode == 2, r.stderr
            assert r.stderr.count("\n") == 1 and f"--watch {pid} --profile: pid {pid}" in r.stderr and said in r.stderr
        assert 'eval "$(gputop --profile-env)"' in r.stderr or "profile-env" in gputop(
            "--watch", str(plain_py.pid), "--profile", cwd=tmp_path).stderr
        v = "%d.%d" % sys.version_info[:2]
        why = PT.find(plain_py.pid)[1]
        assert f"(Python {v})" in why and "Python 3.14+ can be attached to without it" in why
        assert PT.find(99999999)[1] == "pid 99999999: no such process"
    finally:
        sleeper.kill()
        plain_py.kill()
        sleeper.wait()
        plain_py.wait()


def test_on_a_python_without_remote_exec_attaching_says_so_in_one_line(tmp_path, monkeypatch):
    """The Python 3.14 path (sys.remote_exec, PEP 768) run as on 3.14, by the target's own interpreter: this one
    (3.11/3.12) has no sys.remote_exec, and says so; nothing is left behind."""
    monkeypatch.setenv(P.BASE_ENV, str(tmp_path / "pbase"))
    (tmp_path / "idle.py").write_text("import time; time.sleep(60)\n")
    proc = subprocess.Popen([PY, "-S", str(tmp_path / "idle.py")])
    try:
        why = PT.attach(proc.pid, sys.executable, wait_s=1.0)
        if sys.version_info < (3, 14):
            assert why == "this Python has no sys.remote_exec (3.14+ has)"
        assert not [p for p in (tmp_path / "pbase").iterdir() if p.name.startswith(".attach")]
    finally:
        proc.kill()
        proc.wait()


def test_a_loader_of_another_protocol_is_refused_in_one_line_both_ways(tmp_path, monkeypatch):
    """gputop reads the loader's protocol before asking: another one is one line, nothing written. A loader sent a
    request of another protocol answers it with one line and no window."""
    import loader_util

    folder = loader_util.stand_in(monkeypatch, tmp_path)
    P.write_atomic(folder, P.LOADED, json.dumps({"pid": os.getpid(), "protocol": 1, "loader": "/old/gputop"}))
    t, why = PT.find(os.getpid())
    assert t is None and "protocol 1" in why and f"speaks protocol {P.PROTOCOL}" in why and "\n" not in why
    assert P.requests(folder) == []

    idle = "import os, time\nwhile not os.path.exists('stop'):\n    time.sleep(0.02)\n"  # (the refusal needs no torch)
    proc, folder = prepared(tmp_path, idle)
    try:
        P.write_atomic(folder, P.request_name(1), json.dumps({"protocol": 99, "seconds": 1}))
        P.write_atomic(folder, P.request_name(2), "3 0 0.0")  # protocol 1's request line
        a1, a2 = answered(folder, 1), answered(folder, 2)
    finally:
        (tmp_path / "stop").write_text("")
        proc.communicate(timeout=60)
    assert a1["status"] == "unavailable" and "speaks protocol 2 and the request is protocol 99" in a1["reason"]
    assert a2["status"] == "unavailable" and "could not be read" in a2["reason"]


@pytest.mark.slow
def test_two_gputops_asking_one_process_share_one_window(tmp_path):
    """Two askers at once (as two gputops on the node): the second joins the first's request and both read the
    same window."""
    proc, folder = prepared(tmp_path, PLAIN, "60")
    try:
        t = PT.Target(proc.pid, folder, P.read_json(os.path.join(folder, P.LOADED)))
        request = P.Request(0.3, 0, time.time() + 0.5, os.getpid())
        first, second = PT.Asked([t], request), PT.Asked([t], request._replace(asker=1))
        assert first.seqs == second.seqs == {proc.pid: 1} and second.joined == {proc.pid}
        end = time.monotonic() + 90
        while not (first.done and second.done) and time.monotonic() < end:
            time.sleep(0.05)
        assert first.answers() == second.answers() and first.answers()[proc.pid]["status"] == "ok"
    finally:
        (tmp_path / "stop").write_text("")
        proc.communicate(timeout=60)


@pytest.mark.slow
def test_a_process_that_exits_or_is_killed_mid_window_gets_one_line_and_keeps_its_exit_code(tmp_path):
    """Ending by itself during a 30 s window: the window is stopped at its exit and written (``ended_by``), the
    program's output and exit code its own. Killed (SIGKILL: no exit handler runs): the asker says so in one line
    rather than waiting."""
    # the program trains until it has made 5 steps under a profiler (the window's), then ends
    ends = TRAIN.replace(LOOP, "profiled = 0\n" + LOOP + " and profiled < 5").replace(
        "    loss = m(x)", "    profiled += torch.autograd.profiler._is_profiler_enabled; loss = m(x)")
    assert ends.count("profiled += ") == 1
    proc, folder = prepared(tmp_path, ends, "60")
    t = PT.Target(proc.pid, folder, P.read_json(os.path.join(folder, P.LOADED)))
    asked = PT.Asked([t], P.Request(30, 0, time.time() + 0.2, os.getpid()))
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 3 and out == "trained\n", err
    w = asked.answers()[proc.pid]
    assert w["status"] == "ok" and w["ended_by"] == "the program's exit" and w["wall_s"] < 30 and w["steps"] >= 5

    proc, folder = prepared(tmp_path, PLAIN, "2")  # a window not started yet (no step: it would start in 30 s)
    t = PT.Target(proc.pid, folder, P.read_json(os.path.join(folder, P.LOADED)))
    asked = PT.Asked([t], P.Request(30, 0, time.time() + 0.2, os.getpid()))
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 5 and out == "plain loop done True\n", err
    assert asked.answers()[proc.pid]["reason"] == "the program ended before the window started"

    proc, folder = prepared(tmp_path, PLAIN, "60")
    t = PT.Target(proc.pid, folder, P.read_json(os.path.join(folder, P.LOADED)))
    asked = PT.Asked([t], P.Request(30, 0, time.time() + 0.2, os.getpid()))
    proc.kill()
    proc.communicate(timeout=60)
    end = time.monotonic() + 30
    while not asked.done and time.monotonic() < end:
        time.sleep(0.05)
    w = asked.answers()[proc.pid]
    assert w["status"] == "unavailable" and w["reason"].startswith("the process ended before it answered")


@pytest.mark.slow
def test_a_post_on_exports_port_asks_a_running_process_and_its_window_is_served(tmp_path):
    """``gputop --export`` (live, on the fake NVML): POST /profile?pid=N with the exporter's token asks the prepared
    process for a window, which then shows in /metrics' gputop_attribution_* series under its pid; without the token,
    with a bad pid, or of a process that cannot be asked: one line and the code that says so."""
    import urllib.error
    import urllib.request

    from export_util import free_port, get, start_exporter, stop, wait_for, wait_for_metrics

    proc, _folder = prepared(tmp_path, TRAIN, "60")
    port = free_port()
    exporter = start_exporter(f"127.0.0.1:{port}", fake_nvml=True, **{P.BASE_ENV: str(tmp_path / "pbase")})

    def post(query, token=None):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/profile?{query}", method="POST",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
    try:
        wait_for_metrics(exporter, port)
        token_file = tmp_path / "pbase" / f"export-{port}.token"
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        assert post(f"pid={proc.pid}")[0] == 401 and post(f"pid={proc.pid}", "wrong")[0] == 401
        assert post("pid=x", token)[0] == 400
        code, said = post(f"pid={os.getpid() + 10**7}", token)
        assert code == 404 and "no such process" in said["message"] and not said["asked"]
        code, said = post(f"pid={proc.pid}&seconds=0.5", token)
        assert code == 202 and said["asked"] and f"of pid {proc.pid}" in said["message"]
        text = wait_for(lambda: (lambda t: t if f'gputop_attribution_window_seconds{{pid="{proc.pid}"}}' in t
                                 else None)(get(f"http://127.0.0.1:{port}/metrics")), 90, "the window's series")
        assert "gputop_attribution_window_age_seconds" in text
    finally:
        stop(exporter)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert not token_file.exists()  # gone with the exporter


@pytest.mark.slow
def test_w_in_the_monitor_asks_the_selected_gpus_process_and_its_finding_comes_as_a_notice(tmp_path, monkeypatch):
    """Plain gputop (the monitor) on a live GPU whose NVML lists a prepared training process: w asks it for a
    window (the notice names its pid), and the window's finding comes as a notice once it is answered."""
    import types

    from fake_nvml import FakeNvml
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.nvml import Nvml
    from gputop.tui.app import GputopApp, TuiConfig
    from pilot_util import sync, wait_for as pilot_wait

    proc, _folder = prepared(tmp_path, TRAIN, "60")
    monkeypatch.setenv(P.BASE_ENV, str(tmp_path / "pbase"))
    static = json.loads((ROOT / "tests/data/static/h200_recorded.json").read_text())["static"]

    class OneProcess(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, h):
            return [types.SimpleNamespace(pid=proc.pid, usedGpuMemory=1 << 30)]

    @sync
    async def run():
        app = GputopApp(TuiConfig(LiveSource(Nvml(OneProcess(static)), process_every=1), hostname="t", specs=[],
                                  device="cpu"))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot_wait(pilot, lambda: proc.pid in app.model.pids_on_selected(), timeout=30)
            await pilot.press("w")
            await pilot_wait(pilot, lambda: any(f"of pid {proc.pid}" in n for n in app.notes), timeout=30)
            await pilot_wait(pilot, lambda: any(n.startswith("profiler window 1 (pid") for n in app.notes),
                             timeout=90)
            await pilot.press("q")
        return app.notes
    try:
        notes = run()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert any("profiler window 1 (pid %d)" % proc.pid in n for n in notes), notes
