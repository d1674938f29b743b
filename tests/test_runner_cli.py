"""``gputop --run NAME`` as a user meets it: a real gputop process, real workload children on the CPU,
exit codes, one JSON document on stdout, Ctrl-C, and the roofline workload end to end."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop import exitcodes
from gputop.documents import validate
from gputop.telemetry.nvml import Nvml

ROOT = Path(__file__).resolve().parents[1]
FAULTS = ROOT / "tests" / "fault_workloads"
NO_GPU = not Nvml().available()


def env(extra_dirs=()):
    path = os.pathsep.join([str(FAULTS), *map(str, extra_dirs)])
    e = dict(os.environ, PYTHONPATH=str(ROOT), GPUTOP_WORKLOADS_PATH=path)
    e.pop("NO_COLOR", None)
    return e


def gputop(*args, extra_dirs=(), timeout=120):
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env(extra_dirs), timeout=timeout)


def one_document(stdout: str) -> dict:
    doc = json.loads(stdout)  # the whole of stdout is exactly one JSON document
    validate(doc)
    return doc


def test_json_run_is_one_valid_document():
    r = gputop("--run", "fault_ok", "--device", "cpu", "--json", "--param", "k=2,8")
    assert r.returncode == 0, r.stderr
    doc = one_document(r.stdout)
    assert doc["status"] == "ok" and doc["exit_code"] == 0
    assert [p["k"] for p in doc["points"]] == [2, 8]
    assert doc["params"] == {"device": "cpu", "k": [2, 8], "sleep": 0.02, "analyze_fail": False}  # CPU override
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == ("compute-bound", "test")
    assert "[" not in r.stderr  # no progress bar when stderr is not a terminal


@pytest.mark.slow
def test_quick_and_cpu_overrides_then_params():
    doc = one_document(gputop("--run", "fault_ok", "--device", "cpu", "--quick", "--json").stdout)
    assert doc["params"]["k"] == [1, 2] and doc["params"]["sleep"] == 0.02
    doc = one_document(gputop("--run", "fault_ok", "--device", "cpu", "--quick", "--json",
                              "--param", "sleep=0", "--param", "k=3").stdout)
    assert doc["params"]["k"] == [3] and doc["params"]["sleep"] == 0.0


def test_text_summary_has_points_verdict_and_warnings():
    r = gputop("--run", "fault_ok", "--device", "cpu", "--param", "k=1,64")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("fault_ok: ok in ")
    assert "points (2):" in out and "gflops" in out and " 96" in out  # 64 * 1.5
    assert "verdict: compute-bound (test) (confidence 0.90)" in out and "nothing to do" in out
    assert "warning (test): a test warning" in out and "telemetry:" in out


@pytest.mark.parametrize("param,needle", [  # the quick loop: a bad value and an unknown name
    pytest.param("k=1,200", "'k'", marks=pytest.mark.slow), ("k=x", "'k'"),
    pytest.param("sleep=-1", "'sleep'", marks=pytest.mark.slow), ("bogus=1", "'bogus'"),
    pytest.param("k", "NAME=VALUE", marks=pytest.mark.slow),
])
def test_bad_param_exits_2_naming_it(param, needle):
    r = gputop("--run", "fault_ok", "--device", "cpu", "--param", param)
    assert r.returncode == exitcodes.USAGE and r.stdout == ""
    assert r.stderr.count("\n") == 1 and needle in r.stderr
    if param == "k=1,200":
        assert "[1, 64]" in r.stderr  # the allowed range


def test_bad_param_with_json_still_gives_one_document():
    r = gputop("--run", "fault_ok", "--device", "cpu", "--json", "--param", "k=0")
    assert r.returncode == exitcodes.USAGE
    doc = one_document(r.stdout)
    assert doc["status"] == "error" and doc["exit_code"] == 2 and doc["errors"][0]["kind"] == "bad_param"


def test_unknown_workload_exits_2_listing_the_known():
    r = gputop("--run", "nope", "--device", "cpu")
    assert r.returncode == exitcodes.USAGE and r.stdout == ""
    assert "unknown workload 'nope'" in r.stderr and "roofline" in r.stderr and "fault_ok" in r.stderr


@pytest.mark.slow
def test_device_param_and_cpu_mode_are_checked(tmp_path):
    r = gputop("--run", "fault_ok", "--device", "cpu", "--param", "device=cuda")
    assert r.returncode == exitcodes.USAGE and "--device" in r.stderr
    (tmp_path / "gpuonly.py").write_text(
        "from gputop.workload import Param\nNAME = 'gpuonly'\nDESCRIPTION = 'no CPU mode'\n"
        "PARAMS = [Param('n', 'int', 1)]\ndef run(p, emit):\n    pass\n")
    r = gputop("--run", "gpuonly", "--device", "cpu", extra_dirs=[tmp_path])
    assert r.returncode == exitcodes.USAGE and "no CPU mode" in r.stderr


@pytest.mark.skipif(not NO_GPU, reason="needs a machine without NVML")
def test_cuda_run_without_nvml_exits_3_suggesting_cpu():
    r = gputop("--run", "fault_ok", "--json")
    assert r.returncode == exitcodes.NO_GPU
    assert "--device cpu" in r.stderr and r.stderr.count("\n") == 1
    assert one_document(r.stdout)["errors"][0]["kind"] == "no_gpu"


def test_killed_child_exits_5_with_partial_document():
    r = gputop("--run", "fault_crash", "--device", "cpu", "--json")
    assert r.returncode == exitcodes.CRASHED
    doc = one_document(r.stdout)
    assert doc["status"] == "crashed" and doc["points"] == [{"k": 1, "gflops": 2.0}]
    assert "crashed" in r.stderr and "1 point(s) kept" in r.stderr


@pytest.mark.parametrize("name,code,status", [
    ("fault_raise", exitcodes.FAILED, "error"),
    pytest.param("fault_missing", exitcodes.MISSING_DEPENDENCY, "missing_dependency", marks=pytest.mark.slow),
])
def test_failing_children_give_their_exit_codes(name, code, status):
    r = gputop("--run", name, "--device", "cpu", "--json")
    assert r.returncode == code
    assert one_document(r.stdout)["status"] == status


@pytest.mark.slow
def test_timeout_exits_6():
    r = gputop("--run", "fault_hang", "--device", "cpu", "--json", "--timeout", "0.5")
    assert r.returncode == exitcodes.TIMEOUT
    doc = one_document(r.stdout)
    assert doc["status"] == "timeout" and len(doc["points"]) == 1


def _start_hang(tmp_path, *extra):
    ready = tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-m", "gputop", "--run", "fault_hang", "--device", "cpu", "--json",
                          "--param", f"ready_file={ready}", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
    end = time.monotonic() + 60
    while not ready.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end, "the workload never got going"
        time.sleep(0.02)
    return p


def test_ctrl_c_gives_a_partial_document_and_exit_130(tmp_path):
    p = _start_hang(tmp_path)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == exitcodes.INTERRUPTED, err
    doc = one_document(out)
    assert doc["interrupted"] is True and doc["status"] == "interrupted" and doc["exit_code"] == 130
    assert doc["points"] == [{"k": 1, "gflops": 2.0}] and doc["child_exit_code"] == 130
    assert "stopping the workload" in err


def _stderr_until(p: subprocess.Popen, text: str, timeout: float = 60.0) -> str:
    """Read ``p``'s stderr until it holds ``text``; returns what was read (``communicate`` reads the rest)."""
    import select

    got, end = b"", time.monotonic() + timeout
    while text.encode() not in got:
        assert time.monotonic() < end, f"timed out after {timeout:g} s waiting for {text!r} on stderr: {got[-2000:]!r}"
        if select.select([p.stderr], [], [], 0.1)[0]:
            chunk = os.read(p.stderr.fileno(), 65536)
            assert chunk, f"stderr closed (code {p.wait()}) before {text!r}: {got[-2000:]!r}"
            got += chunk
    return got.decode()


