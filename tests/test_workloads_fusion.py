"""workloads/fusion.py: eager and torch.jit.script on the CPU end to end through gputop (tiny sizes), a real
torch.compile on the CPU in a test of its own (one function, one size: a cold Inductor compile runs g++ some
nine times -- vector-ISA probes, the precompiled header, the kernel -- whatever the function or size), the
bytes model, the verdicts and the bars view."""

from __future__ import annotations

import subprocess
import sys

import pytest

import lesson_docs
from gputop.lessons import fusion as fusion_lesson
from gputop.tui.results.lessons import fusion as fusion_view
from gputop.tui.results.view import results_lines
from gputop.workload import ParamError
from test_workloads_common import ROOT, check_verdict, env, load, run_gputop

fusion = load("fusion")


@pytest.fixture(scope="module")
def cpu_doc():
    pytest.importorskip("torch")
    rc, doc, err = run_gputop("fusion", "--device", "cpu", "--quick", "--param", "variants=eager,jit", timeout=300)
    assert rc == 0, err
    return doc


def test_module_shape_and_lists():
    assert fusion.NAME == "fusion" and "torch" in fusion.NEEDS and callable(fusion_lesson.analyze)
    names = {p.name for p in fusion.PARAMS}
    assert "device" in names and set(fusion.QUICK) <= names and set(fusion.CPU) <= names
    assert fusion.parse_list("variants", "jit, eager", fusion.VARIANTS) == ["jit", "eager"]
    with pytest.raises(ParamError, match="'variants'"):
        fusion.parse_list("variants", "eager,xla", fusion.VARIANTS)


@pytest.mark.slow
def test_bytes_model_counts_each_eager_op_once():
    torch = pytest.importorskip("torch")
    fns = fusion.make_functions(torch)
    x = torch.rand(1000)
    assert fusion.bytes_per_call(torch, fns["nested_sin"], x) == 4 * 2 * 4 * 1000  # 4 sines, read + write each
    # gelu: x*0.5, x/c, erf, 1+, and the product of two tensors (two reads, one write)
    assert fusion.bytes_per_call(torch, fns["gelu"], x) == (4 * 2 + 3) * 4 * 1000
    assert torch.allclose(fns["gelu"](x), torch.nn.functional.gelu(x), atol=1e-4)


@pytest.mark.slow
def test_cpu_run_eager_and_jit(cpu_doc):
    doc = cpu_doc
    assert doc["status"] == "ok" and doc["device"]["kind"] == "cpu"
    sizes = sorted(doc["params"]["sizes_log2"])
    by = {}
    for q in doc["points"]:
        by.setdefault(q["phase"], []).append(q)
    assert set(by) == {f"{f} {v}" for f in ("nested_sin", "gelu") for v in ("eager", "jit")}
    assert not [w for w in doc["warnings"] if w["code"] == "analyze_failed"], doc["warnings"]
    for name, pts in by.items():
        assert [q["log2"] for q in pts] == sizes and not pts[0].get("skipped")
        for q in pts:
            assert q["ms"] > 0 and q["kernels_per_call"] >= 1 and q["first_call_s"] > 0
            assert q["min_bytes"] == 8 * q["n"]
            if not name.endswith("eager"):
                assert q["speedup_vs_eager"] > 0
    assert by["nested_sin eager"][0]["kernels_per_call"] == 4 and by["gelu eager"][0]["kernels_per_call"] == 5
    assert by["nested_sin eager"][0]["bytes_moved"] == 32 * by["nested_sin eager"][0]["n"]
    # TorchScript does not fuse on the CPU: as many operators as eager, and so as many bytes
    assert by["nested_sin jit"][0]["kernels_per_call"] == 4 and by["nested_sin jit"][0]["bytes_moved"] == 32 * by["nested_sin jit"][0]["n"]
    # no DRAM roof to judge a CPU's bandwidth against: no verdicts rather than made-up ones
    assert doc["verdict"] is None and all(p["verdict"] is None for p in doc["phases"])
    text = "\n".join(t.plain for t in results_lines(doc, 110, 30))
    assert "nested_sin eager" in text and "4 kernels" in text and "x eager" in text


