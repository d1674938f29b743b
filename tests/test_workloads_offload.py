"""workloads/offload.py: the CPU side end to end through gputop (tiny sizes), the crossover rule, the
verdicts per size and per phase, and the log-log results view."""

from __future__ import annotations

import subprocess
import sys

import pytest

import lesson_docs
from gputop.lessons import lesson
from gputop.lessons import offload as offload_lesson
from gputop.tui.results.lessons import offload as offload_view
from gputop.tui.results.view import results_lines
from gputop.workload import ParamError
from test_workloads_common import ROOT, check_verdict, env, load, run_gputop

offload = load("offload")


@pytest.fixture(scope="module")
def cpu_doc():
    pytest.importorskip("torch")
    rc, doc, err = run_gputop("offload", "--device", "cpu", "--quick")
    assert rc == 0, err
    return doc


def test_module_shape_and_help():
    assert offload.NAME == "offload" and "torch" in offload.NEEDS
    found = lesson("offload")  # gputop's analysis of the run is the lesson's, found by name
    assert found.analyze is offload_lesson.analyze and found.csv_rows is offload_lesson.csv_rows
    assert not hasattr(offload, "analyze") and not hasattr(offload, "csv_rows")  # the script only measures
    names = {p.name for p in offload.PARAMS}
    assert "device" in names and set(offload.QUICK) <= names and set(offload.CPU) <= names
    r = subprocess.run([sys.executable, str(ROOT / "workloads" / "offload.py"), "--help"], capture_output=True,
                       text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "naive" in r.stdout


@pytest.mark.slow
def test_bad_ops_is_one_line_and_exit_2():
    with pytest.raises(ParamError, match="ops"):
        offload.parse_ops("matmul,fft")
    r = subprocess.run([sys.executable, str(ROOT / "workloads" / "offload.py"), "--device", "cpu", "--ops", "fft"],
                       capture_output=True, text=True, env=env(), cwd=ROOT, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "'ops'" in r.stderr


def test_crossover_is_where_the_gpu_wins_for_good():
    pts = [{"n": n, "cpu_ms": c, "g": g} for n, c, g in ((1, 1, 5), (2, 2, 1), (4, 3, 4), (8, 8, 4), (16, 20, 5))]
    assert offload_lesson.crossover(pts, "g") == 8  # it won at n=2 too, but lost again at n=4
    assert offload_lesson.wins_at(pts, "g") == [2, 8, 16]
    assert offload_lesson.crossover([{"n": 1, "cpu_ms": 1, "g": 2}], "g") is None


@pytest.mark.slow
def test_cpu_run_measures_the_cpu_curve(cpu_doc):
    doc = cpu_doc
    assert doc["status"] == "ok" and doc["device"]["kind"] == "cpu"
    assert [p["name"] for p in doc["phases"]] == ["matmul", "sin"]  # no "first call": no CUDA context to time
    params = doc["params"]
    mat = [q for q in doc["points"] if q["op"] == "matmul"]
    sin = [q for q in doc["points"] if q["op"] == "sin"]
    assert [q["n"] for q in mat] == [1 << k for k in range(0, params["matmul_max_log2"] + 1, params["step_log2"])]
    assert [q["n"] for q in sin] == [1 << k for k in range(0, params["sin_max_log2"] + 1, 2 * params["step_log2"])]
    for q in doc["points"]:
        assert q["cpu_ms"] > 0 and "gpu_ms" not in q and "verdict" not in q
        assert q["bytes_copied"] == 4 * (3 * q["n"] ** 2 if q["op"] == "matmul" else 2 * q["n"])
    assert {w["code"] for w in doc["warnings"]} >= {"skipped"}
    assert not [w for w in doc["warnings"] if w["code"] == "analyze_failed"], doc["warnings"]
    # no GPU curve, nothing to judge: no verdict rather than a made-up one
    assert doc["verdict"] is None and all(p["verdict"] is None for p in doc["phases"])
    rows = offload_lesson.csv_rows(doc)
    assert len(rows) == len(doc["points"]) and list(rows[0])[:4] == ["op", "log2", "n", "cpu_ms"]


@pytest.mark.slow
def test_cpu_run_view(cpu_doc):
    text = "\n".join(t.plain for t in results_lines(cpu_doc, 100, 40))
    assert "matmul: ms vs n" in text and "sin: ms vs n" in text and "CPU only" in text and "●" in text


def test_analyze_gpu_shaped_document():
    doc = offload_lesson.analyze(lesson_docs.offload())
    by = {p["name"]: p["verdict"] for p in doc["phases"]}
    for v in by.values():
        check_verdict(v)
    assert (by["first call"]["class"], by["first call"]["subclass"]) == ("latency-bound", "startup")
    assert by["first call"]["evidence"]["context_ms"] == 250.0
    mat = by["matmul"]
    assert mat["evidence"]["crossover_with_copies_n"] == 256 and mat["evidence"]["crossover_without_copies_n"] == 128
    assert "wins from n=256" in mat["evidence_text"] and "times only the launch" in mat["evidence_text"]
    # the sine moves 8 bytes per 4 sines: at 2^26 elements the pageable copies are nearly all the GPU time
    assert (by["sin"]["class"], by["sin"]["subclass"]) == ("pcie-bound", "pageable")
    assert by["sin"]["evidence"]["copy_share"] > 0.9
    sizes = {(q["op"], q["n"]): q["verdict"] for q in doc["points"] if q.get("verdict")}
    assert (sizes[("matmul", 1)]["class"], sizes[("matmul", 1)]["subclass"]) == ("latency-bound", "launch")
    assert "n=1: the GPU loses" in sizes[("matmul", 1)]["evidence_text"]
    for v in sizes.values():
        check_verdict(v)
    check_verdict(doc["verdict"])
    assert doc["verdict"]["class"] == "pcie-bound" and doc["verdict"]["window"] is None


def test_verdict_per_size_reads_the_regime():
    """Small sizes: the copies cost what the smallest copies cost (fixed cost) and the GPU loses: latency-bound;
    from there the copies move real bytes and are most of the time: transfer-bound, whether the GPU wins or not
    -- never latency-bound at the largest size (as the 2026-11-23 runs' 64 MB downloads at 1.5 GB/s were called)."""
    doc = offload_lesson.analyze(lesson_docs.offload())
    by = {(q["op"], q["n"]): q["verdict"] for q in doc["points"] if q.get("verdict")}
    assert [by[("matmul", n)]["class"] for n in (1, 16, 128, 256, 4096)] == \
        ["latency-bound", "latency-bound", "latency-bound", "pcie-bound", "pcie-bound"]
    assert "near the" in by[("matmul", 16)]["evidence_text"] and by[("matmul", 16)]["evidence"]["fixed_copy_ms"] > 0
    assert "the GPU wins with copies" in by[("matmul", 4096)]["evidence_text"]
    assert by[("sin", 1 << 26)]["class"] == "pcie-bound"
    # the copies' fixed cost is the median of the three smallest sizes, so one slow first call does not move it
    pts = [q for q in lesson_docs.offload()["points"] if q.get("op") == "sin"]
    fixed = offload_lesson.fixed_copy_ms(pts)
    pts[0]["h2d_ms"] *= 5
    assert offload_lesson.fixed_copy_ms(pts) == pytest.approx(fixed, rel=1e-3)
    assert offload_lesson.fixed_copy_ms(pts[:3]) is None  # too few sizes: judged by bytes instead


def test_fresh_host_memory_is_shown_apart():
    doc = offload_lesson.analyze(lesson_docs.offload())
    sin = next(p["verdict"] for p in doc["phases"] if p["name"] == "sin")
    assert sin["evidence"]["d2h_fresh_ms"] > 10 * sin["evidence"]["d2h_ms"]
    assert "by x.cpu() into fresh memory (page faults)" in sin["evidence_text"] and "page fault" in sin["notes"][-1]
    rows = offload_lesson.csv_rows(doc)
    assert all(r["d2h_fresh_ms"] >= r["d2h_ms"] for r in rows)
    text = [t.plain for t in offload_view.view(doc, 160, 40)]
    fresh = next(t for t in text if t.startswith("x.cpu() into fresh memory pays page faults"))
    assert "download 194 vs 14.9 ms reused, sin 2^26" in fresh and len(text) <= 40
    narrow = offload_view.view(doc, 80, 30)
    assert len(narrow) <= 30 and all(len(t.plain) <= 80 for t in narrow if t.plain.startswith("x.cpu()"))


def test_a_document_from_before_the_reused_buffer_reads_right():
    """The runs of 2026-11-23 (x.cpu() into fresh memory in the gpu+copies curve): the sine won at 2^22 and lost
    at 2^24 and 2^26 -- no crossover for good, said so, and no fresh-memory line (those documents had none)."""
    doc = offload_lesson.analyze(lesson_docs.offload(fresh_in_curve=True))
    sin = next(p["verdict"] for p in doc["phases"] if p["name"] == "sin")
    check_verdict(sin)
    assert sin["evidence"]["crossover_with_copies_n"] is None and sin["evidence"]["last_win_with_copies_n"] == 1 << 22
    assert "never wins for good (it won at n=4194304, then lost again)" in sin["evidence_text"]
    assert "d2h_fresh_ms" not in sin["evidence"] and len(sin["notes"]) == 1
    text = "\n".join(t.plain for t in offload_view.view(doc, 160, 40))
    assert "GPU wins from never with copies" in text and "fresh memory" not in text


def test_fast_copies_make_the_large_matmul_compute_bound():
    doc = offload_lesson.analyze(lesson_docs.offload(copy_bps=1e13))
    mat = next(p["verdict"] for p in doc["phases"] if p["name"] == "matmul")
    assert (mat["class"], mat["subclass"]) == ("compute-bound", "gpu wins")
    big = max((q for q in doc["points"] if q.get("op") == "sin"), key=lambda q: q["n"])
    assert big["verdict"]["class"] == "memory-bound"


def test_gpu_shaped_view_shows_four_curves_and_the_crossovers():
    doc = offload_lesson.analyze(lesson_docs.offload())
    lines = offload_view.view(doc, 110, 40)
    text = "\n".join(t.plain for t in lines)
    assert "GPU wins from n=256 with copies, n=128 without" in text
    assert all(m in text for m in ("●", "◆", "▲", "×")) and "times the launch only" in text
    assert len(lines) <= 40
    small = offload_view.view(doc, 80, 14)  # one op only when there is no room for two plots
    assert len(small) <= 14 and sum("ms vs n" in t.plain for t in small) == 1


def test_listing_needs_no_torch_and_running_without_it_is_exit_4():
    path = str(ROOT / "workloads" / "offload.py")
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"runpy.run_path({path!r})"], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"sys.argv = ['offload.py', '--device', 'cpu']; runpy.run_path({path!r}, run_name='__main__')"],
                       capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 4 and len(lines) == 1 and "needs torch" in lines[0], r.stderr
