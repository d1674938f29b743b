"""The classifier on real recorded GPU traces (CPU only: replayed from files).

* the demo trace that ships with gputop (H200: idle, bf16 matmul, device copy, tiny kernels + sync,
  pageable host-to-device copies): each phase gets the class its physics says;
* every labelled trace in tests/data/traces/ (recorded by bench/gpu/proof/record_all.py on a GPU machine):
  the run's overall verdict is the class in its file name ``<case>.<class>.jsonl.gz`` (or ``expect=`` in
  its header note), and each mark labelled ``expect=<class>`` gets that class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.timeline import format_timeline
from gputop.analysis.vocabulary import CLASSES
from gputop.evaluate.labelled import diagnose_trace, trace_expectations
from gputop.telemetry.trace import demo_trace_path, read_trace, segments
from verdict_util import check_verdict

TRACES = Path(__file__).parent / "data" / "traces"
LABELLED = sorted(TRACES.glob("*.jsonl.gz")) + sorted(TRACES.glob("*.jsonl"))

# The demo trace's phase labels (scripts/record_demo.py) -> (class, subclass).
DEMO = {
    "idle": ("idle", "waiting"),  # the recording process holds its CUDA context and sleeps
    "matmul bf16": ("compute-bound", "tensor"),
    "device copy": ("memory-bound", None),
    "tiny kernels": ("latency-bound", "launch"),
    "pageable host-to-device": ("pcie-bound", "pageable"),
}
EDGE_S = 1.0  # leave out the first and last second of a phase (the previous phase's tail)
MIN_PHASE_TICKS = 10


def _demo_phases():
    header, rows = read_trace(demo_trace_path())
    out = []
    for label, ticks in segments(rows):
        want = next((v for k, v in DEMO.items() if label and label.startswith(k)), None)
        if want is None:
            continue
        t0, t1 = ticks[0]["t"] + EDGE_S, ticks[-1]["t"] - EDGE_S
        out.append((label, want, [t for t in ticks if t0 <= t["t"] <= t1]))
    return header, out


def test_demo_trace_phases_get_their_class():
    header, phases = _demo_phases()
    assert len(phases) >= 5
    static = header["devices"][0]
    peaks = compute_peaks(static)
    pid = next(iter(phases[1][2][0]["host"]["procs"]))
    for label, (cls, sub), ticks in phases:
        v = classify(ticks, static, peaks, watched_pid=pid)
        assert (v.cls, v.subclass) == (cls, sub), f"{label}: {v.cls} ({v.subclass}) {v.evidence_text}"
        assert v.confidence >= 0.7, f"{label}: {v.confidence}"
        assert v.missing == [] or v.cls == "idle", v.missing


def test_demo_trace_monitor_timeline():
    a = diagnose_trace(demo_trace_path())
    assert a["gpu_detection"] == "process list" and a["gpus_used"] == [0]
    segs = a["gpus"][0]["timeline"]
    order = [s["class"] for s in segs if s["subclass"] != "startup"]
    # ... and the recorder's last second: its process keeps a core busy (writing out) with the GPU idle
    assert order == ["idle", "compute-bound", "memory-bound", "latency-bound", "pcie-bound", "idle", "host-bound"], \
        "\n".join(format_timeline(segs))
    assert segs[0]["subclass"] == "startup" and a["gpus"][0]["first_seen_s"] > 0
    # one verdict for the whole run: four busy classes of about equal time, so a low confidence and a mix
    v = a["verdict"]
    assert v["class"] in ("compute-bound", "memory-bound", "latency-bound", "pcie-bound")
    assert len(v["mixed"]) >= 2 and v["confidence"] < 0.7


@pytest.mark.skipif(not LABELLED, reason="no labelled traces in tests/data/traces yet (bench/gpu/proof/record_all.py)")
@pytest.mark.parametrize("path", LABELLED, ids=[p.name for p in LABELLED])
def test_labelled_trace_gets_its_label(path):
    want = trace_expectations(str(path))
    assert want["overall"] in CLASSES or want["phases"], f"{path.name}: no expected class in name, note or marks"
    a = diagnose_trace(str(path))
    got = a["verdict"]
    text = "\n".join(format_timeline(a["gpus"][0]["timeline"])) if a["gpus"] else ""
    if want["overall"]:
        assert got["class"] == want["overall"], f"{path.name}: {got['class']}: {got['evidence_text']}\n{text}"
        assert got["evidence_text"] and got["advice"]
    if want["phases"]:
        header, rows = read_trace(str(path))
        ticks = [r for r in rows if r["type"] == "tick"]
        used = [i for i, g in enumerate(a["gpus"]) if g["used"]]
        pos = used[0] if used else 0
        static = header["devices"][pos]
        checked = 0
        for label, cls, t0, t1 in want["phases"]:
            win = [t for t in ticks if t0 + EDGE_S <= t["t"] <= t1 - EDGE_S]
            if len(win) < MIN_PHASE_TICKS:  # a phase too short to judge apart from its neighbours
                continue
            v = classify(win, static, compute_peaks(static), watched_pid=a.get("pid"), gpu=pos)
            assert v.cls == cls, f"{path.name} phase {label!r}: {v.cls}: {v.evidence_text}"
            checked += 1
        assert checked, f"{path.name}: every labelled phase is shorter than {MIN_PHASE_TICKS} samples"


# (the corpus' real programs, the H200 demo and the workloads' traces are the slow loop's; the demo and the
# labelled traces of one class each the quick loop's)
@pytest.mark.parametrize("path", [Path(demo_trace_path())] + [pytest.param(p, marks=pytest.mark.slow)
                                  if p.name.startswith(("corpus_", "wl_", "h200_demo")) else p for p in LABELLED],
                         ids=lambda p: p.name)
def test_every_verdict_on_a_recorded_trace_has_one_shape_and_quotes_its_evidence(path):
    """Each window's, each segment's, each GPU's and the run's verdict: the schema's verdict, with every
    number of its sentence one of its evidence numbers."""
    a = diagnose_trace(str(path))
    verdicts = [a["verdict"]]
    for g in a["gpus"]:
        verdicts += [g["verdict"]] if g["verdict"] else []
        verdicts += [s["verdict"] for s in g["timeline"]]
    assert len(verdicts) >= 3
    for v in verdicts:
        check_verdict(v, "monitor")
    header, rows = read_trace(str(path))
    ticks = [r for r in rows if r["type"] == "tick"]
    static = header["devices"][0]
    for i in range(0, len(ticks) - 20, 20):  # the classifier's own windows, before any merging
        check_verdict(classify(ticks[i:i + 20], static, compute_peaks(static)).to_dict(), "monitor")


def test_trace_expectations_from_name_note_and_marks(tmp_path):
    from gputop.telemetry.trace import Recorder

    p = tmp_path / "matmul_bf16.compute-bound.jsonl"
    rec = Recorder(str(p), [{"index": 0}], note="case matmul")
    rec({"t": 0.0, "gpus": [{"index": 0, "t": 0.0}], "host": {}})
    rec.mark("warm-up", 0.5)
    rec.mark("copy expect=memory-bound", 1.0)
    rec({"t": 2.0, "gpus": [{"index": 0, "t": 2.0}], "host": {}})
    rec.close()
    e = trace_expectations(str(p))
    assert e["overall"] == "compute-bound" and e["phases"] == [("copy expect=memory-bound", "memory-bound", 1.0, 2.0)]
    q = tmp_path / "x.jsonl"
    rec = Recorder(str(q), [{"index": 0}], note="gputop --run -- python idle.py; expect=idle")
    rec({"t": 0.0, "gpus": [{"index": 0, "t": 0.0}], "host": {}})
    rec.close()
    assert trace_expectations(str(q))["overall"] == "idle"
