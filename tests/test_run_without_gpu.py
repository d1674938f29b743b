"""``gputop --run -- CMD`` on a machine where NVML sees no GPU (issue 35 item 14): the command runs all the same,
under the one supervisor, and the report says what can be known without a GPU (its exit code, its wall time, its
CPU use and the host's) and that no GPU was seen, with no verdict; what needs a GPU (--record, --export beside it)
is one line and exit 3. Real ``python -m gputop`` processes with the pynvml of a machine without a driver
(tests/no_pynvml) first on the path, real commands, a real SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fault_util import ROOT, env, wait_until
from gputop import documents

NO_PYNVML = Path(__file__).resolve().parent / "no_pynvml"
PY = sys.executable
RUN_S = 120
BURN = ("import json, sys, time\n"
        "t0, c0 = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - t0 < 2.0: pass\n"
        "print(json.dumps({'cpu_pct': 100 * (time.process_time() - c0) / (time.monotonic() - t0)}), file=sys.stderr)\n"
        "sys.exit(int(sys.argv[1]))\n")


def no_gpu_env() -> dict:
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(NO_PYNVML), e["PYTHONPATH"]])
    return e


def gputop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gputop", *args], cwd=ROOT, env=no_gpu_env(), capture_output=True, text=True,
                          timeout=RUN_S, stdin=subprocess.DEVNULL)


def test_the_command_runs_and_its_exit_code_is_gputops():
    r = gputop("--run", "--", PY, "-c", "import sys; print('out'); sys.exit(7)")
    assert r.returncode == 7, r.stderr
    assert r.stdout.startswith("out\n")  # the command's own output passes through, then the report
    assert "no GPU seen" in r.stderr and "libnvidia-ml" in r.stderr and "Traceback" not in r.stderr
    assert "verdict: none (no GPU seen)" in r.stdout and "exit code 7" in r.stdout


@pytest.mark.slow
def test_the_json_document_says_no_gpu_and_the_commands_cpu_use():
    r = gputop("--json", "--run", "--", PY, "-c", BURN, "0")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    documents.validate(doc, "monitor")
    assert doc["status"] == "ok" and doc["command_exit_code"] == 0 and doc["wall_s"] >= 2.0
    assert doc["verdict"] is None and doc["gpus"] == [] and doc["gpu_detection"] == "none"
    assert doc["notes"] and doc["notes"][0].startswith("no GPU seen (")
    own = json.loads(next(line for line in r.stderr.splitlines() if line.startswith("{")))["cpu_pct"]
    seen = doc["host"]["summary"]["workload_cpu_pct"]
    assert seen["max"] is not None and seen["max"] >= 0.5 * own, (seen, own)  # it burned a core, as it says itself
    assert doc["host"]["summary"]["host_cpu_pct"]["mean"] is not None and doc["host"]["cpu_count"] == os.cpu_count()


def test_a_command_killed_by_a_signal_reads_as_a_shell_says_it():
    r = gputop("--run", "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 143, r.stderr


def test_a_sigint_stops_the_command_and_the_document_is_still_written(tmp_path):
    out = tmp_path / "doc.json"
    proc = subprocess.Popen([PY, "-m", "gputop", "--json", "-o", str(out), "--run", "--", PY, "-c",
                             "import time; print('up', flush=True); time.sleep(600)"], cwd=ROOT, env=no_gpu_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        import psutil

        wait_until(lambda: any("time.sleep(600)" in " ".join(c.cmdline()) for c in
                               psutil.Process(proc.pid).children(recursive=True)), 60, "the command", proc)
        os.kill(proc.pid, signal.SIGINT)
        stdout, _ = proc.communicate(timeout=RUN_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    doc = json.loads(out.read_text())
    assert doc["interrupted"] and doc["signal"] == "SIGINT" and doc["verdict"] is None
    assert json.loads(stdout) == doc


@pytest.mark.parametrize("argv, needle", [
    (["--record", "x.jsonl", "--run", "--", "true"], "--record FILE records GPU telemetry"),
    (["--export", "127.0.0.1:19401", "--run", "--", "true"], "--export serves GPUs"),
])
def test_what_needs_a_gpu_is_one_line_and_exit_3(tmp_path, argv, needle):
    r = gputop(*argv)
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and needle in r.stderr and "libnvidia-ml" in r.stderr
    assert not (ROOT / "x.jsonl").exists()


def test_a_command_that_is_not_there_is_still_exit_2():
    r = gputop("--run", "--", "no-such-command-here")
    assert r.returncode == 2 and r.stderr == "gputop: command not found: no-such-command-here\n"


def test_the_tui_of_a_command_still_needs_a_gpu_on_a_real_terminal():
    """``--tui --run -- CMD`` shows GPU charts: without a GPU it says so in one line before the TUI starts."""
    from fault_util import Terminal, plain

    term = Terminal(["--tui", "--run", "--", "true"], no_gpu_env())
    try:
        code = term.wait(RUN_S)
        text = plain(term.output())
    finally:
        term.close()
    assert code == 3 and "Traceback" not in text, text[-2000:]
    assert [line for line in text.splitlines() if line.strip()] == [
        "gputop: no NVIDIA driver library (libnvidia-ml.so.1 not found): is this a GPU machine?"], text[-2000:]
