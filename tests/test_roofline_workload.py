"""workloads/roofline.py: the CPU sweep end to end, the GPU code path on a fake cupy, errors; and its lesson's
analyze() (gputop/lessons/roofline.py)."""

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fake_cupy
from fake_nvml import FakeNvml
from gputop.analysis.peaks import compute_peaks
from gputop.lessons import roofline as roofline_lesson
from gputop.measure import ceilings
from gputop.measure.probe import ClockProbe, gpu_context
from gputop.telemetry.nvml import Nvml
from gputop.workload.emit import Emitter
from gputop.workload.params import resolve_params
from gputop.workload.script import EXIT_MISSING_DEPENDENCY

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "workloads" / "roofline.py"
DATA = Path(__file__).parent / "data" / "static"


def _load():
    spec = importlib.util.spec_from_file_location("roofline_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


roofline = _load()


def _run(*args, env_extra=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=str(ROOT))


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _doc(events: list[dict], device: dict) -> dict:
    """The parts of a run document that analyze() reads, built from the event stream."""
    results = {}
    for e in events:
        if e["event"] == "result":
            results.update(e["data"])
    return {"device": device, "points": [e["data"] for e in events if e["event"] == "point"], "results": results}


# -- the CPU sweep, as CI runs it ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cpu_run():
    return _run("--events", "--quick", "--param", "device=cpu", "--param", "k=1,2,8,32")


@pytest.mark.slow
def test_cpu_sweep_event_stream(cpu_run):
    assert cpu_run.returncode == 0, cpu_run.stderr
    ev = _events(cpu_run.stdout)
    kinds = [e["event"] for e in ev]
    assert kinds[0] == "started" and kinds[-1] == "done" and ev[-1]["status"] == "ok"
    started = ev[0]
    assert started["workload"] == "roofline" and started["device"]["kind"] == "cpu"
    assert started["params"]["device"] == "cpu" and started["params"]["n"] == roofline.CPU["n"]
    assert started["params"]["runs"] == roofline.QUICK["runs"]  # --quick and the CPU sizes compose
    phases = [e["name"] for e in ev if e["event"] == "phase"]
    assert phases == ["ceilings", "sweep: seed kernel (mul+add)"]  # NumPy has no FMA: one variant by default
    pts = [e["data"] for e in ev if e["event"] == "point"]
    assert [p["k"] for p in pts] == [1, 2, 8, 32]
    for p in pts:
        assert p["variant"] == "mul+add" and p["ai"] == p["k"] / 4
        assert p["mean_ms"] > 0 and p["median_ms"] > 0 and p["rms_pct"] >= 0
        # GFLOP/s and GB/s are two views of the same time: their ratio is the intensity
        assert p["gflops"] / p["gbs"] == pytest.approx(p["ai"])
        assert p["sm_clock_mhz"] is None and p["power_w"] is None
    assert not [e for e in ev if e["event"] == "warning" and e["code"] == "wrong_result"]
    res = [e["data"] for e in ev if e["event"] == "result"]
    assert len(res) == 1
    roofs = res[0]["measured_roofs"]
    assert roofs["dram_bytes_per_s"] > 1e8 and roofs["fp32_flops"] > 1e8
    assert roofs["details"]["dram"]["buffer_bytes"] >= 64 << 20


@pytest.mark.slow
def test_cpu_sweep_analysis(cpu_run):
    doc = _doc(_events(cpu_run.stdout), {"kind": "cpu", "peaks": None, "static": None, "reported": None})
    roofline_lesson.analyze(doc)
    ridge = doc["results"]["ridge"]
    assert ridge["basis"] == "measured" and ridge["fp32"]["theoretical"] is None
    roofs = doc["results"]["measured_roofs"]
    ridge_fp32 = roofs["fp32_flops"] / roofs["dram_bytes_per_s"]
    assert ridge["fp32"]["measured"] == pytest.approx(ridge_fp32, rel=1e-3, abs=5e-4)  # rounded to 3 decimals
    for p in doc["points"]:
        assert p["bound"] in ("memory-bound", "compute-bound", "below both roofs")
        assert p["pct_roof_measured"] > 0 and p["pct_roof_theoretical"] is None
        assert p["hint"]
    v = doc["verdict"]
    assert v["class"] == "memory-bound" and v["advice"]
    assert "host roofs measured (no datasheet)" in v["evidence_text"]


def test_standalone_cpu_prints_a_table_and_the_seed_csv(tmp_path):
    csv = tmp_path / "roofline.csv"
    r = _run("--quick", "--device", "cpu", "--param", "k=1,4", "--param", "ceilings=false",
             "--param", f"csv={csv}")
    assert r.returncode == 0, r.stderr
    assert "== sweep: seed kernel (mul+add)" in r.stdout and "GFLOP/s" in r.stdout
    lines = csv.read_text().splitlines()
    assert lines[0] == "variant,k,ai,gflops,bandwidth,percent_peak"
    assert [ln.split(",")[1] for ln in lines[1:]] == ["1", "4"]


def test_help_works_without_gpu_libraries():
    r = _run("--help")
    assert r.returncode == 0
    assert "roofline" in r.stdout and "tensor_s" in r.stdout and "device" in r.stdout


def test_missing_cupy_is_one_line_and_exit_4():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("cupy is installed here")
    r = _run("--param", "device=cuda", "--quick")
    assert r.returncode == EXIT_MISSING_DEPENDENCY == 4
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "cupy" in err[0] and "gputop[" in err[0]
    assert "Traceback" not in r.stderr
    r = _run("--events", "--param", "device=cuda")
    ev = _events(r.stdout)
    assert r.returncode == 4
    assert [e["event"] for e in ev] == ["error", "done"] and ev[0]["kind"] == "missing_dependency"


def test_bad_block_is_a_usage_error():
    r = _run("--device", "cpu", "--param", "block=100")
    assert r.returncode == 2
    assert "block" in r.stderr and "Traceback" not in r.stderr


def test_quick_and_cpu_overrides_do_not_collide():
    # the runner resolves --quick and --device cpu in its own order; disjoint keys make the order moot
    assert not set(roofline.QUICK) & set(roofline.CPU)
    v = resolve_params(roofline.PARAMS, {"device": "cpu"}, {**roofline.QUICK, **roofline.CPU})
    assert v["n"] == 1 << 22 and v["runs"] == 3 and v["variants"] == "mul+add"


def test_expected_value():
    assert roofline.expected_value(1) == pytest.approx(1.01)
    assert roofline.expected_value(3) == pytest.approx(1.01 + 1.01 ** 2 + 1.01 ** 3)
    assert roofline.expected_value(1000) == pytest.approx(sum(1.01 ** j for j in range(1, 1001)))


# -- the GPU code path on a fake cupy -------------------------------------------------------------------
@pytest.fixture
def fake_cp(monkeypatch):
    cp = fake_cupy.make_module()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(roofline, "_module_cache", {})
    monkeypatch.setattr(ceilings, "_cache", {})
    fake_cupy.RawModule.instances = 0
    return cp


def _gpu_params(**kw):
    p = resolve_params(roofline.PARAMS, {}, None)
    p.update({"n": 4096, "k": [1, 5, 50], "warmup": 1, "runs": 2, "tensor_s": 0.0, **kw})
    return p


def test_gpu_path_on_fake_cupy(fake_cp):
    out = io.StringIO()
    emit = Emitter(events=True, stream=out)
    roofline.run(_gpu_params(), emit)
    emit.done()
    ev = _events(out.getvalue())
    assert ev[0]["event"] == "started" and ev[0]["device"]["kind"] == "cuda"
    assert ev[0]["device"]["name"] == "Fake GPU" and ev[0]["device"]["pci_bus_id"] == "0000:19:00.0"
    phases = [e["name"] for e in ev if e["event"] == "phase"]
    assert phases == ["ceilings", "sweep: seed kernel (mul+add)", "sweep: FMA (Horner)"]
    pts = [e["data"] for e in ev if e["event"] == "point"]
    assert [(p["variant"], p["k"]) for p in pts] == [("mul+add", 1), ("mul+add", 5), ("mul+add", 50),
                                                     ("fma", 1), ("fma", 5), ("fma", 50)]
    assert not [e for e in ev if e["event"] == "warning" and e["code"] in ("wrong_result", "small_buffer")]
    res = [e["data"] for e in ev if e["event"] == "result"]
    assert len(res) == 2 and list(res[0]) == ["measured_roofs"]  # the roofs as soon as measured, then all
    roofs = res[-1]["measured_roofs"]
    assert roofs == res[0]["measured_roofs"]
    dram = roofs["details"]["dram"]
    assert dram["buffer_bytes"] >= 8 * fake_cupy.L2_BYTES
    assert [t["kernel"] for t in dram["tried"]] == ["stream_read"] * len(ceilings.READ_BLOCKS_PER_SM) + ["stream_copy"] * 2
    assert dram["bytes_per_s"] == max(dram["read_bytes_per_s"], dram["copy_bytes_per_s"])
    l2 = roofs["details"]["l2"]
    assert l2["working_set_bytes"] <= fake_cupy.L2_BYTES // 4 and l2["iters"] % 8 == 0
    assert roofs["l2_bytes_per_s"] == l2["bytes_per_s"] > 0
    assert roofs["fp32_flops"] > 0 and roofs["details"]["fp32"]["iters"] >= 64
    assert roofs["fp64_flops"] > 0 and "fp64" in roofs["details"]["fp64"]["how"]
    assert "tensor_dense_flops" not in roofs  # tensor_s=0
    assert ev[-1] == {**ev[-1], "event": "done", "status": "ok"}


def test_kernels_compile_once_per_process(fake_cp):
    roofline.run(_gpu_params(ceilings=False, k=[2]), Emitter(events=True, stream=io.StringIO()))
    roofline.run(_gpu_params(ceilings=False, k=[3]), Emitter(events=True, stream=io.StringIO()))
    assert fake_cupy.RawModule.instances == 1


def test_stop_between_points_keeps_the_partial_result(fake_cp):
    out = io.StringIO()
    seen = []

    class StopAfterTwo(Emitter):
        def point(self, data):
            super().point(data)
            seen.append(data)
            if len(seen) == 2:
                self.stop_requested = True

    emit = StopAfterTwo(events=True, stream=out)
    roofline.run(_gpu_params(ceilings=False, k=[1, 2, 3, 4]), emit)
    ev = _events(out.getvalue())
    assert len([e for e in ev if e["event"] == "point"]) == 2
    assert [e["event"] for e in ev][-1] == "result"


def test_clock_probe_reads_nvml_through_the_choke_point():
    static = json.loads((DATA / "h100_sxm_published.json").read_text())["static"]
    nvml = Nvml(lib=FakeNvml(static))
    probe = ClockProbe(nvml, "handle0", period_s=0.001)
    with probe:
        sum(range(200000))
    s = probe.summary()
    assert s["samples"] >= 1 and s["sm_clock_mhz"] > 0 and s["power_w"] > 0
    assert isinstance(s["clock_reasons"], list)
    assert ClockProbe().summary()["sm_clock_mhz"] is None  # no NVML: n/a, not an error


def test_gpu_context_maps_to_nvml_and_fills_peaks(fake_cp):
    static = json.loads((DATA / "h100_sxm_published.json").read_text())["static"]
    info, probe = gpu_context(fake_cp, nvml=Nvml(lib=FakeNvml(static)))
    assert info["nvml_index"] == 0 and probe.available
    assert info["peaks"]["fp32_flops"] == pytest.approx(66.9e12, rel=1e-3)


# -- analyze() on a GPU run document, with the seed's published H100 figures ------------------------------
def _h100_doc(points, measured=None):
    static = json.loads((DATA / "h100_sxm_published.json").read_text())["static"]
    return {"device": {"kind": "cuda", "static": static, "peaks": compute_peaks(static), "reported": None},
            "points": points, "results": {"measured_roofs": measured or {}}}


def _pt(variant, k, gflops, clock=None):
    ai = k / 4
    return {"variant": variant, "k": k, "ai": ai, "gflops": gflops, "gbs": gflops / ai, "sm_clock_mhz": clock}


def test_analyze_h100_seed_figures():
    doc = _h100_doc([_pt("mul+add", 1, 560.0), _pt("mul+add", 1000, 29200.0, clock=1755),
                     _pt("fma", 1000, 58000.0, clock=1755)],
                    measured={"dram_bytes_per_s": 3.0e12, "fp32_flops": 60e12, "tensor_dense_flops": {"bf16": 700e12}})
    roofline_lesson.analyze(doc)
    k1, seed, fma = doc["points"]
    assert k1["bound"] == "memory-bound" and k1["pct_roof_theoretical"] == pytest.approx(66.8, abs=0.1)
    assert seed["bound"] == "compute-bound" and seed["pct_fp32_theoretical"] == pytest.approx(43.6, abs=0.1)
    assert seed["pct_ceiling"] == pytest.approx(97.3, abs=0.1)  # of half the measured 60 TFLOP/s
    assert seed["pct_fp32_theoretical_at_clock"] == pytest.approx(29.2 / (66.908 * 1755 / 1980) * 100, abs=0.1)
    assert fma["bound"] == "compute-bound" and "pct_ceiling" not in fma
    ridge = doc["results"]["ridge"]
    assert ridge["fp32"]["theoretical"] == pytest.approx(19.96, abs=0.01) and ridge["fp32"]["measured"] == 20.0
    assert ridge["tensor_bf16"]["measured"] == pytest.approx(233.3, abs=0.1)
    assert doc["results"]["points_above_roof"] == 0
    v = doc["verdict"]
    assert (v["class"], v["subclass"]) == ("memory-bound", "below 20 FLOP/byte, k < 80; compute-bound above")
    assert "Horner" in v["advice"] and "tensor cores" in v["advice"]


def test_analyze_flags_a_point_above_the_roof():
    doc = _h100_doc([_pt("fma", 1, 1000.0)])  # 4 TB/s at k=1 on a 3.35 TB/s GPU
    roofline_lesson.analyze(doc)
    p = doc["points"][0]
    assert p["flags"] and "above the theoretical memory roof" in p["flags"][0]
    assert doc["results"]["points_above_roof"] == 1
    v = doc["verdict"]
    assert any("above a roof" in n for n in v["notes"]) and v["evidence"]["points_above_a_roof"] == 1


def test_analyze_tolerates_an_empty_document():
    doc = {"device": {"kind": "cuda"}, "points": [], "results": {}}
    roofline_lesson.analyze(doc)
    assert doc["verdict"] is None and doc["results"]["ridge"]["basis"] is None


# -- on a real GPU ------------------------------------------------------------------------------------
def _have_gpu_stack() -> bool:
    return importlib.util.find_spec("cupy") is not None and Nvml().available()


@pytest.mark.gpu
@pytest.mark.skipif(not _have_gpu_stack(), reason="needs an NVIDIA GPU, NVML and cupy")
def test_gpu_sweep_real():
    r = _run("--events", "--quick", "--param", "k=1,100,1000", timeout=300)
    assert r.returncode == 0, r.stderr
    ev = _events(r.stdout)
    started = ev[0]["device"]
    doc = _doc(ev, {"kind": "cuda", "peaks": started["peaks"], "static": started["static"], "reported": started})
    roofline_lesson.analyze(doc)
    assert doc["results"]["points_above_roof"] == 0, [p["flags"] for p in doc["points"] if p["flags"]]
    best = {p["variant"]: p["gflops"] for p in doc["points"] if p["k"] == 1000}
    assert best["fma"] > best["mul+add"]
    assert all(p["sm_clock_mhz"] for p in doc["points"])


def test_tensor_phase_without_a_cuda_torch_is_one_log_line(fake_cp):
    """CI's torch is a CPU build: the tensor roofs are skipped with a reason, the run is still ok."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    out = io.StringIO()
    emit = Emitter(events=True, stream=out)
    roofline.run(_gpu_params(k=[1], tensor_s=0.1), emit)
    emit.done()
    ev = _events(out.getvalue())
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here")
    logs = [e["message"] for e in ev if e["event"] == "log"]
    assert any("no tensor roof" in m for m in logs), logs
    assert "ceilings: tensor (torch matmul)" in [e["name"] for e in ev if e["event"] == "phase"]
    roofs = [e["data"] for e in ev if e["event"] == "result"][-1]["measured_roofs"]
    assert "tensor_dense_flops" not in roofs and roofs["dram_bytes_per_s"] > 0
    assert ev[-1]["status"] == "ok"
