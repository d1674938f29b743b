"""On a real GPU: ``gputop --run`` puts the child on the chosen NVML GPU, samples that GPU per phase,
and survives the child's crash and Ctrl-C. Skipped without NVML or CuPy."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop.documents import validate
from gputop.telemetry.nvml import Nvml

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "fault_workloads"
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not Nvml().available(), reason="no NVML / GPU here"),
              pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="no cupy")]


def env():
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                GPUTOP_WORKLOADS_PATH=str(FAULTS))


def gputop(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env(), timeout=timeout)


def test_roofline_on_the_gpu(tmp_path):
    csv_path = tmp_path / "roofline.csv"
    r = gputop("--run", "roofline", "--json", "--quick", "--csv", str(csv_path))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    validate(doc)
    dev = doc["device"]
    assert doc["status"] == "ok" and dev["kind"] == "cuda" and dev["nvml_index"] == 0
    assert dev["static"]["name"] and dev["peaks"]["dram_bytes_per_s"] > 0
    # the child's cuda:0 is the NVML GPU gputop samples
    assert dev["reported"]["nvml_index"] == dev["nvml_index"]
    assert dev["reported"]["pci_bus_id"].lower().endswith(dev["static"]["pci_bus_id"].lower()[-7:])
    tel = doc["telemetry"]
    assert tel["gpu_samples"] >= 5 and tel["sm_clock_mhz"]["max"] > 0 and tel["power_w"]["max"] > 0
    assert tel["mem_used_bytes"]["max"] > 0 and isinstance(tel["clock_reasons_seen"], list)
    sweeps = [ph for ph in doc["phases"] if ph["name"].startswith("sweep")]
    # on an H100/H200 a whole sweep takes well under the 0.1 s sampling interval: phases that short
    # carry no sample (n/a), longer ones (the ceilings) always do
    assert sweeps and all(ph["telemetry"]["gpu_samples"] >= 1 for ph in doc["phases"] if ph["duration_s"] >= 0.3)
    # the GPU was busy while the kernels ran: judged on the phases of a second or more, long enough for NVML's
    # utilisation (averaged over its own period, up to 1 s) to see them. Shorter phases read what came before too:
    # on 4 H100s (--quick) a sweep's one sample read 2%, the 0.35 s ceilings phase 58% (GPM's SMs there: 41-98%)
    long = [ph for ph in doc["phases"] if ph["duration_s"] >= 1.0]
    assert long and all(ph["telemetry"]["util_gpu_pct"]["max"] > 50 for ph in long)
    if dev["static"].get("gpm_supported"):
        assert all(ph["telemetry"]["sm_active_pct"]["max"] > 50 for ph in long)
    assert doc["verdict"]["class"] and doc["points"]
    with csv_path.open() as f:
        assert next(csv.reader(f))[:5] == ["k", "ai", "gflops", "bandwidth", "percent_peak"]


def test_a_crash_on_the_cuda_path_leaves_gputop_standing():
    r = gputop("--run", "fault_crash", "--json", timeout=120)
    assert r.returncode == 5
    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["status"] == "crashed" and doc["points"] and doc["device"]["static"]["name"]


def test_ctrl_c_during_a_gpu_sweep(tmp_path):
    from gputop.runner.recording import read_recording
    from gputop.telemetry.trace import TraceError

    recording = tmp_path / "sweep.jsonl"  # written as the run goes: its first point says the sweep is under way

    def measured() -> bool:
        try:
            return any(e["event"].get("event") == "point" for e in read_recording(recording)["events"])
        except (TraceError, OSError):  # not written yet, or its header alone
            return False

    p = subprocess.Popen([sys.executable, "-m", "gputop", "--run", "roofline", "--json", "--param", "ceilings=false",
                          "--param", "k=" + ",".join(["1000"] * 20), "--param", "runs=1000",
                          "--record-run", str(recording)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
    end = time.monotonic() + 120
    while not measured():
        assert p.poll() is None, p.communicate()[1][-3000:]
        assert time.monotonic() < end, "no point measured in 120 s"
        time.sleep(0.1)
    assert p.poll() is None, "the sweep ended before Ctrl-C"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-3000:]
    doc = json.loads(out)
    validate(doc)
    assert doc["interrupted"] is True and doc["status"] == "interrupted"
