"""Record/replay and the sampler, driven by the real trace recorded on an H200 (gputop/data/demo.jsonl.gz), and
the field names and clock-reason words a sample records, checked against the recorded traces."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from gputop.analysis import summary, thresholds
from gputop.analysis.evidence import measure
from gputop.lessons import docs
from gputop.telemetry import sample
from gputop.telemetry.sampler import Recent, Sampler
from gputop.telemetry.trace import (Recorder, ReplaySource, TraceError, demo_trace_path, read_trace, segments,
                                   write_trace)


def test_demo_trace_is_real_and_labelled():
    header, rows = read_trace(demo_trace_path())
    assert header["devices"][0]["name"] == "NVIDIA H200"
    labels = [label for label, _ in segments(rows)]
    assert "matmul bf16 8192^3" in labels and "device copy 1 GiB" in labels


def mean(ticks, field):
    vals = [t["gpus"][0][field] for t in ticks if t["gpus"][0][field] is not None]
    return sum(vals) / len(vals)


def test_demo_phases_show_what_gpm_tells_apart():
    """NVML's duty cycle reads ~100% for a copy and a matmul alike; GPM tells them apart."""
    _, rows = read_trace(demo_trace_path())
    seg = dict(segments(rows))
    mm, cp, tiny = seg["matmul bf16 8192^3"], seg["device copy 1 GiB"], seg["tiny kernels + sync"]
    assert mean(mm, "util_gpu_pct") > 85 and mean(cp, "util_gpu_pct") > 85
    assert mean(mm, "tensor_pct") > 60 and mean(mm, "dram_bw_pct") < 40
    assert mean(cp, "dram_bw_pct") > 60 and mean(cp, "tensor_pct") < 10
    assert mean(tiny, "sm_active_pct") < 15 < mean(tiny, "util_gpu_pct")


def test_replay_feeds_the_sampler_like_a_live_source():
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    sampler = Sampler(src, rate_hz=10)
    n = 0
    while sampler.step() is not None:
        n += 1
    assert n == len(src.ticks) and src.finished
    ts, vs = sampler.series(0, "sm_active_pct", seconds=5)
    assert len(ts) == len(vs) > 10 and all(b >= a for a, b in zip(ts, ts[1:]))
    phases = {t.get("phase") for t in sampler.ticks}
    assert "device copy 1 GiB" in phases


def test_sampler_thread_runs_a_replay_to_the_end():
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    sampler = Sampler(src, rate_hz=10).start()
    sampler._thread.join(10)
    assert not sampler.running and len(sampler.ticks) == len(src.ticks)


def test_sampler_thread_id_is_the_os_id_of_its_thread_while_it_runs():
    import psutil
    sampler = Sampler(ReplaySource(demo_trace_path(), speed=1.0), rate_hz=10)
    assert sampler.thread_id is None
    sampler.start()
    try:
        assert sampler.thread_id in {t.id for t in psutil.Process().threads()}
    finally:
        sampler.stop()
    assert sampler.thread_id is None

def test_window_and_since_are_the_newest_ticks_oldest_first():
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    sampler = Sampler(src, rate_hz=10)
    assert sampler.window(3.0) == [] and sampler.latest() is None
    for _ in range(200):
        sampler.step()
    ticks = list(sampler.ticks)
    last = ticks[-1]["t"]
    assert sampler.window(3.0) == [t for t in ticks if t["t"] >= last - 3.0] and len(sampler.window(3.0)) >= 29
    assert sampler.window(None) == ticks and sampler.window(1e9) == ticks
    mid = ticks[100]["t"]
    assert sampler.window(since=mid) == ticks[100:] and sampler.since(mid) == ticks[101:]


def test_recent_is_the_window_at_every_call_and_follows_a_restart_or_another_sampler():
    """Recent (what the monitor's live verdicts read every frame) keeps its ticks between calls and adds only
    the new ones; it equals Sampler.window at every call, after a replay starts over (time goes back) and
    for another sampler."""
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    sampler = Sampler(src, rate_hz=10)
    recent = Recent(3.0)
    assert recent.get(sampler) == []
    for k in range(120):
        for _ in range(k % 4):  # 0-3 new ticks between two calls, as frames at 4 fps see at 10 Hz
            sampler.step()
        assert recent.get(sampler) == sampler.window(3.0)
    assert len(recent.get(sampler)) >= 29
    again = Sampler(ReplaySource(demo_trace_path(), speed=math.inf), rate_hz=10)  # time starts over
    for _ in range(5):
        again.step()
    assert recent.get(again) == again.window(3.0) and len(again.window(3.0)) == 5
    src2 = ReplaySource(demo_trace_path(), speed=math.inf)
    restarted = Sampler(src2, rate_hz=10)
    for _ in range(40):
        restarted.step()
    assert recent.get(restarted) == restarted.window(3.0)
    restarted.ticks.clear()
    src2._i = 0  # the replay plays from its start again: its times go back
    for _ in range(12):
        restarted.step()
    assert recent.get(restarted) == restarted.window(3.0) and len(restarted.window(3.0)) == 12


