"""``--rate HZ`` reaches the sampler in every mode: each headless mode that records a trace or reports its rate
samples at the rate asked for (the trace header's ``rate_hz``, the spacing of its ticks, the monitor document's
``sampling.rate_hz``), and the TUI and ``--serve``'s browser sessions get it too.

The modes that need NVML run on tests/fake_pynvml (a recorded H200); ``--run NAME`` runs the fault workloads.
"""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from fault_util import PY, ROOT, env
from gputop.cli import parse
from gputop.telemetry.sampler import DEFAULT_RATE_HZ
from gputop.telemetry.trace import read_trace

RATE = 4.0  # not the default: a mode that dropped --rate samples at 10 Hz (0.1 s apart)
RUN_S = 60  # the longest a mode may take on a loaded machine


def gputop(*args: str, fake_nvml: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gputop", *args], cwd=ROOT, env=env(fake_nvml=fake_nvml),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_S)


def assert_sampled_at_rate(path) -> None:
    """The trace at ``path`` says RATE and its ticks are RATE's interval apart (a loaded machine may read late,
    never early: the median gap is at least most of 1/RATE, and there are no more ticks than RATE allows)."""
    header, rows = read_trace(str(path))
    assert header["rate_hz"] == RATE
    times = [r["t"] for r in rows if r["type"] == "tick"]
    assert len(times) >= 3, f"{len(times)} ticks"
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert statistics.median(gaps) >= 0.8 / RATE, gaps
    assert len(times) <= (times[-1] - times[0]) * RATE + 2


def test_the_spec_carries_the_rate_and_its_default():
    assert parse([])[0].spec.rate_hz == DEFAULT_RATE_HZ
    for argv in (["--rate", "4"], ["--demo", "--rate", "4"], ["--rate", "4", "--run", "roofline"],
                 ["--rate", "4", "--record", "x.jsonl"], ["--rate", "4", "--export"]):
        assert parse(argv)[0].spec.rate_hz == RATE, argv


def test_record_samples_at_the_rate(tmp_path):
    out = tmp_path / "rec.jsonl"
    r = gputop("--record", str(out), "--seconds", "1.5", "--rate", "4", fake_nvml=True)
    assert r.returncode == 0, r.stderr
    assert "at 4 Hz" in r.stderr
    assert_sampled_at_rate(out)


@pytest.mark.slow
def test_run_name_record_samples_at_the_rate(tmp_path):
    """``--run NAME --record FILE`` (a GPU run: the fake NVML's GPU 0), ended by --timeout (exit 6)."""
    out = tmp_path / "run.jsonl"
    r = gputop("--run", "fault_hang", "--timeout", "2", "--rate", "4", "--record", str(out), fake_nvml=True)
    assert r.returncode == 6, r.stderr
    assert_sampled_at_rate(out)


@pytest.mark.slow
def test_run_name_record_run_samples_at_the_rate(tmp_path):
    """``--run NAME --record-run FILE`` on the CPU (the host's ticks)."""
    out = tmp_path / "run.jsonl.gz"
    r = gputop("--run", "fault_hang", "--device", "cpu", "--timeout", "2", "--rate", "4", "--record-run", str(out))
    assert r.returncode == 6, r.stderr
    assert_sampled_at_rate(out)


@pytest.mark.slow
def test_run_command_samples_at_the_rate(tmp_path):
    out = tmp_path / "cmd.jsonl"
    r = gputop("--json", "--rate", "4", "--record", str(out), "--run", "--", PY, "-c", "import time; time.sleep(2)",
               fake_nvml=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sampling"]["rate_hz"] == RATE
    assert_sampled_at_rate(out)


@pytest.mark.slow
def test_watch_samples_at_the_rate(tmp_path):
    out = tmp_path / "watch.jsonl"
    sleeper = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
    try:
        r = gputop("--watch", str(sleeper.pid), "--seconds", "1.5", "--json", "--rate", "4", "--record", str(out),
                   fake_nvml=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sampling"]["rate_hz"] == RATE
    assert_sampled_at_rate(out)


@pytest.mark.parametrize("argv, passed", [(["--serve", "--demo", "--rate", "4"], True),
                                          (["--serve", "--demo"], False)])
def test_serve_passes_the_rate_to_its_browser_sessions(argv, passed):
    from gputop.tui.serve import child_command

    cmd = child_command(parse(argv)[0])
    assert (("--rate" in cmd) and cmd[cmd.index("--rate") + 1] == "4.0") if passed else "--rate" not in cmd


def test_export_samples_at_the_rate(monkeypatch):
    """``--export``'s sampler runs at --rate (the server's sampler, caught as it is made)."""
    from gputop.export import server

    made = []

    class Caught(server.Sampler):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)
            raise SystemExit("caught")  # no server: the rate is all this test wants

    monkeypatch.setattr(server, "Sampler", Caught)
    with pytest.raises(SystemExit):
        server.main_export(parse(["--export", "127.0.0.1:1", "--demo", "--rate", "4"])[0])
    assert made and made[0].rate_hz == RATE
    made[0].source.close()
