"""The workload runner with real child processes on the CPU: events, statuses, partial results,
cancel / timeout / crash, the run document against its JSON schema, and the telemetry summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from gputop import documents, exitcodes
from gputop.analysis.summary import summarize, window
from gputop.runner import document
from gputop.runner.params import format_value
from gputop.runner.status import command_status, exit_code_for, final_status
from gputop.runner.workload_run import WorkloadRun
from gputop.runner.registry import ENV_PATH, Registry, UnknownWorkload

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "fault_workloads"


@pytest.fixture(scope="module")
def registry():
    return Registry([FAULTS])


def run_it(registry, name, grace_s=5.0, timeout=None, **params):
    spec = registry.get(name)
    values = {p.name: p.default for p in spec.params}
    values.update(params)
    events = []
    run = WorkloadRun(spec, values, device="cpu", timeout=timeout, grace_s=grace_s, on_event=events.append)
    return run, events


def finish(run, limit=60):
    assert run.wait(limit), "the run did not end"
    doc = run.document()
    documents.validate(doc)
    return doc


# -- the schema ------------------------------------------------------------------------------------
def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(documents.load_schema("run"))


# -- the registry ----------------------------------------------------------------------------------
def test_registry_finds_builtin_and_extra_workloads(monkeypatch):
    monkeypatch.setenv(ENV_PATH, str(FAULTS))
    reg = Registry()
    names = reg.names()
    builtin = sorted(p.stem for p in (ROOT / "workloads").glob("*.py") if not p.name.startswith("_"))
    assert set(builtin) <= set(names) and "roofline" in names
    assert {"fault_ok", "fault_crash", "fault_raise", "fault_hang", "fault_missing"} <= set(names)
    spec = reg.get("fault_ok")
    assert spec.description == "test workload that finishes normally"
    assert spec.quick == {"k": [1, 2]} and spec.cpu == {"sleep": 0.02} and spec.supports_cpu
    assert callable(spec.analyze) and reg.get("fault_crash").analyze is None


def test_registry_unknown_name_lists_the_known_ones(registry):
    with pytest.raises(UnknownWorkload) as ei:
        registry.get("nope")
    assert "nope" in str(ei.value) and "fault_ok" in str(ei.value) and "fault_hang" in str(ei.value)


def test_registry_skips_private_and_keeps_errors_of_broken_modules(tmp_path):
    (tmp_path / "_helper.py").write_text("raise RuntimeError('must not be loaded')\n")
    (tmp_path / "broken.py").write_text("def oops(:\n")
    (tmp_path / "notaworkload.py").write_text("X = 1\n")
    reg = Registry([FAULTS, tmp_path, tmp_path / "missing"])
    assert "fault_ok" in reg.names() and len(reg) == 5
    errs = "\n".join(reg.errors)
    assert "broken.py" in errs and "SyntaxError" in errs
    assert "notaworkload.py" in errs and "no NAME" in errs
    assert "missing" in errs and "_helper" not in errs


def test_loading_workloads_imports_no_gpu_library():
    code = ("import sys; from gputop.runner.registry import Registry; r = Registry(); "
            "assert 'roofline' in r.names(), r.errors; "
            "print(sorted(m for m in ('cupy', 'torch') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("param,text", [("k", "1,2,4"), ("sleep", "0.05"), ("analyze_fail", "true"), ("device", "cpu")])
def test_format_value_round_trips_through_param_parse(registry, param, text):
    p = next(p for p in registry.get("fault_ok").params if p.name == param)
    value = p.parse(text)
    assert p.parse(format_value(value)) == value


def test_exit_codes_follow_the_status():
    assert exit_code_for("ok") == exitcodes.OK
    assert exit_code_for("error") == exitcodes.FAILED
    assert exit_code_for("error", error_kinds=["bad_param"]) == exitcodes.USAGE
    assert exit_code_for("crashed") == exitcodes.CRASHED
    assert exit_code_for("timeout") == exitcodes.TIMEOUT
    assert exit_code_for("missing_dependency") == exitcodes.MISSING_DEPENDENCY
    assert exit_code_for("interrupted") == exitcodes.INTERRUPTED == 130
    # gputop stopped by signal N: 128 + N, whatever the run's status
    assert exit_code_for("interrupted", signal.SIGTERM) == 143 and exit_code_for("ok", signal.SIGHUP) == 129


def test_final_status_of_each_ending():
    end = lambda rc, done=None, **kw: final_status(rc, done, **({"stop_asked": False, "killed": False,  # noqa: E731
                                                                  "timed_out": False, "error_kinds": []} | kw)).status
    assert end(0, "ok") == "ok"
    assert end(3) == "error"  # a plain non-zero exit without finishing: failed, not crashed
    assert end(0) == "error"  # exited 0 without its "done" event
    assert end(-signal.SIGSEGV) == "crashed" and end(-signal.SIGKILL) == "crashed"
    assert end(-signal.SIGKILL, stop_asked=True, killed=True) == "interrupted"
    assert end(-signal.SIGKILL, timed_out=True, killed=True, timeout=1.0) == "timeout"
    assert end(exitcodes.MISSING_DEPENDENCY) == "missing_dependency"
    assert end(130, "interrupted") == "interrupted"


def test_a_commands_exit_code_is_its_own_but_after_a_timeout_or_a_signal():
    """``--run -- CMD``: the command's own code (as a shell gives it), 6 after --timeout, 128+N when gputop
    was stopped by signal N."""
    assert exit_code_for("ok", command_code=0) == 0 and exit_code_for("error", command_code=3) == 3
    assert exit_code_for("crashed", command_code=128 + signal.SIGSEGV) == 139  # not gputop's 5
    assert exit_code_for("interrupted", command_code=1) == 1  # q in the TUI stopped it: its own code stands
    assert exit_code_for("interrupted", signal.SIGTERM, command_code=130) == 143
    assert exit_code_for("timeout", command_code=130) == exitcodes.TIMEOUT
    assert exit_code_for("timeout", signal.SIGTERM, command_code=130) == exitcodes.TIMEOUT  # as for a workload


def test_command_status_of_each_ending():
    end = lambda rc, **kw: command_status(rc, **({"stopped": False, "killed": False, "timed_out": False}  # noqa: E731
                                                 | kw))
    assert end(0).status == "ok" and end(0).message is None
    assert (end(3).status, end(3).kind) == ("error", "exited") and "code 3" in end(3).message
    assert end(-signal.SIGSEGV).status == "crashed" and "SIGSEGV" in end(-signal.SIGSEGV).message
    assert end(-signal.SIGINT, stopped=True).status == "interrupted" and end(1, stopped=True).status == "interrupted"
    t = end(-signal.SIGKILL, stopped=True, timed_out=True, killed=True, timeout=2.0, grace_s=1.0)
    assert t.status == "timeout" and "--timeout 2 s" in t.message and "killed after 1 s more" in t.message


def test_every_run_has_the_one_run_protocol():
    """A workload, a recorded run and a command or watch are driven the same way (gputop.runner.run.Run)."""
    from gputop.runner.recording import RecordedRun
    from gputop.runner.run import Run
    from gputop.session.command import Session

    wanted = [n for n in ("start", "stop", "poll", "wait", "document", "exit_code") if n in vars(Run)]
    assert len(wanted) == 6
    for cls in (WorkloadRun, RecordedRun, Session):
        missing = [n for n in wanted if not hasattr(cls, n)]
        assert not missing, (cls.__name__, missing)
        assert isinstance(getattr(cls, "exit_code"), property), cls.__name__


# -- runs ------------------------------------------------------------------------------------------
def test_ok_run_collects_events_points_phases_and_analyze(registry):
    run, events = run_it(registry, "fault_ok", k=[1, 2, 4], sleep=0.05)
    run.start()
    doc = finish(run)
    assert doc["status"] == "ok" and doc["exit_code"] == 0 and doc["child_exit_code"] == 0
    assert doc["interrupted"] is False
    assert [p["k"] for p in doc["points"]] == [1, 2, 4]
    assert doc["points"][0]["nan"] is None  # NaN is not JSON: n/a
    assert doc["points"][0]["extra"] == [1, 1]
    assert doc["results"] == {"sum_k": 7, "analyzed": True}
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == ("compute-bound", "test")
    assert doc["verdict"]["evidence"] == {"points": 3} and doc["verdict"]["evidence_text"] == "3 points"
    assert [ph["name"] for ph in doc["phases"]] == ["warmup", "measure"]
    assert [ph["verdict"]["subclass"] for ph in doc["phases"]] == ["phase warmup", "phase measure"]
    w, m = doc["phases"]
    assert w["t_end"] == m["t_start"] and m["t_end"] is not None and m["t_end"] <= doc["wall_time_s"]
    assert w["duration_s"] > 0
    assert {"code": "test", "message": "a test warning"} in doc["warnings"]
    assert "a stray line that is not JSON" in doc["log"] and "hello from fault_ok" in doc["log"]
    assert doc["errors"] == []
    assert doc["device"] == {"kind": "cpu", "nvml_index": None, "static": None, "peaks": None,
                             "reported": {"kind": "cpu", "name": "test device",
                                          "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}}
    assert doc["params"]["device"] == "cpu" and doc["command"][2].endswith("fault_ok.py")
    # the events reached the listener in order, the runner's "finished" last
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and kinds[-2] == "done" and kinds[-1] == "finished"
    assert events[-1]["status"] == "ok" and events[-1]["exit_code"] == 0
    assert kinds.count("point") == 3 and kinds.count("progress") == 6
    # host telemetry only on the CPU: GPU fields are n/a, the child's CPU use is watched
    assert run.ticks and doc["telemetry"]["samples"] >= 1 and doc["telemetry"]["gpu_samples"] == 0
    assert doc["telemetry"]["sm_active_pct"] == {"mean": None, "max": None}
    assert doc["telemetry"]["host_cpu_pct"]["mean"] is not None
    assert any("procs" in t["host"] for t in run.ticks)


def test_analyze_failure_is_a_warning_not_a_crash(registry):
    run, _ = run_it(registry, "fault_ok", k=[1], sleep=0.0, analyze_fail=True)
    doc = finish(run.start())
    assert doc["status"] == "ok" and doc["verdict"] is None and len(doc["points"]) == 1
    assert any(w["code"] == "analyze_failed" and "on purpose" in w["message"] for w in doc["warnings"])
    assert "analyzed" not in doc["results"]  # a failing analyze leaves the document as it was


def test_hard_crash_keeps_the_partial_point(registry):
    run, events = run_it(registry, "fault_crash")
    doc = finish(run.start())
    assert doc["status"] == "crashed" and doc["exit_code"] == exitcodes.CRASHED
    assert doc["child_exit_code"] == -9
    assert doc["points"] == [{"k": 1, "gflops": 2.0}]
    err = doc["errors"][-1]
    assert err["kind"] == "crashed" and "SIGKILL" in err["message"] and "about to die" in err["detail"]
    assert any(e["event"] == "error" and e.get("kind") == "crashed" for e in events)
    assert doc["phases"][0]["name"] == "measure" and doc["phases"][0]["t_end"] is not None


def test_exception_in_the_workload_is_an_error_with_its_message(registry):
    run, _ = run_it(registry, "fault_raise")
    doc = finish(run.start())
    assert doc["status"] == "error" and doc["exit_code"] == exitcodes.FAILED and doc["child_exit_code"] == 1
    assert len(doc["points"]) == 1
    err = doc["errors"][0]
    assert err["kind"] == "exception" and "boom: a test failure" in err["message"]
    assert "Traceback" in err["detail"] and "RuntimeError" in err["detail"]


def test_missing_dependency(registry):
    run, _ = run_it(registry, "fault_missing")
    doc = finish(run.start())
    assert doc["status"] == "missing_dependency" and doc["exit_code"] == exitcodes.MISSING_DEPENDENCY
    assert doc["errors"][0]["kind"] == "missing_dependency" and "pip install" in doc["errors"][0]["message"]


def _wait_for(path: Path, limit: float = 30.0):
    end = time.monotonic() + limit
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


def test_timeout_stops_a_hang_and_keeps_the_point(registry):
    run, _ = run_it(registry, "fault_hang", timeout=0.5)
    doc = finish(run.start())
    assert doc["status"] == "timeout" and doc["exit_code"] == exitcodes.TIMEOUT
    assert doc["interrupted"] is False and doc["points"] == [{"k": 1, "gflops": 2.0}]
    assert any(e["kind"] == "timeout" for e in doc["errors"])
    assert "hanging now" in doc["log"]


def test_cancel_is_graceful_and_the_partial_document_validates(registry, tmp_path):
    ready = tmp_path / "ready"
    run, _ = run_it(registry, "fault_hang", ready_file=str(ready))
    run.start()
    _wait_for(ready)
    partial = run.document()  # while it runs
    documents.validate(partial)
    assert partial["status"] == "running" and partial["exit_code"] is None and partial["phases"][0]["t_end"] is None
    run.stop()
    doc = finish(run)
    assert doc["status"] == "interrupted" and doc["interrupted"] is True
    assert doc["exit_code"] == exitcodes.INTERRUPTED and doc["child_exit_code"] == 130
    assert doc["points"] == [{"k": 1, "gflops": 2.0}]
    assert not any(w["code"] == "killed" for w in doc["warnings"])


def test_cancel_kills_after_the_grace_period(registry, tmp_path):
    ready = tmp_path / "ready"
    run, _ = run_it(registry, "fault_hang", grace_s=0.3, obey=False, ready_file=str(ready))
    run.start()
    _wait_for(ready)
    run.stop()
    doc = finish(run)
    assert doc["status"] == "interrupted" and doc["exit_code"] == exitcodes.INTERRUPTED
    assert doc["child_exit_code"] == -9 and run.child.killed
    assert any(w["code"] == "killed" for w in doc["warnings"])
    assert len(doc["points"]) == 1


def test_a_broken_listener_does_not_stop_the_run(registry):
    spec = registry.get("fault_ok")
    values = {p.name: p.default for p in spec.params} | {"k": [1], "sleep": 0.0}

    def bad(ev):
        raise RuntimeError("listener bug")

    doc = finish(WorkloadRun(spec, values, device="cpu", on_event=bad).start())
    assert doc["status"] == "ok" and any(w["code"] == "listener" for w in doc["warnings"])


def test_a_run_starts_once_and_checks_its_device(registry):
    spec = registry.get("fault_ok")
    with pytest.raises(ValueError):
        WorkloadRun(spec, {}, device="tpu")
    run = WorkloadRun(spec, {p.name: p.default for p in spec.params} | {"k": [1], "sleep": 0.0}, device="cpu")
    run.start()
    with pytest.raises(RuntimeError):
        run.start()
    finish(run)


def test_error_document_validates():
    doc = documents.run_error_document("x", "bad_param", "bad value for parameter 'k'", exitcodes.USAGE)
    documents.validate(doc)


def test_dumps_is_strict_json():
    text = documents.dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": (1, 2)})
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": [1, 2]}


def test_write_csv_puts_columns_in_first_seen_order(tmp_path):
    path = tmp_path / "p.csv"
    document.write_csv([{"k": 1, "ai": 0.25, "x": [1, 2]}, {"k": 2, "ai": 0.5, "y": None, "z": "s"}], str(path))
    assert path.read_text().splitlines() == ["k,ai,x,y,z", "1,0.25,\"[1, 2]\",,", "2,0.5,,,s"]


# -- the telemetry summary -------------------------------------------------------------------------
def _tick(t, gpu=None, cpu=None, proc=None):
    host = {"cpu_pct": cpu}
    if proc is not None:
        host["procs"] = {"123": {"cpu_pct": proc, "children_cpu_pct": 50.0, "children": 1}}
    return {"t": t, "gpus": [gpu] if gpu is not None else [], "host": host}


def test_summarize_mean_max_reasons_and_na():
    ticks = [
        _tick(10.0, {"sm_active_pct": 50.0, "dram_bw_pct": None, "power_w": 300.0, "clock_reasons": ["idle"]}, 10.0, 100.0),
        _tick(10.1, {"sm_active_pct": 100.0, "dram_bw_pct": None, "power_w": 500.0,
                     "clock_reasons": ["software power cap", "idle"]}, 30.0, 50.0),
        _tick(10.2, {"sm_active_pct": None, "power_w": 400.0, "clock_reasons": []}, None, None),
    ]
    s = summarize(ticks, 0, pid=123)
    assert s["samples"] == 3 and s["gpu_samples"] == 3 and s["seconds"] == pytest.approx(0.2)
    assert s["sm_active_pct"] == {"mean": 75.0, "max": 100.0}
    assert s["power_w"] == {"mean": 400.0, "max": 500.0}
    assert s["dram_bw_pct"] == {"mean": None, "max": None}
    assert s["clock_reasons_seen"] == ["idle", "software power cap"]
    assert s["host_cpu_pct"] == {"mean": 20.0, "max": 30.0}
    assert s["workload_cpu_pct"] == {"mean": 125.0, "max": 150.0}  # the process and its children
    assert summarize(ticks, 0, pid=999)["workload_cpu_pct"] == {"mean": None, "max": None}


def test_summarize_without_a_gpu_or_ticks():
    s = summarize([_tick(1.0, cpu=5.0), _tick(2.0, cpu=15.0)], 0)
    assert s["gpu_samples"] == 0 and s["sm_clock_mhz"] == {"mean": None, "max": None}
    assert s["clock_reasons_seen"] is None and s["host_cpu_pct"]["mean"] == 10.0
    empty = summarize([], 0)
    assert empty["samples"] == 0 and empty["seconds"] == 0.0 and empty["power_w"]["max"] is None
    lost = summarize([_tick(1.0, {"index": 0, "lost": True, "power_w": 1.0})], 0)
    assert lost["gpu_samples"] == 0 and lost["power_w"]["mean"] is None
    assert [t["t"] for t in window([_tick(1.0), _tick(2.0), _tick(3.0)], 2.0, 3.0)] == [2.0]


# -- a shared sampler (the TUI's) ------------------------------------------------------------------
class _FakeSource:
    """Stands in for the TUI's live source: two GPUs, NVML indices 3 and 5."""

    kind = "live"
    indices = [3, 5]

    def __init__(self):
        self.watched = []

    def static(self):
        return [{"index": 3, "name": "A"}, {"index": 5, "name": "B"}]

    def watch(self, pid):
        self.watched.append(pid)

    def unwatch(self, pid):
        self.watched.remove(pid)


