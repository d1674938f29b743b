"""workloads/cudagraphs.py: the CPU run (GPU modes skipped, MLP eager), the CuPy path on a fake cupy that
emulates kernels/cudagraphs.cu and stream capture, missing cupy, and the verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from gputop.lessons import cudagraphs as cudagraphs_lesson
from gputop.workload import Emitter
from test_workloads_common import (ROOT, check_verdict, cpu_document, env, gpu_telemetry, kinds, load, points,
                                   reanalyzed, run_events)

cg = load("cudagraphs")
KERNEL_PHASES = ["kernel time", "naive", "interleaved", "graph", "pipes"]


@pytest.fixture(scope="module")
def cpu_run():
    """The one CPU run of this module, through gputop: (exit code, run document, stderr)."""
    return cpu_document("cudagraphs")


def test_make_mlp_has_x_dense_layers():
    torch = pytest.importorskip("torch")
    m = cg.make_mlp(torch, 5, 32)
    linears = [x for x in m if isinstance(x, torch.nn.Linear)]
    assert len(linears) == 6 and linears[0].in_features == 784 and linears[-1].out_features == 10
    assert m(torch.zeros(3, 784)).shape == (3, 10)


@pytest.mark.slow
def test_cpu_run_skips_gpu_modes_and_times_the_eager_mlp(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok"
    pts = doc["points"]
    skipped = [p for p in pts if p.get("skipped")]
    assert [p["mode"] for p in skipped if p["part"] == "kernels"] == KERNEL_PHASES
    assert "skipped" in [w["code"] for w in doc["warnings"]]
    layers = doc["params"]["mlp_layers"]
    eager = [p for p in pts if p["part"] == "mlp" and p["mode"] == "eager"]
    assert [p["layers"] for p in eager] == layers and all(p["step_ms"] > 0 and p["steps"] >= 3 for p in eager)
    assert [p["layers"] for p in skipped if p["part"] == "mlp"] == layers  # the graph half, skipped
    assert [ph["name"] for ph in doc["phases"]] == [f"mlp X={x} eager" for x in layers]
    res = doc["results"]
    assert res["v100_reference_us_per_kernel"] == {"naive": 9.6, "interleaved": 3.8, "graph": 3.4}
    assert set(res["mlp"]) == {str(x) for x in layers} and all("graph_ms" not in v for v in res["mlp"].values())


@pytest.mark.slow
def test_cpu_run_analyze_judges_nothing_without_a_gpu(cpu_run):
    """On the CPU nothing is launched on a GPU: the eager MLP has no graph to be compared with."""
    doc = reanalyzed(cudagraphs_lesson, cpu_run[1])
    # what gputop's runner judged in the run is what the module's analyze says of the same data
    assert [ph["verdict"] for ph in doc["phases"]] == [ph["verdict"] for ph in cpu_run[1]["phases"]]
    assert doc["verdict"] == cpu_run[1]["verdict"]
    assert doc["phases"] and all(ph["verdict"] is None for ph in doc["phases"])
    assert doc["verdict"] is None and "skipped" in [w["code"] for w in doc["warnings"]]


@pytest.mark.slow
def test_gputop_run_json_on_cpu(cpu_run):
    rc, doc, err = cpu_run
    assert rc == 0, err
    assert doc["status"] == "ok" and doc["verdict"] is None
    assert "skipped" in [w["code"] for w in doc["warnings"]]


def test_missing_cupy_is_exit_4_with_one_line():
    try:
        import cupy  # noqa: F401
        pytest.skip("cupy is installed here")
    except ImportError:
        pass
    rc, events, err = run_events("cudagraphs")  # device cuda (the default) needs cupy first
    assert rc == 4
    assert [e["event"] for e in events] == ["error", "done"] and events[0]["kind"] == "missing_dependency"
    assert "needs cupy" in events[0]["message"] and "gputop[cuda12]" in events[0]["message"]
    r = subprocess.run([sys.executable, str(ROOT / "workloads" / "cudagraphs.py")], capture_output=True, text=True,
                       env=env(), cwd=ROOT, timeout=60)
    assert r.returncode == 4 and len(r.stderr.strip().splitlines()) == 1 and "needs cupy" in r.stderr


# -- the CuPy path on a fake cupy ---------------------------------------------------------------------------

class _Fake:
    """Just what kernel_modes calls: RawModule (kernels declared in the .cu emulated in NumPy), a stream whose
    launches are recorded instead of run while it captures, graphs that replay them, and events on a clock of its
    own (``now``): a kernel advances it by its run time (shortKernel 2 us, spinKernel 1000 cycles a microsecond) and
    nothing else does, so what the workload times comes out the same however busy the machine is (the test sets
    the workload's perf_counter to this clock)."""

    def __init__(self):
        self.now = 0.0  # seconds
        self.current: list = []
        self.ran = 0  # shortKernel executions
        self.graph_launches = 0
        fake = self

        class Kernel:
            def __init__(self, name):
                self.name = name

            def __call__(self, grid, block, args, **kw):
                (g,), (b,) = grid, block
                if self.name == "shortKernel":
                    dst, src, n = args
                    assert isinstance(n, np.int32), "n must be np.int32 (int in the kernel)"
                    m = min(int(n), g * b)

                    def op():
                        dst[:m] = (1.23 * src[:m].astype(np.float64) + 4.0).astype(np.float32)
                        fake.ran += 1
                        fake.now += 2e-6
                else:
                    (cycles,) = args
                    assert self.name == "spinKernel" and isinstance(cycles, np.int64)

                    def op():  # 1000 "cycles" per microsecond
                        fake.now += int(cycles) / 1e9
                stream = fake.current[-1] if fake.current else None
                if stream is not None and stream.ops is not None:
                    stream.ops.append(op)
                else:
                    op()

        class RawModule:
            def __init__(self, code=None, **kw):
                self.names = set(re.findall(r'extern "C" __global__ void (\w+)\s*\(', code))

            def get_function(self, name):
                assert name in self.names, name
                return Kernel(name)

        class Graph:
            def __init__(self, ops):
                self.ops = ops

            def launch(self, stream=None):
                fake.graph_launches += 1
                for op in self.ops:
                    op()

        class Stream:
            def __init__(self, non_blocking=False):
                self.ops = None

            def __enter__(self):
                fake.current.append(self)
                return self

            def __exit__(self, *a):
                fake.current.pop()

            def begin_capture(self):
                self.ops = []

            def end_capture(self):
                g, self.ops = Graph(self.ops), None
                return g

            def synchronize(self):
                assert self.ops is None, "synchronize during capture is illegal"

        class Event:
            def __init__(self, *a, **k):
                self.t = None

            def record(self, stream=None):
                assert stream is None or stream.ops is None, "no events inside the captured graphs here"
                self.t = fake.now

            @property
            def done(self):
                return True

            def synchronize(self):
                assert self.t is not None

        class _Arr(np.ndarray):
            def get(self):
                return np.asarray(self)

        cp = types.ModuleType("cupy")
        cp.__version__ = "0.0-fake"
        cp.float32 = np.float32
        cp.RawModule = RawModule
        cp.empty = lambda n, dtype=np.float32: np.empty(n, dtype).view(_Arr)
        cp.arange = lambda n, dtype=np.float32: np.arange(n, dtype=dtype).view(_Arr)
        cp.cuda = types.SimpleNamespace(Stream=Stream, Event=Event,
                                        get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
        self.module = cp


def test_kernel_modes_on_a_fake_cupy(monkeypatch, capsys):
    fake = _Fake()
    monkeypatch.setitem(sys.modules, "cupy", fake.module)
    monkeypatch.setattr(cg, "time", types.SimpleNamespace(perf_counter=lambda: fake.now))  # the fake GPU's clock
    p = {"n": 1000, "nstep": 3, "nkernel": 4, "threads": 128, "pipes": 2, "min_seconds": 0.0, "repeats": 2,
         "samples": 5, "mlp_layers": [2]}
    out = cg.kernel_modes(p, Emitter(events=True))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["name"] for e in kinds(events, "phase")] == KERNEL_PHASES
    assert "wrong_result" not in [e.get("code") for e in events]  # dst = 1.23 src + 4 was checked
    pts = points(events)
    assert [p_["mode"] for p_ in pts] == ["kernel alone", "naive", "interleaved", "graph", "pipes"]
    alone = pts[0]
    assert alone["spin_cycles_per_us"] == pytest.approx(1000, rel=0.3) and alone["spin_covered"]
    for q in pts[1:]:
        assert q["us_per_kernel"] > 0 and q["repeats"] >= 2 and q["kernel_us"] == alone["kernel_us"]
        assert q["overhead_us"] == pytest.approx(q["us_per_kernel"] - q["kernel_us"])
    per_run = {q["mode"]: q["kernels_per_run"] for q in pts[1:]}
    assert per_run == {"naive": 12, "interleaved": 12, "graph": 12, "pipes": 2 * 12}
    assert pts[3]["capture_ms"] >= 0 and pts[3]["v100_reference_us"] == 3.4 and "v100_reference_us" not in pts[4]
    # graph: warm-up + 2 repeats of 3 replays; pipes: warm-up + 2 repeats of 2 graphs x 3 steps
    assert fake.graph_launches == 3 * 3 + 3 * 2 * 3
    assert set(out["us_per_kernel"]) == set(cg.MODES) and out["graph_speedup_vs_naive"] > 0


def _gpu_doc():
    k = 2.1
    pts = [{"phase": "kernel time", "part": "kernels", "mode": "kernel alone", "kernel_us": k, "back_to_back_us": 2.6}]
    for mode, us in (("naive", 13.8), ("interleaved", 5.9), ("graph", 2.4), ("pipes", 2.3)):
        pts.append({"phase": mode, "part": "kernels", "mode": mode, "us_per_kernel": us, "kernel_us": k,
                    "overhead_us": us - k, "overhead_ratio": us / k,
                    **({"v100_reference_us": cg.V100_REFERENCE_US[mode]} if mode in cg.V100_REFERENCE_US else {})})
    for x, eager, graph in ((2, 0.31, 0.09), (32, 2.8, 0.55)):
        pts.append({"phase": f"mlp X={x} eager", "part": "mlp", "layers": x, "mode": "eager", "step_ms": eager,
                    "batch": 32})
        pts.append({"phase": f"mlp X={x} graph", "part": "mlp", "layers": x, "mode": "graph", "step_ms": graph,
                    "batch": 32, "speedup_vs_eager": eager / graph})
    tel = {"naive": gpu_telemetry(util_gpu_pct=18.0, sm_active_pct=2.0), "graph": gpu_telemetry(util_gpu_pct=99.0)}
    return {"phases": [{"name": q["phase"], "telemetry": tel.get(q["phase"]), "verdict": None} for q in pts],
            "points": pts, "results": {}, "warnings": []}


def test_analyze_h100_like_run():
    doc = cudagraphs_lesson.analyze(_gpu_doc())
    cls = {ph["name"]: (ph["verdict"]["class"], ph["verdict"]["subclass"]) for ph in doc["phases"]}
    launch, hidden = ("latency-bound", "launch overhead"), ("compute-bound", "launch overhead hidden")
    assert cls == {"kernel time": ("compute-bound", "kernel alone"), "naive": launch, "interleaved": launch,
                   "graph": hidden, "pipes": hidden,
                   "mlp X=2 eager": launch, "mlp X=2 graph": ("compute-bound", "graph speedup"),
                   "mlp X=32 eager": launch, "mlp X=32 graph": ("compute-bound", "graph speedup")}
    for ph in doc["phases"]:
        check_verdict(ph["verdict"])
    naive = doc["phases"][1]["verdict"]
    assert "6.6x" in naive["evidence_text"] and "V100 figure: 9.6" in naive["evidence_text"]
    assert naive["evidence"]["overhead_ratio"] == pytest.approx(13.8 / 2.1)
    assert "kernel-active 18%" in naive["evidence_text"]
    v = doc["verdict"]
    check_verdict(v)
    assert (v["class"], v["subclass"]) == ("latency-bound", "launch overhead")
    assert "naive 13.80, interleaved 5.90, graph 2.40, pipes 2.30" in v["evidence_text"]
    assert "'mlp X=32' as a graph 0.550 ms per step, 5.09x eager" in v["evidence_text"]
    assert v["evidence"]["mlp32_speedup_vs_eager"] == pytest.approx(2.8 / 0.55)
    assert any("V100 reference: 9.6 / 3.8 / 3.4" in n for n in v["notes"])


def test_analyze_kernel_bound_when_kernels_are_long():
    doc = _gpu_doc()
    for q in doc["points"]:
        if q["part"] == "kernels" and q["mode"] != "kernel alone":
            q["kernel_us"], q["overhead_ratio"] = 40.0, q["us_per_kernel"] / 40.0
        if q.get("speedup_vs_eager"):
            q["speedup_vs_eager"] = 1.05
    doc = cudagraphs_lesson.analyze(doc)
    hidden = ("compute-bound", "launch overhead hidden")
    assert (doc["verdict"]["class"], doc["verdict"]["subclass"]) == hidden
    assert (doc["phases"][1]["verdict"]["class"], doc["phases"][1]["verdict"]["subclass"]) == hidden
    assert doc["phases"][-1]["verdict"]["subclass"] == "no graph gain"
    assert doc["phases"][-2]["verdict"]["subclass"] == "launch overhead hidden"  # its eager step
