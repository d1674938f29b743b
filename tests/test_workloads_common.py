"""Helpers shared by the teaching workloads' tests (dataloader, amp, batchsize, cudagraphs), and the tests
of gputop.workload.util and gputop.lessons.docs. The workload tests run each script for real on the CPU at tiny sizes."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop import documents
from gputop.analysis.verdict import display_name
from gputop.workload import Emitter
from gputop.lessons import lesson
from gputop.lessons.docs import phase_points, phase_window, tele, tele_numbers, tele_text, throttle_warnings
from gputop.workload.util import noise_check, stats
from verdict_util import check_verdict  # noqa: F401  (the workload tests import it from here)

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):
    """The workload module workloads/NAME.py (as the registry loads it: by path)."""
    spec = importlib.util.spec_from_file_location(f"wl_test_{name}", ROOT / "workloads" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def run_events(name: str, *args: str, timeout: float = 240) -> tuple[int, list[dict], str]:
    """Run ``python workloads/NAME.py --events ARGS`` to the end: (exit code, events, stderr)."""
    r = subprocess.run([sys.executable, "-u", str(ROOT / "workloads" / f"{name}.py"), "--events", *args],
                       capture_output=True, text=True, timeout=timeout, env=env(), cwd=ROOT)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return r.returncode, events, r.stderr


def run_gputop(name: str, *args: str, timeout: float = 300) -> tuple[int, dict, str]:
    """``gputop --run NAME --json ARGS``: (exit code, the run document, stderr); the document is validated."""
    r = subprocess.run([sys.executable, "-m", "gputop", "--run", name, "--json", *args], capture_output=True,
                       text=True, timeout=timeout, env=env(), cwd=ROOT)
    doc = json.loads(r.stdout)
    documents.validate(doc)
    return r.returncode, doc, r.stderr


def cpu_document(name: str) -> tuple[int, dict, str]:
    """The workload run once on the CPU at quick sizes through gputop, as a test module's shared run: (exit code,
    the run document, stderr). The document holds what the script's event stream said (params, phases, points,
    results, warnings, status), as the runner gathered it, and the verdicts the runner's ``analyze`` set."""
    pytest.importorskip("torch")
    return run_gputop(name, "--device", "cpu", "--quick")


def reanalyzed(mod, doc: dict) -> dict:
    """A copy of the run document with its verdicts wiped, analysed again by the lesson module ``mod``."""
    doc = copy.deepcopy(doc)
    doc["verdict"] = None
    for ph in doc["phases"]:
        ph["verdict"] = None
    return mod.analyze(doc) or doc