def test_ring_buffer_is_bounded_and_keeps_the_newest():
    src = ReplaySource(demo_trace_path(), speed=math.inf, loop=True)
    sampler = Sampler(src, rate_hz=10, history_s=5)  # 50 ticks
    for _ in range(3 * len(src.ticks)):
        sampler.step()
    assert len(sampler.ticks) == 50
    assert sampler.ticks[-1]["t"] > 2 * src.ticks[-1]["t"]  # time keeps increasing across loops
    sampler.set_rate(2.0)
    assert sampler.ticks.maxlen == 10 and len(sampler.ticks) == 10


def test_since_gives_only_the_newer_ticks_in_order():
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    sampler = Sampler(src, rate_hz=10)
    for _ in range(30):
        sampler.step()
    t20 = sampler.ticks[19]["t"]
    newer = sampler.since(t20)
    assert [t["t"] for t in newer] == [t["t"] for t in list(sampler.ticks)[20:]]
    assert sampler.since(sampler.ticks[-1]["t"]) == []
    assert len(sampler.since(-1.0)) == 30


def test_record_then_replay_round_trip(tmp_path):
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    out = tmp_path / "again.jsonl.gz"
    rec = Recorder(str(out), src.static(), rate_hz=10, note="round trip")
    first = src.read()
    rec(first)
    rec.mark("second phase", t=first["t"] + 0.05)
    for _ in range(20):
        rec(src.read())
    rec.close()
    again = ReplaySource(str(out), speed=math.inf)
    assert again.static() == src.static()
    assert len(again.ticks) == 21 and again.marks == [(pytest.approx(0.05), "second phase")]
    a, b = again.read(), json.loads(json.dumps(first))
    assert a["gpus"][0]["sm_clock_mhz"] == b["gpus"][0]["sm_clock_mhz"]
    assert a["t"] == 0.0


@pytest.mark.parametrize("content, message", [
    ("", "empty file"),
    ('{"hello": 1}\n', "not a gputop trace"),
    ('{"type":"header","format":"gputop-trace","version":99}\n{"type":"tick","t":0,"gpus":[]}\n', "version 99"),
    ('{"type":"header","format":"gputop-trace","version":1}\nnot json\n{"type":"tick"}\n', "line 2 is not JSON"),
    ('{"type":"header","format":"gputop-trace","version":1}\n', "no samples"),
])
def test_bad_trace_files_give_one_clear_line(tmp_path, content, message):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(TraceError, match=message) as exc:
        ReplaySource(str(p))
    assert "\n" not in str(exc.value) and str(p) in str(exc.value)


def test_a_recording_cut_off_mid_line_still_replays(tmp_path):
    header, rows = read_trace(demo_trace_path())
    p = tmp_path / "cut.jsonl"
    lines = [json.dumps(header)] + [json.dumps(r) for r in rows[:30]]
    p.write_text("\n".join(lines) + "\n" + json.dumps(rows[30])[:40])
    assert len(ReplaySource(str(p)).ticks) == sum(1 for r in rows[:30] if r["type"] == "tick")


def test_gzip_and_plain_traces_read_the_same(tmp_path):
    plain = tmp_path / "demo.jsonl"
    with gzip.open(demo_trace_path(), "rt") as f:
        plain.write_text(f.read())
    assert read_trace(str(plain)) == read_trace(demo_trace_path())


def test_write_trace_puts_marks_between_the_ticks_they_fall_in(tmp_path):
    src = ReplaySource(demo_trace_path(), speed=math.inf)
    ticks = [src.read() for _ in range(30)]
    marks = [(ticks[10]["t"] - 0.01, "phase two"), (ticks[0]["t"], "phase one"), (None, "never started")]
    n = write_trace(str(tmp_path / "run.jsonl"), src.static(), ticks, marks, rate_hz=10)
    assert n == 30
    _, rows = read_trace(str(tmp_path / "run.jsonl"))
    seg = segments(rows)
    assert [(label, len(t)) for label, t in seg] == [("phase one", 10), ("phase two", 20)]


