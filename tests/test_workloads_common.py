"""Helpers shared by the teaching workloads' tests (dataloader, amp, batchsize, cudagraphs), and the tests
of gputop.workload_util. The workload tests run each script for real on the CPU at tiny sizes."""

from __future__ import annotations

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
from gputop.workload_api import Emitter
from gputop.workload_util import noise_check, phase_points, stats, tele, tele_text, throttle_warnings, verdict

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


def doc_from_events(events: list[dict], telemetry: dict | None = None) -> dict:
    """A run document as the runner builds it (telemetry None, as on the CPU), for ``analyze``."""
    started = kinds(events, "started")[0]
    return {"params": started["params"], "device": {"kind": started["device"]["kind"], "static": None,
                                                    "peaks": None, "reported": started["device"]},
            "phases": [{"name": e["name"], "telemetry": (telemetry or {}).get(e["name"]), "verdict": None}
                       for e in kinds(events, "phase")],
            "points": points(events), "results": results(events), "verdict": None,
            "warnings": [{"code": e["code"], "message": e["message"]} for e in kinds(events, "warning")]}


def gpu_telemetry(**means) -> dict:
    """A phase telemetry summary with the given means (and max = mean), the rest n/a."""
    fields = ("sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_pct", "fp32_pct", "util_gpu_pct",
              "sm_clock_mhz", "power_w", "mem_used_bytes", "host_cpu_pct", "workload_cpu_pct")
    out = {"samples": 20, "gpu_samples": 20, "seconds": 2.0, "clock_reasons_seen": means.pop("reasons", [])}
    for f in fields:
        v = means.get(f)
        out[f] = {"mean": v, "max": v}
    return out


def check_verdict(v: dict) -> None:
    assert isinstance(v, dict) and v["class"] and v["evidence"] and v["advice"]


# -- gputop.workload_util -------------------------------------------------------------------------------

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


def test_throttle_warnings_once_per_phase():
    doc = {"phases": [{"name": "a", "telemetry": gpu_telemetry(reasons=["software power cap"])},
                      {"name": "b", "telemetry": gpu_telemetry(reasons=["idle"])},
                      {"name": "c", "telemetry": None}], "warnings": []}
    throttle_warnings(doc)
    throttle_warnings(doc)
    assert [w["code"] for w in doc["warnings"]] == ["throttling"] and "'a'" in doc["warnings"][0]["message"]


def test_phase_points_tele_and_verdict():
    doc = {"points": [{"phase": "x", "v": 1}, {"phase": "y", "v": 2}, {"v": 3}, "junk"]}
    assert phase_points(doc) == {"x": [{"phase": "x", "v": 1}], "y": [{"phase": "y", "v": 2}]}
    ph = {"telemetry": gpu_telemetry(sm_active_pct=42.0, util_gpu_pct=90.0)}
    assert tele(ph, "sm_active_pct") == 42.0 and tele(ph, "tensor_pct") is None and tele(None, "x") is None
    assert tele_text(ph) == "kernel-active 90%, SM active 42%" and tele_text({"telemetry": None}) == ""
    assert verdict("c", "e", "a") == {"class": "c", "evidence": "e", "advice": "a"}


@pytest.mark.parametrize("name", ["dataloader", "amp", "batchsize", "cudagraphs"])
def test_workload_module_shape(name):
    mod = load(name)
    assert mod.NAME == name and mod.DESCRIPTION and callable(mod.run) and callable(mod.analyze)
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