class _FakeSampler:
    def __init__(self):
        self.source = _FakeSource()
        self.listeners = []


def test_attaching_to_an_existing_sampler_reads_the_right_gpu(registry, monkeypatch):
    """With the TUI's sampler, the run listens to its ticks and summarises its own GPU's position."""
    spec = registry.get("fault_hang")
    sampler = _FakeSampler()
    run = WorkloadRun(spec, {"obey": True, "ready_file": ""}, device="cuda", nvml_index=5, sampler=sampler,
                      grace_s=2.0)
    monkeypatch.setattr(run, "build_env", lambda: dict(os.environ, PYTHONPATH=str(ROOT)))
    run.start()
    assert run.gpu_pos == 1 and run.static == {"index": 5, "name": "B"}
    assert sampler.source.watched == [run.pid] and run._on_tick in sampler.listeners

    def feed():
        for i in range(5):
            for fn in list(sampler.listeners):
                fn({"t": time.monotonic(), "host": {}, "gpus": [{"sm_active_pct": 1.0}, {"sm_active_pct": 90.0 + i}]})
            time.sleep(0.02)

    feeder = threading.Thread(target=feed)
    feeder.start()
    feeder.join()
    run.stop()
    doc = finish(run)
    assert doc["device"]["nvml_index"] == 5 and doc["device"]["static"]["name"] == "B"
    assert doc["telemetry"]["sm_active_pct"] == {"mean": 92.0, "max": 94.0}
    assert run._on_tick not in sampler.listeners  # detached at the end; the TUI's sampler goes on