@pytest.mark.slow
def test_second_ctrl_c_kills_a_workload_that_ignores_the_first(tmp_path):
    p = _start_hang(tmp_path, "--param", "obey=false")
    p.send_signal(signal.SIGINT)
    said = _stderr_until(p, "stopping the workload")  # the first one was taken: the second is a second stop
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    err = said + err
    assert p.returncode == exitcodes.INTERRUPTED, err
    doc = one_document(out)
    assert doc["interrupted"] is True and doc["child_exit_code"] == -9 and len(doc["points"]) == 1
    assert any(w["code"] == "killed" for w in doc["warnings"])


def test_csv_and_output_files(tmp_path):
    out, csv_path = tmp_path / "run.json", tmp_path / "points.csv"
    r = gputop("--run", "fault_ok", "--device", "cpu", "--param", "k=1,2", "--csv", str(csv_path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    rows = list(csv.DictReader(csv_path.open()))
    assert [r["k"] for r in rows] == ["1", "2"] and list(rows[0])[:3] == ["k", "ai", "gflops"]
    assert r.stdout.startswith("fault_ok: ok")  # --output does not turn the text summary off
    r = gputop("--run", "fault_ok", "--device", "cpu", "--csv", str(tmp_path / "no" / "such" / "x.csv"))
    assert r.returncode == exitcodes.USAGE and "no such folder" in r.stderr


ROOFLINE = ROOT / "workloads" / "roofline.py"


@pytest.mark.slow
@pytest.mark.skipif(not ROOFLINE.exists(), reason="workloads/roofline.py is not there yet")
def test_roofline_on_cpu_end_to_end(tmp_path):
    csv_path = tmp_path / "roofline.csv"
    r = gputop("--run", "roofline", "--device", "cpu", "--json", "--quick", "--csv", str(csv_path), timeout=300)
    assert r.returncode == 0, r.stderr
    doc = one_document(r.stdout)
    assert doc["workload"] == "roofline" and doc["status"] == "ok" and doc["device"]["kind"] == "cpu"
    assert len(doc["points"]) >= 2 and doc["verdict"] and doc["verdict"]["class"]
    assert "ridge" in doc["results"] and doc["phases"]
    assert doc["telemetry"]["samples"] >= 1 and doc["telemetry"]["gpu_samples"] == 0
    header = csv_path.read_text().splitlines()[0].split(",")
    assert header[:5] == ["k", "ai", "gflops", "bandwidth", "percent_peak"]


@pytest.mark.slow
def test_progress_bar_only_on_a_terminal():
    from pty_util import Pty

    term = Pty()  # stderr on a terminal, stdout a pipe
    try:
        p = term.spawn([sys.executable, "-m", "gputop", "--run", "fault_ok", "--device", "cpu", "--json", "--param",
                        "k=1,2"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=ROOT, env=env())
        out, _ = p.communicate(timeout=60)
        assert term.wait(5) == 0
        text = term.read()
    finally:
        term.close()
    one_document(out.decode())  # stdout still holds only the document
    assert "\r[" in text and "2/2" in text and "phase measure" in text
