"""The CPU roofline stops on SIGINT within the measurement it is in, not after it (issue 35 item 13): a stop
used to wait for the point (or roof) being timed, then the 5 s grace, then SIGKILL.

Real ``gputop --run roofline --device cpu`` processes whose one measurement takes minutes (a long polynomial, or
thousands of copies for the memory roof), a real SIGINT once the run's recording says that measurement began, and
a grace of 60 s: the workload must exit by itself (its own exit code 130, ``child_exit_code``), so a stop that
waited for the measurement to end would be killed at the grace instead."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from fault_util import PY, ROOT, env, wait_until

pytest.importorskip("numpy")

GRACE_S = 60  # far less than one measurement of the runs below takes, far more than a prompt stop needs
LONG_POINT = ["--param", "ceilings=false", "--param", "variants=mul+add", "--param", "n=16777216",
              "--param", "k=4000", "--param", "warmup=0", "--param", "runs=5"]  # one call: 128e9 element-ops
LONG_ROOF = ["--param", "ceilings=true", "--param", "k=1", "--param", "warmup=0", "--param", "runs=10000"]


def events(path) -> list[dict]:
    """The events a --record-run file holds so far (a line being written is left out)."""
    out = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("type") == "event":
            out.append(row["event"])
    return out


def stopped_during(phase: str, params: list[str], tmp_path) -> dict:
    rec = tmp_path / "run.jsonl"
    proc = subprocess.Popen([PY, "-m", "gputop", "--run", "roofline", "--device", "cpu", *params, "--grace",
                             str(GRACE_S), "--record-run", str(rec), "--json"], cwd=ROOT, env=env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        wait_until(lambda: any(e.get("event") == "phase" and e.get("name") == phase for e in events(rec)), 120,
                   f"the {phase} phase", proc)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=GRACE_S + 60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err.decode()
    return json.loads(out)


@pytest.mark.slow
def test_a_sigint_mid_point_stops_the_cpu_sweep_by_itself(tmp_path):
    doc = stopped_during("sweep: seed kernel (mul+add)", LONG_POINT, tmp_path)
    assert doc["status"] == "interrupted" and doc["interrupted"] and doc["signal"] == "SIGINT"
    assert doc["child_exit_code"] == 130  # the workload ended itself; SIGKILL after the grace would say -9
    assert doc["points"] == []  # the point being timed is dropped, not reported half-measured


@pytest.mark.slow
def test_a_sigint_while_the_host_roofs_are_measured_stops_them(tmp_path):
    doc = stopped_during("ceilings", LONG_ROOF, tmp_path)
    assert doc["child_exit_code"] == 130 and doc["status"] == "interrupted"
    assert "measured_roofs" not in (doc["results"] or {})


@pytest.mark.slow
def test_a_host_roof_asked_to_stop_drops_its_measurement():
    np = pytest.importorskip("numpy")
    from gputop.measure import host

    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3  # the fourth check: after a few copies were timed

    with pytest.raises(host.Stopped):
        host.host_memory_roof(np, warmup=1, runs=10_000, stop=stop)
    assert len(calls) == 4
    assert issubclass(host.Stopped, KeyboardInterrupt)  # a workload script's run ends on it as on Ctrl-C