def test_command_line_passes_every_value_but_empty_lists(tmp_path):
    (tmp_path / "lists.py").write_text(
        "from gputop.workload import Param\nNAME = 'lists'\nDESCRIPTION = 'list params'\n"
        "PARAMS = [Param('device', 'choice', 'cuda', choices=['cuda', 'cpu']), Param('sizes', 'int_list', []),"
        " Param('x', 'float', 0.1)]\ndef run(p, emit):\n    emit.started(NAME, p, {'kind': p['device']})\n"
        "if __name__ == '__main__':\n    import sys\n    from gputop.workload import main\n"
        "    raise SystemExit(main(sys.modules[__name__]))\n")
    spec = Registry([tmp_path]).get("lists")
    run = WorkloadRun(spec, {"sizes": [], "x": 0.1}, device="cpu")
    cmd = run.build_command()
    assert "--events" in cmd and "x=0.1" in cmd and "device=cpu" in cmd and not any(c.startswith("sizes=") for c in cmd)
    doc = finish(run.start())
    assert doc["status"] == "ok" and doc["params"]["sizes"] == []


def test_a_child_that_exits_without_done_failed(tmp_path):
    (tmp_path / "quiet.py").write_text(
        "import sys\nfrom gputop.workload import Param\nNAME = 'quiet'\nDESCRIPTION = 'exits at once'\n"
        "PARAMS = [Param('device', 'choice', 'cuda', choices=['cuda', 'cpu'])]\ndef run(p, emit):\n    pass\n"
        "if __name__ == '__main__':\n    print('bye', file=sys.stderr)\n")
    doc = finish(WorkloadRun(Registry([tmp_path]).get("quiet"), {}, device="cpu").start())
    assert doc["status"] == "error" and doc["exit_code"] == exitcodes.FAILED and doc["child_exit_code"] == 0
    assert "without finishing" in doc["errors"][0]["message"] and doc["errors"][0]["detail"] == "bye"


