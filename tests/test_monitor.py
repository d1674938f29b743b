"""``gputop --run -- CMD`` and ``--watch PID`` on a CPU machine: the no-NVML exit path for real, and the
orchestration (child process, pass-through, --log, exit codes, signals, OOM, GPU finding, the JSON
document) driven by a replay of the real H200 demo trace instead of live NVML."""

from __future__ import annotations

import io
import json
import os
import time
import signal
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest

from gputop import cli, documents, exitcodes
from gputop.cli.command import session_options
from gputop.headless import command as headless
from gputop.runner.run import drive
from gputop.session import command_options
from gputop.session.command import Session
from gputop.session.finder import GpuFinder, TickStore
from gputop.session.monitor import PROCESS_EVERY, Monitor
from gputop.session.report import build_document, render_text
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.trace import ReplaySource, demo_trace_path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text())
NO_GPU = not Nvml().available()
PY = sys.executable
DEMO_PID = 445  # the recorded child's pid in the demo trace's NVML process lists
def replayed_first(mon: Monitor, folder: Path) -> str:
    """The start of a child's code that waits until ``mon``'s replay has been read to its end (read as fast as
    possible on the sampler's thread, which the session starts; the analysis tests need every phase), however long
    a busy machine takes: a thread here says so through a file."""
    go = folder / "replayed"

    def release() -> None:
        end = time.monotonic() + 60
        while not mon.sampler.source.finished and time.monotonic() < end:
            time.sleep(0.02)
        go.write_text("")

    threading.Thread(target=release, daemon=True).start()
    return f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\n"


