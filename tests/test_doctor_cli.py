"""``gputop --doctor`` as a fleet runs it (a Slurm prolog, a Kubernetes init container): a real gputop process on
recorded NVML answers (tests/fake_pynvml with GPUTOP_FAKE_NVML_ANSWERS), its exit code from README's table, one
document on stdout with --json that follows its schema, text that fits 80 columns, each GPU's result kept where
--export reads it; and every refusal one line and its code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fault_util
from fake_health import RECORDED
from gputop.documents import validate
from gputop.telemetry import doctor_state
from gputop.workload.script import is_installed

ROOT = Path(__file__).resolve().parents[1]
NO_PYNVML = ROOT / "tests" / "no_pynvml"


def gputop(*args: str, answers: str | None = RECORDED, state=None, no_nvml=False,
           timeout: float = 60.0) -> subprocess.CompletedProcess:
    env = fault_util.env(fake_nvml=answers is not None)
    if answers:
        env["GPUTOP_FAKE_NVML_ANSWERS"] = answers
    if no_nvml:
        env["PYTHONPATH"] = f"{NO_PYNVML}:{env['PYTHONPATH']}"
    if state is not None:
        env["GPUTOP_DOCTOR_DIR"] = str(state)
    return subprocess.run([sys.executable, "-m", "gputop", "--doctor", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("answers, code, status", [
    (RECORDED, 0, "ok"),  # 2 H100s recorded at rest (2026-11-27): the passive doctor exited 0 there too
    ("constructed_power_limit_low.json", 7, "degraded"),
    ("constructed_remap_failure.json", 8, "failed"),
])
def test_the_exit_code_is_the_nodes_status(tmp_path, answers, code, status):
    p = gputop("--passive", "--json", answers=answers, state=tmp_path)
    assert p.returncode == code, p.stderr
    doc = json.loads(p.stdout)
    validate(doc, "doctor")
    assert doc["status"] == status and doc["exit_code"] == code and doc["mode"] == "passive"
    assert len(doc["gpus"]) == 2 and all(g["active"] is None for g in doc["gpus"])


def test_each_gpus_result_is_kept_where_export_reads_it(tmp_path):
    p = gputop("--passive", "--json", answers="constructed_remap_failure.json", state=tmp_path)
    doc = json.loads(p.stdout)
    assert sorted(doc["state_files"]) == sorted(str(tmp_path / f"{g['uuid']}.json") for g in doc["gpus"])
    env = {"GPUTOP_DOCTOR_DIR": str(tmp_path)}
    bad = doctor_state.read_last(doc["gpus"][1]["uuid"], env)
    assert bad["status"] == "failed" and bad["mode"] == "passive" and bad["findings"][0]["check"] == "row_remap"
    assert doctor_state.read_last(doc["gpus"][0]["uuid"], env)["status"] == "ok"
    assert (tmp_path / f"{doc['gpus'][0]['uuid']}.json").stat().st_mode & 0o777 == 0o644


def test_the_text_report_fits_80_columns_and_names_the_gpu(tmp_path):
    p = gputop("--passive", answers="constructed_ecc_volatile_dbe.json", state=tmp_path)
    assert p.returncode == 8
    lines = p.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert lines[0].startswith("gputop --doctor (passive) on ") and "FAILED in" in p.stdout
    assert "GPU 1 NVIDIA H100 80GB HBM3 (00000000:2A:00.0): failed" in p.stdout
    assert "uncorrectable (double-bit) memory errors" in p.stdout


def test_output_file_and_stdout_hold_the_same_document(tmp_path):
    out = tmp_path / "doctor.json"
    p = gputop("--passive", "-o", str(out), state=tmp_path / "state")
    assert p.returncode == 0 and "HEALTHY" in p.stdout
    validate(json.loads(out.read_text()), "doctor")


@pytest.mark.skipif(is_installed("torch") and is_installed("cupy"), reason="torch and CuPy are installed here")
def test_the_active_checks_without_their_packages_exit_4_and_say_passive_works(tmp_path):
    p = gputop("--quick", "--json", state=tmp_path)
    assert p.returncode == 4 and p.stderr.count("\n") == 1 and "--passive" in p.stderr
    doc = json.loads(p.stdout)
    validate(doc, "doctor")
    assert doc["status"] is None and doc["errors"][0]["kind"] == "missing_dependency"
    assert not list(tmp_path.iterdir())  # nothing ran, nothing kept


@pytest.mark.parametrize("args, code, words", [
    (("--passive", "--gpu", "5"), 2, "--gpu 5: no such GPU (this machine has 2: 0-1)"),
    (("--demo",), 2, "--replay and --demo do not go with it"),
    (("--source", "dcgm-exporter=http://127.0.0.1:9400/metrics"), 2, "--doctor takes --source prometheus=URL"),
    (("--quick", "--passive"), 2, "two kinds of --doctor"),
    (("--passive", "-o", "/nonexistent/x.json"), 2, "no such folder"),
    (("--csv", "x.csv"), 2, "--csv goes with --run NAME"),
])
def test_a_refusal_is_one_line_and_its_code(tmp_path, args, code, words):
    p = gputop(*args, "--json", state=tmp_path)
    assert p.returncode == code and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    validate(doc, "doctor")
    assert doc["exit_code"] == code and doc["status"] is None


def test_no_nvidia_driver_is_exit_3(tmp_path):
    p = gputop("--passive", "--json", answers=None, no_nvml=True, state=tmp_path)
    assert p.returncode == 3 and "no NVIDIA driver library" in p.stderr
    validate(json.loads(p.stdout), "doctor")


def test_the_readme_and_the_exit_code_table_agree():
    from gputop import exitcodes

    readme = (ROOT / "README.md").read_text()
    assert exitcodes.TABLE[exitcodes.DEGRADED] and exitcodes.TABLE[exitcodes.UNHEALTHY]
    for code in (exitcodes.DEGRADED, exitcodes.UNHEALTHY):
        assert f"| {code} | `gputop --doctor`:" in readme
    assert "## Is this node healthy: `--doctor`" in readme


@pytest.mark.slow
def test_the_whole_quick_doctor_writes_its_report_and_keeps_each_gpu(tmp_path, monkeypatch, capsys):
    """``main_doctor`` down the layers in this process: recorded NVML answers, the loads' stand-ins (real
    processes), the report on stdout within 80 columns, each GPU kept for --export, the exit code."""
    from fake_health import RecordedNvml
    from gputop.headless import doctor as headless
    from gputop.session.doctor import DoctorOptions
    from gputop.telemetry.nvml import Nvml

    monkeypatch.setattr(headless, "missing_for", lambda mode: [])  # this machine has no CuPy; the loads are fakes
    monkeypatch.setenv("GPUTOP_DOCTOR_DIR", str(tmp_path))
    here = Path(__file__).resolve().parent / "fault_doctor"
    opts = DoctorOptions(load_cmd=[sys.executable, str(here / "load.py")],
                         p2p_cmd=[sys.executable, str(here / "p2p.py")], sustained_s=0.3, kernel_log=[],
                         extra_env={"DOCTOR_FAKE_PHASE_S": "0.3"})
    nvml = Nvml(RecordedNvml("constructed_thermal_load.json"))
    code = headless.main_doctor(headless.DoctorCall(mode="quick"), nvml=nvml, options=opts)
    out, err = capsys.readouterr()
    assert code == 7 and err.startswith("gputop: doctor: quick checks, 2 GPUs at once")
    assert all(len(line) <= 80 for line in out.splitlines()) and "DEGRADED in" in out
    assert "SM clock under load 1297 MHz: 26% below the node's other GPUs" in out.replace("\n            ", " ")
    kept = doctor_state.read_all({"GPUTOP_DOCTOR_DIR": str(tmp_path)})
    assert sorted(s["status"] for s in kept.values()) == ["degraded", "ok"]
    assert all(s["mode"] == "quick" and s["figures"]["dram_bytes_per_s"] == 3.15e12 for s in kept.values())


def test_gpu_takes_several_indices_at_once_or_repeated():
    """`--doctor --gpu 2 3` as the issue writes it, and `--gpu 2 --gpu 3` as before; `--run` still ends at `--`."""
    from gputop.cli import parse

    assert parse(["--doctor", "--quick", "--gpu", "2", "3"])[0].gpu == [2, 3]
    assert parse(["--doctor", "--gpu", "2", "--gpu", "3", "--json"])[0].gpu == [2, 3]
    args, rest = parse(["--gpu", "1", "--json", "--run", "--", "python3", "-c", "1"])
    assert args.gpu == [1] and rest == ["python3", "-c", "1"]