def test_cancel_before_start_stops_the_child_at_once(registry):
    run, _ = run_it(registry, "fault_hang", grace_s=60)  # the SIGINT ends it, not the kill, however busy the machine
    run.stop()
    doc = finish(run.start())
    assert doc["status"] == "interrupted" and doc["interrupted"] is True and doc["exit_code"] == exitcodes.INTERRUPTED
    assert not run.child.killed


@pytest.mark.slow
def test_cuda_path_maps_the_gpu_samples_it_and_computes_peaks(registry, monkeypatch):
    """The CUDA side without a GPU: NVML answered by the fake from a recorded H200 (tests/fake_nvml.py)."""
    from fake_nvml import FakeNvml

    from gputop.telemetry.nvml import Nvml

    static = json.loads((ROOT / "tests" / "data" / "static" / "h200_recorded.json").read_text())["static"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec = registry.get("fault_ok")
    values = {p.name: p.default for p in spec.params} | {"k": [1, 2], "sleep": 0.25}
    run = WorkloadRun(spec, values, device="cuda", nvml_index=0, nvml=Nvml(FakeNvml(static)))
    doc = finish(run.start())
    dev = doc["device"]
    assert doc["status"] == "ok" and dev["kind"] == "cuda" and dev["nvml_index"] == 0
    assert dev["static"]["name"] == static["name"] and dev["peaks"]["dram_bytes_per_s"] > 1e12
    assert dev["reported"]["cuda_visible_devices"] == static["uuid"]  # the child's cuda:0 is NVML GPU 0
    assert doc["params"]["device"] == "cuda" and "device=cuda" in doc["command"]
    tel = doc["telemetry"]
    assert tel["gpu_samples"] >= 1 and tel["power_w"]["mean"] is not None and tel["sm_clock_mhz"]["max"] is not None
    assert isinstance(tel["clock_reasons_seen"], list)
    assert any(ph["telemetry"]["gpu_samples"] for ph in doc["phases"])


def test_a_stop_the_workload_could_not_hear_yet_is_still_seen(registry, monkeypatch):
    """A SIGINT that comes while Python starts up is swallowed there (site's .pth processing, the import system's
    path hooks): beside two test suites, 2 of 150 stops asked just before the start were lost and the workload ran
    on to its kill. The stop is also a file the workload looks for once it listens: here the SIGINT is dropped
    outright, and the run still ends at once, interrupted, not killed."""
    from gputop.runner import child as child_mod

    real = child_mod.Child._signal
    monkeypatch.setattr(child_mod.Child, "_signal",
                        lambda self, sig, group: None if sig == signal.SIGINT else real(self, sig, group))
    run, _ = run_it(registry, "fault_hang", grace_s=60)
    stop_file = run._stop_file
    run.stop()
    assert os.path.exists(stop_file)
    doc = finish(run.start())
    assert doc["status"] == "interrupted" and doc["exit_code"] == exitcodes.INTERRUPTED and not run.child.killed
    assert not os.path.exists(stop_file)  # the file is gone with the run