def interrupt_after_first_point(name: str, *args: str, timeout: float = 120) -> tuple[int, list[dict]]:
    """Start the script with --events, send SIGINT after its first point, return (exit code, events)."""
    proc = subprocess.Popen([sys.executable, "-u", str(ROOT / "workloads" / f"{name}.py"), "--events", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env(), cwd=ROOT)
    events = []
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == "point" and not any(e.get("sent") for e in events):
                proc.send_signal(signal.SIGINT)
                events[-1]["sent"] = True
            if time.monotonic() > deadline:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, events


def kinds(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


def points(events: list[dict]) -> list[dict]:
    return [e["data"] for e in kinds(events, "point")]


def results(events: list[dict]) -> dict:
    out: dict = {}
    for e in kinds(events, "result"):
        out.update(e["data"])
    return out


def gpu_telemetry(**means) -> dict:
    """A phase telemetry summary with the given means (and max = mean), the rest n/a."""
    fields = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_pct", "fp32_pct", "util_gpu_pct",
              "sm_clock_mhz", "power_w", "mem_used_bytes", "host_cpu_pct", "workload_cpu_pct")
    out = {"samples": 20, "gpu_samples": 20, "seconds": 2.0, "clock_reasons_seen": means.pop("reasons", [])}
    for f in fields:
        v = means.get(f)
        out[f] = {"mean": v, "max": v}
    return out


# -- gputop.workload.util ---------------------------------------------------------------------------------

def test_stats_mean_and_rms():
    s = stats([1.0, 1.0, 1.0, 1.0])
    assert s["mean"] == 1.0 and s["rms_pct"] == 0.0 and s["n"] == 4
    s = stats([9.0, 11.0])
    assert s["mean"] == 10.0 and s["rms_pct"] == pytest.approx(10.0)
    assert stats([])["mean"] is None and stats([None, float("nan")])["n"] == 0


def test_noise_check_warns_above_five_percent(capsys):
    emit = Emitter(events=True)
    noise_check(emit, "steady", [1.0, 1.01, 0.99])
    assert capsys.readouterr().out == ""
    noise_check(emit, "noisy", [1.0, 1.5, 0.5])
    ev = json.loads(capsys.readouterr().out)
    assert ev["event"] == "warning" and ev["code"] == "noisy_timing" and "noisy" in ev["message"]


# -- gputop.lessons.docs --------------------------------------------------------------------------------

def test_throttle_warnings_once_per_phase():
    doc = {"phases": [{"name": "a", "telemetry": gpu_telemetry(reasons=["software power cap"])},
                      {"name": "b", "telemetry": gpu_telemetry(reasons=["idle"])},
                      {"name": "c", "telemetry": None}], "warnings": []}
    throttle_warnings(doc)
    throttle_warnings(doc)
    assert [w["code"] for w in doc["warnings"]] == ["throttling"] and "'a'" in doc["warnings"][0]["message"]


def test_phase_points_and_tele():
    doc = {"points": [{"phase": "x", "v": 1}, {"phase": "y", "v": 2}, {"v": 3}, "junk"]}
    assert phase_points(doc) == {"x": [{"phase": "x", "v": 1}], "y": [{"phase": "y", "v": 2}]}
    ph = {"telemetry": gpu_telemetry(sm_active_pct=42.0, util_gpu_pct=90.0)}
    assert tele(ph, "sm_active_pct") == 42.0 and tele(ph, "tensor_pct") is None and tele(None, "x") is None
    assert tele_text(ph) == "kernel-active 90%, SM active 42%" and tele_text({"telemetry": None}) == ""
    # what tele_text quotes, as evidence numbers of a verdict
    assert tele_numbers(ph) == {"util_gpu_pct": 90.0, "sm_active_pct": 42.0} and tele_numbers(None) == {}


def test_phase_window_is_what_a_verdict_of_the_phase_judged():
    ph = {"name": "bf16", "t_start": 4.0, "t_end": 9.5, "duration_s": 5.5}
    assert phase_window(ph) == {"t_start": 4.0, "t_end": 9.5, "window_s": 5.5}
    assert phase_window({"name": "still running", "t_start": 4.0, "t_end": None, "duration_s": 1.0})["t_end"] is None


# -- the recorded H200 runs (tests/data/runs/), analysed again ------------------------------------------
RUNS = ROOT / "tests" / "data" / "runs"
# What each run's physics says, as (class, subclass) of the run's verdict.
RECORDED = {
    "amp": ("compute-bound", "amp speedup"),  # bf16 6.1x strict FP32
    "batchsize": ("latency-bound", "up to batch 16, compute-bound from batch 64"),
    "cudagraphs": ("latency-bound", "launch overhead"),  # 10.4 us per kernel for a 2.2 us kernel
    "dataloader": ("input-starved", None),  # data wait 92% of the step with num_workers=0
    "roofline": ("memory-bound", "below 14.5 FLOP/byte, k < 58; compute-bound above"),
}


def recorded(name: str) -> dict:
    """The recorded H200 run document of ``name`` with its verdicts wiped, then analysed by this checkout.
    The recordings are schema 1: what schema 2 added outside the verdicts (``signal``) is filled in."""
    doc = json.loads((RUNS / f"h200_{name}.json").read_text())
    doc.update(schema_version=documents.SCHEMA_VERSIONS["run"], signal=None)
    doc["verdict"] = None
    for ph in doc["phases"]:
        ph["verdict"] = None
    return lesson(name).analyze(doc) or doc


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_h200_run_gets_verdicts_of_the_one_shape(name):
    doc = recorded(name)
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == RECORDED[name]
    check_verdict(doc["verdict"])
    judged = [ph for ph in doc["phases"] if ph["verdict"]]
    assert judged or name == "roofline"  # the roofline's phases are its sweeps: one verdict for the run
    for ph in judged:
        check_verdict(ph["verdict"])
        w = ph["verdict"]["window"]  # a phase's verdict judged the phase
        assert (w["t_start"], w["t_end"]) == (ph["t_start"], ph["t_end"]) and w["seconds"] == ph["duration_s"]
    documents.validate(doc)
    assert display_name(doc["verdict"]).startswith(doc["verdict"]["label"])


@pytest.mark.parametrize("name", ["dataloader", "amp", "batchsize", "cudagraphs"])
def test_workload_module_shape(name):
    mod = load(name)
    assert mod.NAME == name and mod.DESCRIPTION and callable(mod.run) and callable(lesson(name).analyze)
    assert "torch" in mod.NEEDS
    names = [p.name for p in mod.PARAMS]
    assert "device" in names and set(mod.QUICK) <= set(names) and set(mod.CPU) <= set(names)
    # loading the module (as gputop --list does) needs neither torch nor cupy
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; sys.modules['cupy'] = None; "
                        f"import runpy; runpy.run_path({str(ROOT / 'workloads' / (name + '.py'))!r})"],
                       capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["dataloader", "amp", "batchsize"])
def test_missing_torch_is_exit_4_with_one_line(name):
    code = (f"import sys; sys.modules['torch'] = None; import runpy; "
            f"sys.argv = ['{name}.py', '--device', 'cpu']; "
            f"runpy.run_path({str(ROOT / 'workloads' / (name + '.py'))!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 4
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "gputop[torch]" in lines[0]