@pytest.mark.slow
def test_cpu_torch_compile_fuses_the_nested_sine(tmp_path, monkeypatch):
    """A real, cold torch.compile on the CPU (Inductor's C++ backend): the four sines become one compiled graph
    that reads x once and writes once. Its own Inductor cache (cold every time, so its cost does not depend on
    what ran before) and one compile thread (no pool of compile workers to start, or to outlive the run)."""
    pytest.importorskip("torch")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    rc, doc, err = run_gputop("fusion", "--device", "cpu", "--param", "functions=nested_sin",
                              "--param", "variants=compile", "--param", "sizes_log2=12", timeout=300)
    assert rc == 0, err
    by = {q["phase"]: q for q in doc["points"]}
    assert set(by) == {"nested_sin eager", "nested_sin compile"}
    q = by["nested_sin compile"]
    if q.get("skipped"):  # torch.compile on the CPU needs a C++ compiler: reported skipped, with the reason
        assert q["reason"] and any("skipped" in w["message"] for w in doc["warnings"])
        pytest.skip(f"torch.compile could not build here: {q['reason']}")
    assert q["n"] == 1 << 12 and q["ms"] > 0 and q["first_call_s"] > 0 and q["speedup_vs_eager"] > 0
    assert q["kernels_per_call"] == 1 and q["bytes_moved"] == 8 * q["n"]  # one compiled graph for four sines
    assert by["nested_sin eager"]["kernels_per_call"] == 4
    assert doc["results"]["first_call_s"]["nested_sin compile"] > doc["results"]["first_call_s"]["nested_sin eager"]


def test_analyze_gpu_shaped_document():
    doc = fusion_lesson.analyze(lesson_docs.fusion())
    by = {p["name"]: p["verdict"] for p in doc["phases"]}
    for v in by.values():
        check_verdict(v)
    assert (by["nested_sin eager"]["class"], by["nested_sin eager"]["subclass"]) == ("memory-bound", "unfused")
    assert (by["nested_sin compile"]["class"], by["nested_sin compile"]["subclass"]) == ("memory-bound", "fused")
    assert by["nested_sin compile"]["evidence"]["kernels_per_call"] == 1
    assert by["nested_sin compile"]["evidence"]["dram_roof_fraction"] > 0.5
    v = doc["verdict"]
    check_verdict(v)
    assert (v["class"], v["subclass"]) == ("memory-bound", "fusion speedup")
    assert v["evidence"]["nested_sin_speedup"] > 3.5 and "still memory-bound" in v["evidence_text"]


def test_slow_fused_kernels_are_math_bound():
    doc = fusion_lesson.analyze(lesson_docs.fusion(fused_bps=1.0e12))  # fused kernels at 30% of the roof
    v = next(p["verdict"] for p in doc["phases"] if p["name"] == "nested_sin compile")
    assert v["class"] == "compute-bound" and v["subclass"] == "fused"
    assert doc["verdict"]["class"] == "compute-bound" and "the math sets the pace" in doc["verdict"]["evidence_text"]


def test_bars_view_shows_speedups_and_skips():
    doc = lesson_docs.fusion()
    doc["points"].append({"phase": "gelu jit", "fn": "gelu", "variant": "jit", "skipped": True,
                          "reason": "UnsupportedNodeError: something"})
    doc["points"] = [q for q in doc["points"] if not (q["phase"] == "gelu jit" and not q.get("skipped"))]
    lines = [t.plain for t in fusion_view.view(doc, 110, 20)]
    text = "\n".join(lines)
    assert "DRAM roof 3.35 TB/s" in text and "4.00x eager" in text and "skipped: UnsupportedNodeError" in text
    row = next(t for t in lines if t.startswith("nested_sin eager"))
    assert "4 kernels" in row and "% of roof" in row


def test_a_variant_this_torch_cannot_build_is_skipped_with_its_reason(monkeypatch):
    """As without a C++ compiler for torch.compile on the CPU: the variant is reported skipped, never faked."""
    import io
    import json

    pytest.importorskip("torch")
    from gputop.workload import Emitter

    real = fusion.build

    def build(torch, fn, variant):
        if variant == "compile":
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx")
        return real(torch, fn, variant)

    monkeypatch.setattr(fusion, "build", build)
    out = io.StringIO()
    fusion.run({"device": "cpu", "functions": "nested_sin", "variants": "eager,compile", "sizes_log2": [8],
                "target_ms": 1.0, "max_reps": 3}, Emitter(events=True, stream=out))
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    pts = [e["data"] for e in events if e["event"] == "point"]
    skipped = [q for q in pts if q.get("skipped")]
    assert len(skipped) == 1 and skipped[0]["variant"] == "compile" and "C++ compiler" in skipped[0]["reason"]
    assert any(e["event"] == "warning" and e["code"] == "skipped" for e in events)
    assert [q["variant"] for q in pts if not q.get("skipped")] == ["eager"]
    lines = [t.plain for t in fusion_view.view({"points": pts, "device": {"kind": "cpu"}}, 100, 10)]
    assert any(ln.startswith("nested_sin compile") and "skipped: RuntimeError" in ln for ln in lines)


def test_listing_needs_no_torch_and_running_without_it_is_exit_4():
    path = str(ROOT / "workloads" / "fusion.py")
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"runpy.run_path({path!r})"], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import runpy; "
                        f"sys.argv = ['fusion.py', '--device', 'cpu']; runpy.run_path({path!r}, run_name='__main__')"],
                       capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 4 and len(lines) == 1 and "needs torch" in lines[0], r.stderr