def test_host_reader_measures_a_busy_child_from_the_first_read():
    import subprocess
    import sys
    import time

    from gputop.telemetry.host import HostReader

    import psutil

    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<30: pass"])
    try:
        ref = psutil.Process(child.pid)
        host = HostReader()
        host.watch(child.pid)
        c0, t0 = sum(ref.cpu_times()[:2]), time.monotonic()
        while sum(ref.cpu_times()[:2]) - c0 < 0.3:  # until it has spun 0.3 CPU-s, however loaded the machine is
            time.sleep(0.05)
        procs = host.read()["procs"][str(child.pid)]
        expected = 100.0 * (sum(ref.cpu_times()[:2]) - c0) / (time.monotonic() - t0)
        # a spinning process, seen on the first read after watch(): what /proc says it used since then
        assert procs["cpu_pct"] > 0.5 * expected > 0
    finally:
        child.kill()
        child.wait()


# -- the words and field names a sample records, and everything that reads them back ---------------------
RECORDED = [Path(demo_trace_path())] + sorted((Path(__file__).parent / "data" / "traces").glob("*.jsonl.gz"))
META = {"index", "t", "processes", "process_sm_pct", "lost"}  # (process_sm_pct comes with a process list)


def recorded_samples():
    for path in RECORDED:
        _, rows = read_trace(str(path))
        for row in rows:
            yield from row.get("gpus") or []


def test_recorded_traces_use_exactly_the_sample_field_names():
    """A renamed field shows up here: the recorded traces keep the names they were written with."""
    names = set().union(*(set(s) for s in recorded_samples()))
    assert names - META == set(sample.SAMPLE_FIELDS)


def test_field_lists_elsewhere_are_sample_fields():
    assert set(sample.GPM_ACTIVITY_FIELDS) <= set(sample.SAMPLE_FIELDS)
    assert "tensor_pct" in sample.GPM_ACTIVITY_FIELDS and "pcie_rx_bps" not in sample.GPM_ACTIVITY_FIELDS
    assert set(summary.GPU_FIELDS) <= set(sample.SAMPLE_FIELDS)
    assert set(docs.TELE_FIELDS) <= set(summary.GPU_FIELDS)  # tele_text reads the phase summaries
    with pytest.raises(ValueError, match="not sample fields: tensor_util"):
        sample.fields("sm_active_pct", "tensor_util")


def test_recorded_clock_reasons_are_the_words_sample_decodes():
    recorded = {w for s in recorded_samples() for w in s.get("clock_reasons") or []}
    assert sample.POWER_CAP_REASON in recorded  # the bf16 matmul traces ran at the power limit
    assert recorded <= set(sample.CLOCK_REASONS.values())


def test_throttle_words_are_clock_reason_words_and_everyone_uses_them():
    words = set(sample.CLOCK_REASONS.values())
    assert set(sample.THERMAL_REASONS) <= set(sample.THROTTLE_REASONS) <= words
    assert sample.POWER_CAP_REASON in sample.THROTTLE_REASONS and "idle" not in sample.THROTTLE_REASONS
    assert docs.THROTTLE_REASONS is sample.THROTTLE_REASONS
    assert not hasattr(thresholds, "THERMAL_REASONS") and not hasattr(thresholds, "POWER_CAP_REASON")


def test_decoded_reasons_reach_the_classifier_and_the_workload_warnings():
    """From the NVML bit mask to the classifier's evidence and a workload's throttling warning."""
    words = sample.decode_clock_reasons(0x4 | 0x40)
    assert words == ["software power cap", "hardware thermal slowdown"]
    busy = {"util_gpu_pct": 100.0, "clock_reasons": words}
    ev = measure([dict(busy, t=0.1 * i) for i in range(10)], {}, {})
    assert ev["power_cap_sample_fraction"] == 1.0 and ev["thermal_sample_fraction"] == 1.0
    assert ev["hardware_thermal_slowdown_sample_fraction"] == 1.0
    assert ev["software_thermal_slowdown_sample_fraction"] == 0.0
    doc = {"phases": [{"name": "hot", "telemetry": {"clock_reasons_seen": words}}], "warnings": []}
    docs.throttle_warnings(doc)
    assert "software power cap, hardware thermal slowdown" in doc["warnings"][0]["message"]
