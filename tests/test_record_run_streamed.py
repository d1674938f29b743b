"""``--record-run FILE`` writes as the run goes (issue 24 item 5): a gputop killed with SIGKILL mid-run leaves a
recording that reads, replays and plays up to its last complete line; and one naming rule for every file gputop
records (``.gz``: gzip; any other name: plain JSON lines; the readers go by the content, whatever the name).
Real ``python -m gputop`` processes, a real SIGKILL."""

from __future__ import annotations

import gzip
import json
import math
import signal
import subprocess

import pytest

from fault_util import PY, ROOT, Gputop, assert_none_alive, env, reaper, wait_until  # noqa: F401 (reaper: a fixture)
from gputop import documents
from gputop.runner.recording import RecordedRun, read_header, read_recording
from gputop.telemetry.trace import ReplaySource, TraceError, read_rows

START_S = 60.0


def events_of(path, kind: str) -> list[dict]:
    try:
        return [e["event"] for e in read_recording(path)["events"] if e["event"].get("event") == kind]
    except TraceError:  # not written yet, or its header alone
        return []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["run.jsonl.gz", "run.jsonl"])
def test_a_gputop_killed_mid_run_leaves_a_recording_that_replays(tmp_path, reaper, name):  # noqa: F811
    path, ready = tmp_path / name, tmp_path / "ready"
    g = Gputop(["--run", "fault_hang", "--rate", "10", "--record-run", str(path), "--param", f"ready_file={ready}"],
               tmp_path, env(fake_nvml=True))
    reaper.gputops.append(g)
    wait_until(lambda: ready.exists() and events_of(path, "point") and len(read_recording(path)["ticks"]) >= 3,
               START_S, "the run's point and 3 ticks in the recording", g.proc)
    g.send(signal.SIGKILL)  # no handler, no finally: only what was already on the disk is left
    assert g.wait(10) == -signal.SIGKILL

    rec = read_recording(path)
    assert rec["document"] is None  # cut off before the run ended
    assert rec["run"]["workload"] == "fault_hang" and rec["header"]["devices"][0]["name"]
    assert events_of(path, "point")[0]["data"] == {"k": 1, "gflops": 2.0}
    assert [m["label"] for m in rec["marks"]] == ["hang"]
    assert read_header(path)["run"]["workload"] == "fault_hang"
    assert_none_alive(g.seen, within=10.0, what="the run's processes after gputop was killed (its watchdog's job)")

    # the telemetry replays (the trace reader), headless ...
    r = subprocess.run([PY, "-m", "gputop", "--replay", str(path), "--once", "--json"], capture_output=True, text=True,
                       cwd=ROOT, env=env(), timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    documents.validate(doc, "once")
    assert doc["gpus"][0]["static"]["name"] == rec["header"]["devices"][0]["name"]
    # ... and the run plays back as far as it was recorded: an interrupted run with its point, said so
    played = RecordedRun(path, speed=50.0).start()
    assert played.wait(30)
    doc = played.document()
    assert doc["status"] == "interrupted" and doc["points"] == [{"k": 1, "gflops": 2.0}]
    assert any(w["code"] == "cut_off" for w in doc["warnings"])


def test_a_last_line_cut_mid_write_is_left_out(tmp_path):
    """What a kill mid-write leaves: the gzip stream without its end, the last line without its newline."""
    rows = [{"type": "header", "format": "gputop-trace", "version": 1, "devices": []}]
    rows += [{"type": "tick", "t": i / 10, "gpus": [], "host": {}} for i in range(50)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    plain = tmp_path / "cut.jsonl"
    plain.write_text(text[:-9])  # the last tick cut mid-line
    assert len(read_rows(plain)) == len(rows) - 1
    assert len(ReplaySource(str(plain)).ticks) == 49
    gz = tmp_path / "cut.jsonl.gz"
    with gzip.open(gz, "wt") as f:  # flushed after each line, as --record-run flushes after each batch
        for line in text.splitlines(keepends=True):
            f.write(line)
            f.flush()
    data = gz.read_bytes()
    gz.write_bytes(data[:-8])  # no trailer (CRC, size): the writer never closed it
    assert len(read_rows(gz)) == len(rows)
    gz.write_bytes(data[:len(data) // 2])  # cut in the middle of the stream: the complete lines before
    assert len(rows) // 3 < len(read_rows(gz)) < len(rows)


def test_a_line_that_is_not_json_before_the_end_is_still_an_error(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"type":"header","format":"gputop-trace","version":1}\nnot json\n{"type":"tick"}\n')
    with pytest.raises(TraceError, match="line 2 is not JSON"):
        read_rows(p)


@pytest.mark.slow
@pytest.mark.parametrize("name, gz", [("x.txt", False), ("x.jsonl", False), ("x.jsonl.gz", True), ("x", False)])
def test_record_run_names_one_rule_and_the_replay_reads_each(tmp_path, name, gz):
    """``.gz`` is gzip, any other name plain JSON lines; --replay and --recorded's reader read every one."""
    path = tmp_path / name
    r = subprocess.run([PY, "-m", "gputop", "--run", "fault_ok", "--device", "cpu", "--record-run", str(path)],
                       capture_output=True, text=True, cwd=ROOT, env=env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == gz
    rec = read_recording(path)
    assert rec["document"]["status"] == "ok" and rec["run"]["workload"] == "fault_ok"
    assert math.isclose(rec["document"]["exit_code"], 0)


def test_a_gzip_recording_under_a_plain_name_reads_by_its_content(tmp_path):
    src = ROOT / "gputop" / "data" / "demo.jsonl.gz"
    renamed = tmp_path / "demo.jsonl"
    renamed.write_bytes(src.read_bytes())
    assert len(ReplaySource(str(renamed)).ticks) == len(ReplaySource(str(src)).ticks)