def gputop_cli(*args, cwd=None, timeout=60):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([PY, "-m", "gputop", *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          env=env, timeout=timeout)


def replay_monitor(**kw) -> Monitor:
    return Monitor(ReplaySource(demo_trace_path(), speed=float("inf")), **kw)


def run_command(mon, command, **kw) -> dict:
    """The headless loop on a session: start, poll until it ends, finish; the run facts."""
    s = Session(mon, command, **kw)
    drive(s, "stopping")
    s.document()
    return s.facts()


def watch_process(mon, pid, seconds=None) -> dict:
    s = Session(mon, pid=pid, seconds=seconds)
    drive(s, "watch ended")
    s.document()
    return s.facts()


def replay_open(spec, note, record=None, active_ok=False):
    return replay_monitor(active_ok=active_ok)


def main_command(argv: list[str]) -> int:
    """headless.main_command on what cli makes of ``argv`` (its session's options, its report's flags)."""
    args, command = cli.parse(argv)
    return headless.main_command(session_options(args, command), json_mode=args.json, output=args.output)


def document(mon, run, command):
    doc = build_document("run", mon, run, command, "2026-01-01T00:00:00+00:00")
    jsonschema.validate(doc, SCHEMA)
    return doc


# -- the real no-NVML paths -------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not NO_GPU, reason="needs a machine without NVML")
def test_run_without_nvml_runs_the_command_and_record_is_exit_3_before_it_starts(tmp_path):
    """Without NVML the command runs (its exit and CPU reported: tests/test_run_without_gpu.py); what records GPU
    telemetry is exit 3 and never starts it."""
    r = gputop_cli("--run", "--", PY, "-c", "open('started', 'w')", cwd=tmp_path)
    assert r.returncode == 0 and "verdict: none (no GPU seen)" in r.stdout
    assert (tmp_path / "started").exists()
    (tmp_path / "started").unlink()
    r = gputop_cli("--record", "t.jsonl", "--run", "--", PY, "-c", "open('started', 'w')", cwd=tmp_path)
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "libnvidia-ml" in r.stderr
    assert not (tmp_path / "started").exists()
    r = gputop_cli("--json", "--record", "t.jsonl", "--run", "--", PY, "-c", "pass", cwd=tmp_path)
    assert r.returncode == 3 and r.stderr.count("\n") == 1
    doc = json.loads(r.stdout)  # --json: one document, an error document here
    jsonschema.validate(doc, SCHEMA)
    assert doc["exit_code"] == 3 and doc["errors"][0]["kind"] == "no_gpu" and doc["verdict"] is None


@pytest.mark.skipif(not NO_GPU, reason="needs a machine without NVML")
def test_watch_without_nvml_exits_3():
    r = gputop_cli("--watch", str(os.getpid()), "--seconds", "1")
    assert r.returncode == 3 and "libnvidia-ml" in r.stderr


def test_watch_of_a_missing_process_exits_2():
    p = subprocess.Popen([PY, "-c", "pass"])
    p.wait()  # reaped: its pid is free now
    r = gputop_cli("--watch", str(p.pid))
    assert r.returncode == 2 and r.stderr.strip() == f"gputop: --watch {p.pid}: no such process"


def test_run_usage_errors():
    r = gputop_cli("--seconds", "3", "--run", "--", "true")
    assert r.returncode == 2 and "--timeout" in r.stderr and r.stderr.count("\n") == 1
    r = gputop_cli("--demo", "--run", "--", "true")
    assert r.returncode == 2 and "--replay" in r.stderr


# -- running a command under a replayed source --------------------------------------------------------------
def test_exit_code_and_pass_through(capfd, tmp_path):
    mon = replay_monitor()
    code = replayed_first(mon, tmp_path) + "import sys; print('child-out'); print('child-err', file=sys.stderr); sys.exit(3)"
    run = run_command(mon, [PY, "-c", code])
    out, err = capfd.readouterr()
    assert run["exit_code"] == 3 and run["ended"] == "exited" and not run["oom"]
    assert "child-out" in out and "child-err" in err
    doc = document(mon, run, [PY, "-c", code])
    assert doc["exit_code"] == 3 and doc["command"][0] == PY
    # the replayed trace's pids are not the child's: its GPU is found by the memory rise, and it says so
    assert doc["gpu_detection"] == "memory/activity rise" and doc["gpus_used"] == [0]
    assert any("PID namespace" in n for n in doc["notes"])
    assert doc["gpus"][0]["timeline"] and doc["verdict"]["class"] != "idle"
    text = render_text(doc)
    assert "a mixed run" in text  # the demo's four busy phases: no class has half the busy time
    assert "exited with code 3" in text and "timeline:" in text and "verdict:" in text and "advice:" in text


def test_gpus_found_by_pid_in_nvml_process_list(tmp_path):
    mon = replay_monitor(tree=lambda: {DEMO_PID})
    code = replayed_first(mon, tmp_path)
    run = run_command(mon, [PY, "-c", code])
    doc = document(mon, run, [PY, "-c", code])
    assert doc["gpu_detection"] == "process list" and doc["gpus"][0]["first_seen_s"] > 0
    segs = doc["gpus"][0]["timeline"]
    assert segs[0]["subclass"] == "startup"
    assert [s["class"] for s in segs[1:]] == ["idle", "compute-bound", "memory-bound", "latency-bound",
                                              "pcie-bound", "idle"]


def test_json_mode_sends_the_child_stdout_to_stderr(tmp_path, capfd):
    errfile = open(tmp_path / "err.txt", "w+")
    try:
        run = run_command(replay_monitor(), [PY, "-c", "print('to-stdout')"], json_mode=True, err=errfile)
    finally:
        errfile.close()
    out, _ = capfd.readouterr()
    assert run["exit_code"] == 0 and "to-stdout" not in out
    assert "to-stdout" in (tmp_path / "err.txt").read_text()


def test_json_mode_into_a_stream_without_a_descriptor():
    err = io.StringIO()
    run = run_command(replay_monitor(), [PY, "-c", "print('via-pipe')"], json_mode=True, err=err)
    assert run["exit_code"] == 0 and "via-pipe" in err.getvalue()


def test_log_file_gets_both_streams(tmp_path, capfd):
    log = tmp_path / "cmd.log"
    code = "import sys; print('o1', flush=True); print('e1', file=sys.stderr); sys.exit(0)"
    run = run_command(replay_monitor(), [PY, "-c", code], log=str(log))
    out, err = capfd.readouterr()
    text = log.read_text()
    assert run["exit_code"] == 0 and "o1" in text and "e1" in text
    assert "o1" not in out and "e1" not in err


def test_a_signal_death_is_128_plus_n():
    run = run_command(replay_monitor(), [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert run["exit_code"] == 128 + signal.SIGTERM and run["ended"] == f"signal {int(signal.SIGTERM)}"
    assert exitcodes.shell_code(-9) == 137 and exitcodes.shell_code(0) == 0 and exitcodes.shell_code(2) == 2


def test_command_session_without_blocking(tmp_path):
    """What the TUI uses: start, poll from its own loop, stop, finish."""
    ready = tmp_path / "ready"  # the command is past Python's start-up (a SIGINT there exits 1, not 130)
    code = f"import time; open({str(ready)!r}, 'w').close(); time.sleep(60)"
    # a long grace: the SIGINT must end it, however slowly a busy machine schedules its exit
    s = Session(replay_monitor(), [PY, "-c", code], err=io.StringIO(), grace_s=60).start()
    assert s.poll() is False
    end = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < end and s.poll() is False, "the command never got going"
        time.sleep(0.02)
    s.stop()  # SIGINT to the command's group: Python dies of it (130)
    assert s.wait(30)
    facts = s.facts()
    assert facts["ended"] == "interrupted" and facts["command_exit_code"] == 130 and facts["exit_code"] == 130


def test_a_command_stopped_before_it_started_ends_at_once_as_interrupted():
    """A signal can land between the monitor's start and the launch: the command is stopped as it starts."""
    s = Session(replay_monitor(), [PY, "-c", "import time; time.sleep(60)"], err=io.StringIO(), grace_s=0.5)
    assert s.poll() is False and s.exit_code is None
    s.stop(signal.SIGTERM)
    s.start()
    assert s.wait(30)
    facts = s.document() and s.facts()
    assert facts["status"] == "interrupted" and facts["exit_code"] == s.exit_code == 128 + signal.SIGTERM


def test_timeout_stops_the_command():
    run = run_command(replay_monitor(), [PY, "-c", "import time; time.sleep(60)"], timeout=0.3,
                      err=io.StringIO())
    assert run["ended"] == "timeout" and run["exit_code"] == exitcodes.TIMEOUT
    assert run["command_exit_code"] == 130  # SIGINT: Python dies of KeyboardInterrupt


def test_out_of_memory_on_stderr_makes_the_verdict_memory_capacity(capfd, tmp_path):
    mon = replay_monitor(tree=lambda: {DEMO_PID})
    code = (replayed_first(mon, tmp_path) + "import sys; print('torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 20.00 GiB', file=sys.stderr); sys.exit(1)")
    run = run_command(mon, [PY, "-c", code])
    assert run["oom"] and run["exit_code"] == 1
    doc = document(mon, run, [PY, "-c", code])
    assert doc["verdict"]["class"] == "memory-capacity" and doc["verdict"]["subclass"] == "oom"
    assert any("out-of-memory" in n for n in doc["notes"])
    assert "out of memory" in capfd.readouterr().err  # still passed through


def test_out_of_memory_survives_in_a_recorded_trace(tmp_path):
    from gputop.evaluate.labelled import diagnose_trace

    rec = tmp_path / "oom.jsonl.gz"
    mon = replay_monitor(record=str(rec), tree=lambda: {DEMO_PID})
    code = (replayed_first(mon, tmp_path) + "import sys; print('CUDA out of memory. Tried to allocate 2.00 GiB', "
            "file=sys.stderr); sys.exit(1)")
    run_command(mon, [PY, "-c", code], err=io.StringIO())
    a = diagnose_trace(str(rec))
    assert a["verdict"]["class"] == "memory-capacity" and a["verdict"]["subclass"] == "oom"


@pytest.mark.slow
def test_a_signal_to_gputop_stops_the_command_and_says_which(monkeypatch):
    child = [PY, "-c", "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    raise SystemExit(42)"]
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    run = run_command(replay_monitor(), child)
    assert run["ended"] == "interrupted" and run["command_exit_code"] == 42
    assert run["exit_code"] == 128 + signal.SIGTERM and run["signal"] == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored


@pytest.mark.slow
def test_a_second_signal_kills_a_command_that_ignores_sigint():
    child = [PY, "-c", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"]
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    run = run_command(replay_monitor(), child)
    assert run["ended"] == "interrupted" and run["command_exit_code"] == 137 and run["exit_code"] == 130
    assert run["wall_s"] < 30  # not the 60 s sleep, nor the grace period


def test_main_command_json_document_and_exit_code(monkeypatch, capfd):
    monkeypatch.setattr(command_options, "open_monitor", replay_open)
    assert main_command(["--json", "--run", "--", PY, "-c", "print('hi'); raise SystemExit(4)"]) == 4
    out, err = capfd.readouterr()
    doc = json.loads(out)  # stdout is one JSON document
    jsonschema.validate(doc, SCHEMA)
    assert doc["exit_code"] == 4 and doc["mode"] == "run" and "hi" in err


def test_main_command_text_and_output_file(monkeypatch, capfd, tmp_path):
    monkeypatch.setattr(command_options, "open_monitor", replay_open)
    out_json = tmp_path / "doc.json"
    assert main_command(["-o", str(out_json), "--run", "--", PY, "-c", "pass"]) == 0
    out, _ = capfd.readouterr()
    assert out.startswith("gputop: `") and "verdict:" in out
    jsonschema.validate(json.loads(out_json.read_text()), SCHEMA)


def test_main_command_not_found_exits_2(monkeypatch, capfd):
    monkeypatch.setattr(command_options, "open_monitor", replay_open)
    assert main_command(["--run", "--", "no-such-command-gputop-test", "x"]) == 2
    err = capfd.readouterr().err
    assert err.strip() == "gputop: command not found: no-such-command-gputop-test"
    assert main_command(["--run", "--", "./no/such/path"]) == 2


def test_record_writes_a_trace_with_marks(monkeypatch, tmp_path):
    from gputop.telemetry.trace import read_trace

    rec = tmp_path / "run.jsonl.gz"
    mon = replay_monitor(record=str(rec), note="test expect=idle", tree=lambda: {DEMO_PID})
    go = tmp_path / "go"  # the command runs until the finder has seen it on the GPU (no timing race)

    def release():
        t0 = time.monotonic()
        while mon.finder.result()[1] != "process list" and time.monotonic() - t0 < 20:
            time.sleep(0.05)
        go.write_text("")

    threading.Thread(target=release, daemon=True).start()
    run_command(mon, [PY, "-c", f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)"])
    header, rows = read_trace(str(rec))
    labels = [r["label"] for r in rows if r["type"] == "mark"]
    assert header["note"] == "test expect=idle" and labels[0] == "started"
    assert any(lab.startswith("on GPU 0 (process list)") for lab in labels) and labels[-1] == "exited 0"
    assert sum(r["type"] == "tick" for r in rows) > 300


@pytest.mark.slow
def test_watch_process_until_it_exits():
    p = subprocess.Popen([PY, "-c", "import time; time.sleep(0.5)"])
    mon = replay_monitor(active_ok=True)
    try:
        run = watch_process(mon, p.pid)
    finally:
        p.wait()
    assert run["ended"] == "exited" and run["exit_code"] == 0 and run["command_exit_code"] is None
    doc = build_document("watch", mon, run, None, "2026-01-01T00:00:00+00:00")
    jsonschema.validate(doc, SCHEMA)
    assert doc["gpu_detection"] == "memory/activity rise"
    assert "watched pid" in render_text(doc)


def test_watch_process_for_n_seconds():
    mon = replay_monitor(active_ok=True)
    run = watch_process(mon, os.getpid(), seconds=0.3)
    assert run["ended"] == "seconds"


# -- pieces -----------------------------------------------------------------------------------------------
def _tick(t, mem, util=0.0, procs=None):
    return {"t": t, "gpus": [{"mem_used_bytes": mem, "util_gpu_pct": util, "sm_active_pct": None,
                              "processes": procs}], "host": {}}


def test_gpu_finder():
    f = GpuFinder(pid=10, tree=lambda: {10, 11})
    f(_tick(0.0, 1e9, procs=[{"pid": 99}]))
    f(_tick(1.0, 1e9, procs=[{"pid": 11}]))
    assert f.result() == ({0: 1.0}, "process list")
    f = GpuFinder(pid=10, tree=lambda: set())
    f(_tick(0.0, 1e9))
    f(_tick(1.0, 1e9 + 100 * 2**20))
    assert f.result() == ({}, "none")
    f(_tick(2.0, 1e9 + 300 * 2**20))
    assert f.result() == ({0: 2.0}, "memory/activity rise")
    # a process already running when the watch begins: activity counts from the first tick
    f = GpuFinder(pid=10, tree=lambda: set(), active_ok=True)
    f(_tick(0.0, 5e9, util=80.0))
    assert f.result() == ({0: 0.0}, "memory/activity rise")


def test_clean_makes_nan_null():
    doc = {"a": [1.0, float("nan")], "b": float("inf"), "c": "x"}
    assert documents.clean(doc) == {"a": [1.0, None], "b": None, "c": "x"}


def test_tick_store_thins_long_runs():
    s = TickStore(max_ticks=100)
    for i in range(1000):
        procs = [{"pid": 1, "name": "python3", "user": "me", "gpu_memory_bytes": 1 << 30}] if i % 10 == 0 else None
        s({"t": float(i), "gpus": [{"processes": procs, "process_sm_pct": {"1": 3.0}}],
           "host": {"cpu_per_core_pct": [1.0, 90.0]}})
    ticks = s.snapshot()
    assert len(ticks) <= 100 and ticks[0]["t"] == 0.0 and ticks[-1]["t"] > 900
    assert ticks[0]["host"]["cpu_per_core_pct"] == [90.0]
    # what the classifier needs stays: the pids of the process lists (host-bound vs idle) and NVML's per-process
    # SM samples; the names, users and memory of the processes go
    assert ticks[0]["gpus"][0]["processes"] == [{"pid": 1}] and ticks[0]["gpus"][0]["process_sm_pct"] == {"1": 3.0}
    assert any(t["gpus"][0]["processes"] is None for t in ticks)


def test_a_run_timeline_from_the_store_still_sees_the_cuda_context():
    """The final analysis reads the store: a process holding the GPU's context and burning a core while the
    GPU idles is host-bound there too (it was idle when the store dropped the process lists)."""
    from gputop.analysis.timeline import timeline
    from test_classify import H200, PEAKS, window

    s = TickStore()
    for smp in window(n=40, util_gpu_pct=1.0, sm_active_pct=0.1, processes=[{"pid": 4242, "name": "python3"}]):
        s({"t": smp["t"], "gpus": [smp], "host": {"procs": {"4242": {"cpu_pct": 99.0, "children_cpu_pct": 0.0}}}})
    segs = timeline(s.snapshot(), 0, H200, PEAKS, watched_pid="4242")
    assert [g.cls for g in segs] == ["host-bound"], [(g.cls, g.evidence_text) for g in segs]


# -- the live path, through the thin pynvml fake ------------------------------------------------------------
@pytest.mark.slow
def test_live_source_finds_the_child_by_pid_with_a_fake_nvml(monkeypatch, capfd):
    """LiveSource + GpuReader + HostReader as on a GPU machine; NVML answered by tests/fake_nvml.py,
    whose process list holds this test's children (the command gputop launches is one)."""
    import types

    import psutil

    from fake_nvml import FakeNvml
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.sample import GPM_METRICS

    static = json.loads((ROOT / "tests" / "data" / "static" / "h200_recorded.json").read_text())["static"]

    class Fake(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, h):
            kids = psutil.Process().children(recursive=True)
            return [types.SimpleNamespace(pid=k.pid, usedGpuMemory=1 << 30) for k in kids]

    gpm = {GPM_METRICS["sm_active_pct"]: 97.0, GPM_METRICS["tensor_pct"]: 94.0, GPM_METRICS["hmma_pct"]: 94.0,
           GPM_METRICS["dram_bw_pct"]: 16.0, GPM_METRICS["fp32_pct"]: 1.0}
    src = LiveSource(Nvml(Fake(static, gpm_values=gpm)), process_every=PROCESS_EVERY)  # as open_monitor opens it
    monkeypatch.setattr(command_options, "open_monitor",
                        lambda spec, note, record=None, active_ok=False: Monitor(src, rate_hz=spec.rate_hz))
    assert main_command(["--json", "--rate", "20", "--run", "--", PY, "-c", "import time; time.sleep(2.5)"]) == 0
    doc = json.loads(capfd.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["gpu_detection"] == "process list" and doc["gpus_used"] == [0]
    assert doc["source"]["kind"] == "live"
    v = doc["verdict"]
    assert (v["class"], v["subclass"]) == ("compute-bound", "tensor")
    assert "tensor 94%" in v["evidence_text"]
    # the watched child's CPU was read (it slept: near 0)
    assert v["evidence"]["feeder_cpu_pct"] is not None and v["evidence"]["feeder_cpu_pct"] < 50
