"""workloads/transfer.py: on the CPU, the host memcpy baseline end to end through gputop (no PCIe link
there: the GPU parts are reported skipped); the verdicts in PCIe terms, the bandwidth plot and the
streams timeline."""

from __future__ import annotations

import subprocess
import sys

import pytest

import lesson_docs
from gputop.lessons import transfer as transfer_lesson
from gputop.tui.results.lessons import transfer as transfer_view
from gputop.tui.results.view import results_lines
from test_workloads_common import ROOT, check_verdict, env, load, run_gputop

transfer = load("transfer")


@pytest.fixture(scope="module")
def cpu_doc():
    pytest.importorskip("torch")
    rc, doc, err = run_gputop("transfer", "--device", "cpu", "--quick")
    assert rc == 0, err
    return doc


def test_module_shape():
    assert transfer.NAME == "transfer" and "torch" in transfer.NEEDS and callable(transfer_lesson.analyze)
    names = {p.name for p in transfer.PARAMS}
    assert "device" in names and set(transfer.QUICK) <= names and set(transfer.CPU) <= names
    p = {"min_log2": 12, "max_log2": 16, "step_log2": 2}
    assert transfer.sizes(p) == [4096, 16384, 65536]


@pytest.mark.slow
def test_bad_size_range_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, str(ROOT / "workloads" / "transfer.py"), "--device", "cpu",
                        "--min-log2", "20", "--max-log2", "10"], capture_output=True, text=True, env=env(), cwd=ROOT,
                       timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "min_log2" in r.stderr


@pytest.mark.slow
def test_cpu_run_is_the_host_memcpy_baseline(cpu_doc):
    doc = cpu_doc
    assert doc["status"] == "ok" and [p["name"] for p in doc["phases"]] == ["host memcpy"]
    memcpy = [q for q in doc["points"] if q["phase"] == "host memcpy"]
    assert [q["bytes"] for q in memcpy] == doc["results"]["sizes_bytes"] == transfer.sizes(doc["params"])
    for q in memcpy:
        assert q["ms"] > 0 and q["gb_per_s"] == pytest.approx(q["bytes"] / q["ms"] / 1e6)
    skipped = {q["phase"] for q in doc["points"] if q.get("skipped")}
    assert skipped == set(transfer.COPY_PHASES) | {f"streams {m}" for m in transfer.STREAM_MODES}
    assert any(w["code"] == "skipped" and "PCIe" in w["message"] for w in doc["warnings"])
    assert not [w for w in doc["warnings"] if w["code"] == "analyze_failed"], doc["warnings"]
    v = doc["phases"][0]["verdict"]
    check_verdict(v)
    llc = doc["results"]["llc_bytes"]  # a copy whose source and destination fit the last-level cache: not DRAM
    in_cache = llc is not None and 2 * max(q["bytes"] for q in memcpy) <= llc
    assert (v["class"], v["subclass"]) == ("memory-bound", "cache" if in_cache else "host memcpy")
    assert v["evidence"]["link_fraction"] is None
    assert doc["verdict"]["class"] == "memory-bound"
    text = "\n".join(t.plain for t in results_lines(doc, 100, 30))
    assert "copy bandwidth" in text and "host memcpy only" in text and "streams:" not in text


def test_analyze_gpu_shaped_document():
    doc = transfer_lesson.analyze(lesson_docs.transfer())
    by = {p["name"]: p["verdict"] for p in doc["phases"]}
    for v in by.values():
        check_verdict(v)
    pageable, pinned = by["h2d pageable"], by["h2d pinned"]
    assert (pageable["class"], pageable["subclass"]) == ("pcie-bound", "pageable")
    assert pageable["evidence"]["pinned_speedup"] == pytest.approx(5.0, rel=0.01)
    assert "pin_memory" in pageable["advice"] and "latency-bound" in pageable["evidence_text"]
    assert (pinned["class"], pinned["subclass"]) == ("pcie-bound", "link")
    regimes = [q["regime"] for q in doc["points"] if q["phase"] == "h2d pinned"]
    assert regimes[0] == "latency-bound" and regimes[-1] == "bandwidth-bound"
    assert regimes == sorted(regimes, key=lambda r: r == "bandwidth-bound")  # one switch, small to large
    assert pinned["evidence"]["link_fraction"] == pytest.approx(55e9 / 63e9, rel=0.01)
    assert by["streams seed"]["subclass"] == "serial" and "nothing overlaps" in by["streams seed"]["evidence_text"]
    assert by["streams chunked"]["subclass"] == "overlapped" and by["streams chunked"]["evidence"]["speedup_vs_serial"] > 1.5
    v = doc["verdict"]
    check_verdict(v)
    assert v["subclass"] == "pageable" and v["evidence"]["streams_speedup"] > 1.5 and v["window"] is None


def test_pinned_far_below_the_link_is_not_called_link_bound():
    doc = transfer_lesson.analyze(lesson_docs.transfer(pinned_bps=20e9))
    v = next(p["verdict"] for p in doc["phases"] if p["name"] == "h2d pinned")
    assert (v["class"], v["subclass"]) == ("pcie-bound", "below link")


def test_view_draws_the_link_and_the_streams_timeline():
    doc = transfer_lesson.analyze(lesson_docs.transfer())
    lines = [t.plain for t in transfer_view.view(doc, 100, 30)]
    text = "\n".join(lines)
    assert "PCIe link 63 GB/s" in text and "╌" in text and "●" in text
    rows = {ln.split("│")[0].strip(): ln for ln in lines if "│" in ln and ln.split("│")[0].strip()[:1].isalpha()}
    assert {"serial  stream 0", "seed    upload", "chunked upload"} <= set(rows)
    # the chunked downloads start while the uploads still run: overlap on the shared time axis
    up, down = lines.index(rows["chunked upload"]), lines.index(rows["chunked upload"]) + 2
    up_cells, down_cells = lines[up].split("│")[1], lines[down].split("│")[1]
    assert any(a != " " and b != " " for a, b in zip(up_cells, down_cells))
    seed_up = lines.index(rows["seed    upload"])
    seed_cells = [lines[seed_up + i].split("│")[1] for i in range(3)]
    assert not any(seed_cells[0][c] != " " and seed_cells[2][c] != " " for c in range(len(seed_cells[0])))
    assert len(transfer_view.view(doc, 80, 14)) <= 14


def test_listing_needs_no_torch_and_running_without_it_is_exit_4():
    path = str(ROOT / "workloads" / "transfer.py")
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"runpy.run_path({path!r})"], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"sys.argv = ['transfer.py', '--device', 'cpu']; runpy.run_path({path!r}, run_name='__main__')"],
                       capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 4 and len(lines) == 1 and "needs torch" in lines[0], r.stderr
