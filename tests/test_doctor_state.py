"""Each GPU's last ``gputop --doctor`` after the run: kept in a state file per UUID (written whole, the newest of two
folders read), published by ``--export`` (gputop_doctor_* series, from a real collector over a recorded trace),
shown by the TUI's device panel, and read back from a fleet's Prometheus (a real HTTP server) as the medians the
next doctor compares with."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gputop.telemetry import doctor_state
from gputop.telemetry.doctor_state import LastDoctor, read_all, read_last, summary, write_states

DEMO = Path(__file__).resolve().parents[1] / "gputop" / "data" / "demo.jsonl.gz"
H200_UUID = "GPU-cc41ac5f-c4b8-f7cb-d1d6-35a1e9203ca8"  # the demo trace's GPU


def state(uuid: str, status: str = "degraded", t: float | None = None, mode: str = "quick", **extra) -> dict:
    return {"time": "2026-11-27T10:00:00+00:00", "unix_time": time.time() if t is None else t, "hostname": "n1",
            "gputop_version": "0.1.0", "mode": mode, "index": 0, "uuid": uuid, "name": "NVIDIA H200",
            "status": status, "figures": {"dram_bytes_per_s": 4.5e12, "bf16_sustained_flops": 6.9e14},
            "findings": [{"check": "clocks_loaded", "status": status, "message": "under load SM 1297 MHz: thermal"}]
            if status != "ok" else [], "counts": {"ok": 30, "degraded": int(status == "degraded"),
                                                  "failed": int(status == "failed")}, **extra}


def test_states_are_written_whole_and_the_newest_of_two_folders_is_read(tmp_path, monkeypatch):
    env = {"GPUTOP_DOCTOR_DIR": str(tmp_path / "a")}
    paths, why = write_states([state("GPU-1", "ok", t=100.0), state("GPU-2", "failed")], env)
    assert why is None and sorted(Path(p).name for p in paths) == ["GPU-1.json", "GPU-2.json"]
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]  # no temporary file left
    assert read_last("GPU-2", env)["status"] == "failed" and read_last("GPU-9", env) is None
    both = {"XDG_STATE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}  # no GPUTOP_DOCTOR_DIR: two folders
    monkeypatch.setattr(doctor_state, "SYSTEM_DIR", tmp_path / "system")
    (tmp_path / "system").mkdir()
    (tmp_path / "system" / "GPU-1.json").write_text(json.dumps({"format": doctor_state.FORMAT,
                                                                **state("GPU-1", "failed", t=200.0)}))
    user = tmp_path / "xdg" / "gputop" / "doctor"
    user.mkdir(parents=True)
    (user / "GPU-1.json").write_text(json.dumps({"format": doctor_state.FORMAT, **state("GPU-1", "ok", t=300.0)}))
    (user / "GPU-3.json").write_text("{not json")  # a torn or foreign file is skipped, not fatal
    assert read_last("GPU-1", both)["unix_time"] == 300.0  # the newer, whichever folder holds it
    assert set(read_all(both)) == {"GPU-1"}
    paths, _ = write_states([state("GPU-4")], both)  # the system folder first, when it can be written
    assert paths == [str(tmp_path / "system" / "GPU-4.json")]


def test_a_folder_that_cannot_be_written_is_said(tmp_path):
    (tmp_path / "file").write_text("")
    paths, why = write_states([state("GPU-1")], {"GPUTOP_DOCTOR_DIR": str(tmp_path / "file" / "sub")})
    assert paths == [] and "no folder to keep the doctor's results in" in why
    paths, why = write_states([state("../evil")], {"GPUTOP_DOCTOR_DIR": str(tmp_path / "d")})
    assert paths == [] and "no usable UUID" in why


def test_the_summary_line_says_status_age_mode_and_the_worst_finding():
    st, line = summary(state("GPU-1", t=1000.0), now=1000.0 + 2 * 3600)
    assert st == "degraded" and line == "degraded 2 h ago (quick): under load SM 1297 MHz: thermal"
    assert summary(state("GPU-1", "ok", t=5.0), now=10.0) == ("ok", "ok just now (quick)")
    assert summary(None) is None


def test_last_doctor_rereads_only_when_a_folder_changed(tmp_path):
    env = {"GPUTOP_DOCTOR_DIR": str(tmp_path)}
    last = LastDoctor(env, refresh_s=0.0)
    assert last.get("GPU-1") is None
    write_states([state("GPU-1", "failed")], env)
    assert last.get("GPU-1")["status"] == "failed"
    slow = LastDoctor(env, refresh_s=3600.0)
    assert slow.get("GPU-1")["status"] == "failed"
    write_states([state("GPU-1", "ok")], env)
    assert slow.get("GPU-1")["status"] == "failed"  # within its refresh period: the cached one


def test_export_publishes_each_gpus_last_doctor(tmp_path, monkeypatch):
    from export_util import replay_collector

    monkeypatch.setenv("GPUTOP_DOCTOR_DIR", str(tmp_path))
    write_states([state(H200_UUID, "degraded", t=1234.0)])
    collector, sampler, src = replay_collector(str(DEMO))
    sampler.step()
    fams = {f.name: f for f in collector.collect()}
    status = fams["gputop_doctor_status"].samples
    assert [(s.labels["UUID"], s.labels["mode"], s.value) for s in status] == [(H200_UUID, "quick", 1.0)]
    assert fams["gputop_doctor_timestamp_seconds"].samples[0].value == 1234.0
    figs = {s.labels["figure"]: s.value for s in fams["gputop_doctor_figure"].samples}
    assert figs == {"dram_bytes_per_s": 4.5e12, "bf16_sustained_flops": 6.9e14}
    assert fams["gputop_doctor_figure"].samples[0].labels["modelName"] == "NVIDIA H200"
    counts = {s.labels["status"]: s.value for s in fams["gputop_doctor_findings"].samples}
    assert counts == {"ok": 30.0, "degraded": 1.0, "failed": 0.0}
    src.close()


def test_export_without_a_doctor_publishes_no_doctor_sample():
    from export_util import replay_collector

    collector, sampler, src = replay_collector(str(DEMO))
    sampler.step()
    assert all(not f.samples for f in collector.collect() if f.name.startswith("gputop_doctor"))
    src.close()


def test_the_device_panel_shows_the_last_doctor(tmp_path, monkeypatch):
    from gputop.analysis.peaks import compute_peaks
    from gputop.tui.model import view

    monkeypatch.setenv("GPUTOP_DOCTOR_DIR", str(tmp_path))
    monkeypatch.setattr(view, "DOCTOR", LastDoctor(refresh_s=0.0))
    static = json.loads((Path(__file__).parent / "data" / "static" / "h200_recorded.json").read_text())["static"]
    sample = {"sm_clock_mhz": 1980, "clock_reasons": []}
    assert "Doctor" not in [r.label for r in view.device_rows(static, compute_peaks(static), sample)]
    write_states([state(H200_UUID, "failed", t=time.time() - 3 * 86400)])
    row = view.device_rows(static, compute_peaks(static), sample)[-1]
    assert row.label == "Doctor" and row.level == "hot" and row.text.startswith("failed 3 d ago (quick): under load")


# -- the fleet's medians, from a real Prometheus-shaped server ---------------------------------------------------------
class _Prometheus(BaseHTTPRequestHandler):
    answers: dict = {}

    def do_POST(self):
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        query = form["query"][0]
        result = self.answers.get(query.split(" ")[0], [])
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def prometheus():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_fleets_medians_are_read_per_model_and_figure(prometheus):
    from gputop.fleet.doctor_medians import fleet_medians

    h100 = {"modelName": "NVIDIA H100 80GB HBM3", "figure": "bf16_sustained_flops"}
    _Prometheus.answers = {"quantile": [{"metric": h100, "value": [1, "7.01e14"]},
                                        {"metric": {**h100, "figure": "dram_bytes_per_s"}, "value": [1, "NaN"]}],
                           "count": [{"metric": h100, "value": [1, "96"]}]}
    url = f"http://127.0.0.1:{prometheus.server_address[1]}"
    got = fleet_medians(url)
    assert got == {"url": url, "why": None,
                   "medians": {"NVIDIA H100 80GB HBM3": {"bf16_sustained_flops": {"value": 7.01e14, "gpus": 96}}}}
    _Prometheus.answers = {}
    assert "no gputop_doctor_figure series" in fleet_medians(url)["why"]


def test_a_fleet_that_does_not_answer_is_a_reason_not_a_failure():
    from export_util import free_port
    from gputop.fleet.doctor_medians import fleet_medians

    got = fleet_medians(f"http://127.0.0.1:{free_port()}")
    assert got["medians"] == {} and got["why"].startswith("not read (") and "cannot reach Prometheus" in got["why"]
