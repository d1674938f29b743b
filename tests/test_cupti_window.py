"""CUPTI windows for CUDA programs without PyTorch (issue 27: CuPy, JAX, Numba...), on a CPU machine.

The pure part (gputop/runner/profile_loader/cupti_window.py: activity records to the loader's window) on records
built by construction; the dispatch and its one-line answers on real child processes under a real gputop (on
tests/fake_pynvml). CUPTI itself needs a GPU: here the child's ``cupti`` is a stand-in package written by the
test (the few calls of cupti-python's activity API the window makes, delivering constructed records at the
flush), so the loader's thread, exit handling and the document are exercised for real. The real CUPTI is
checked on a GPU by bench/gpu/cupti_check.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from gputop.analysis.attribution import attribute
from gputop.runner.profile_loader import cupti_window as cw
from gputop.session.profiling import NO_LOADER

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text())
PY = sys.executable
FAKE_PYNVML = ROOT / "tests" / "fake_pynvml"
MS = 1_000_000  # ns

KINDS = {10: "kernel", 1: "memcpy", 2: "memset"}
COPIES = {1: "HTOD", 2: "DTOH", 3: "DTOD"}


def rec(kind, start_ms, end_ms, name=None, copy_kind=None):
    return SimpleNamespace(kind=kind, name=name, start=int(start_ms * MS), end=int(end_ms * MS),
                           copy_kind=copy_kind, bytes=4096)


# -- pure ------------------------------------------------------------------------------------------------
def test_records_become_rows_named_as_torch_profiler_names_copies():
    assert cw.row(rec(10, 1, 2, name="cupy_add__float32"), KINDS, COPIES) == ("cupy_add__float32", MS, 2 * MS)
    assert cw.row(rec(1, 0, 1, copy_kind=1), KINDS, COPIES)[0] == "Memcpy HtoD"
    assert cw.row(rec(1, 0, 1, copy_kind=2), KINDS, COPIES)[0] == "Memcpy DtoH"
    assert cw.row(rec(1, 0, 1, copy_kind=9), KINDS, COPIES)[0] == "Memcpy UNKNOWN"
    assert cw.row(rec(2, 0, 1), KINDS, COPIES)[0] == "Memset"
    assert cw.row(rec(42, 0, 1, name="x"), KINDS, COPIES) is None  # a kind the window did not ask for


def test_summary_groups_by_name_and_the_busy_time_is_the_union_of_intervals():
    rows = [cw.row(r, KINDS, COPIES) for r in (
        rec(10, 0, 200, "sm90_xmma_gemm_f32f32"), rec(10, 100, 300, "sm90_xmma_gemm_f32f32"),  # overlap 100 ms
        rec(10, 400, 500, "cupy_multiply__float32"), rec(1, 500, 600, copy_kind=1), rec(2, 550, 580),
        rec(10, 700, 0, "cupy_sum"))]  # no end: still running at the flush, left out
    w = cw.summary(rows, 0, 1000 * MS)
    assert w["profiler"] == "cupti" and w["status"] == "ok" and w["ops"] == [] and w["torch"] is None
    k = {x["name"]: x for x in w["kernels"]}
    assert k["sm90_xmma_gemm_f32f32"] == {"name": "sm90_xmma_gemm_f32f32", "count": 2, "device_us": 400_000.0}
    assert k["Memcpy HtoD"]["count"] == 1 and k["Memset"]["device_us"] == 30_000.0
    assert "cupy_sum" not in k
    assert w["kernels"][0]["name"] == "sm90_xmma_gemm_f32f32"  # most device time first
    assert w["gpu_busy_s"] == 0.5 and w["wall_s"] == 1.0 and w["gpu_lag_s"] == 0.0

    a = attribute(w)  # gputop.analysis.attribution takes it unchanged
    cats = {c["category"]: c for c in a["categories"]}
    assert cats["GEMM/conv"]["us"] == 400_000.0 and cats["memcpy/memset"]["count"] == 2
    assert a["basis"] == "kernels" and a["gpu_busy_share"] == 0.5 and a["top_ops"] == []


def test_cupy_and_xla_kernel_names_fall_in_their_categories():
    """Names as CuPy (cupy/_core/_kernel.pyx: ``<ufunc name>__<dtypes>``; reductions ``cupy_sum``...) and XLA
    (fusion kinds) give their kernels."""
    from gputop.analysis.attribution import category

    for name, cat in (("cupy_multiply__float32_float32_float32", "elementwise"), ("cupy_copy__float32_float32",
                      "elementwise"), ("cupy_maximum__float32_float32_float32", "elementwise"),
                      ("cupy_sum", "reduction"), ("cupy_sum__float32", "reduction"), ("cupy_nanmax", "reduction"),
                      ("cub::DeviceReduceKernel", "reduction"), ("loop_multiply_fusion", "elementwise"),
                      ("loop_convert_fusion", "elementwise"), ("wrapped_add", "elementwise"),
                      ("input_reduce_fusion_1", "reduction"), ("gemm_fusion_dot_1", "GEMM/conv"),
                      ("sm90_xmma_gemm_bf16bf16_bf16f32", "GEMM/conv"), ("Memcpy HtoD", "memcpy/memset")):
        assert category(name) == cat, name


def test_the_gpu_side_of_the_window_follows_the_launch_queue():
    """Kernels launched in the host window run up to 200 ms after it ends: the GPU window is the host window moved
    by that lag (what ran before it, launched before the window, is not in the records)."""
    rows = [("k", (250 + 100 * i) * MS, (350 + 100 * i) * MS) for i in range(10)]  # back to back, 250..1250 ms
    w = cw.summary(rows, 0, 1000 * MS)
    assert w["gpu_lag_s"] == 0.25 and w["host_wall_s"] == 1.0
    assert w["wall_s"] == 1.0 and w["gpu_busy_s"] == 1.0  # a GPU busy throughout, not 75% busy
    idle = cw.summary([("k", 0, 100 * MS)], 0, 1000 * MS)  # a host-bound program: the idle time counts
    assert idle["wall_s"] == 1.0 and idle["gpu_busy_s"] == 0.1
    empty = cw.summary([], 0, 2000 * MS)
    assert empty["kernels"] == [] and empty["gpu_busy_s"] == 0.0 and empty["wall_s"] == 2.0


def test_which_requests_go_to_cupti(monkeypatch):
    """At once when the program runs CUDA without torch (a CUDA module imported, or no torch installed); a
    program that imports torch never; otherwise the loader first waits for torch."""
    for name in ("torch", *cw.CUDA_MODULES):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(cw._FOUND, "torch", True)
    assert not cw.wanted()  # torch installed, nothing imported yet: it may come
    monkeypatch.setitem(sys.modules, "jax", SimpleNamespace())
    assert cw.wanted()
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace())
    assert not cw.wanted()
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.delitem(sys.modules, "jax")
    monkeypatch.setitem(cw._FOUND, "torch", False)
    assert cw.wanted()  # no torch in the environment: nothing to wait for
    monkeypatch.setitem(cw._FOUND, "cupti", False)
    assert cw.exit_reason() == cw.no_cupti() and cw.answer(1.0)["reason"] == cw.no_cupti()
    monkeypatch.setitem(cw._FOUND, "cupti", True)
    assert cw.exit_reason() == cw.ENDED


# -- real children under gputop ----------------------------------------------------------------------------
# A program that runs "CUDA without torch" (a cupy module of its own, so the loader sends the request to CUPTI)
# and ends once its window is written (or after EXIT_AFTER seconds past the request), with its own exit code.
PROG = textwrap.dedent("""
    import glob, os, sys, time, types
    sys.modules["cupy"] = types.ModuleType("cupy")
    folder, end = os.path.join(os.environ["GPUTOP_PROFILE_DIR"], str(os.getpid())), time.time() + 40
    while not glob.glob(folder + "/request-*") and time.time() < end:
        time.sleep(0.02)
    stop = time.time() + float(os.environ.get("EXIT_AFTER", "40"))
    while not glob.glob(folder + "/window-*") and time.time() < min(end, stop):
        time.sleep(0.02)
    print("cupy program done")
    sys.exit(7)
""")

# The few calls of cupti-python's activity API that the window makes; the flush delivers constructed records.
FAKE_CUPTI = textwrap.dedent("""
    import enum, os, time

    class cuptiError(Exception):
        def __init__(self, status):
            super().__init__(status)
            self.status = status

    class Result(enum.IntEnum):
        SUCCESS = 0
        ERROR_INVALID_PARAMETER = 1
        ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39

    class ActivityKind(enum.IntEnum):
        MEMCPY = 1
        MEMSET = 2
        KERNEL = 3
        CONCURRENT_KERNEL = 10

    class ActivityMemcpyKind(enum.IntEnum):
        UNKNOWN = 0
        HTOD = 1
        DTOH = 2

    class SubscriberParams:
        ptr = 0
        struct_size = subscriber_name = old_subscriber_name = None

    SUBSCRIBER_PARAMS_SIZE = 16
    _state = {"enabled": set(), "t0": None}

    class Record:
        def __init__(self, kind, name, a_ms, b_ms, copy_kind=0):
            t0 = _state["t0"]
            self.kind, self.name, self.copy_kind = kind, name, copy_kind
            self.start, self.end = t0 + int(a_ms * 1e6), t0 + int(b_ms * 1e6)

    def subscribe_v2(callback, userdata, ptr):
        if os.environ.get("FAKE_CUPTI_BUSY"):
            raise cuptiError(Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        if os.environ.get("FAKE_CUPTI_V2_INVALID"):
            raise cuptiError(Result.ERROR_INVALID_PARAMETER)
        return 1

    def subscribe(callback, userdata):
        if os.environ.get("FAKE_CUPTI_V1_INVALID"):
            raise cuptiError(Result.ERROR_INVALID_PARAMETER)
        return 2

    def unsubscribe(handle):
        pass

    def activity_register_callbacks(requested, completed):
        _state["requested"], _state["completed"] = requested, completed

    def activity_enable(kind):
        _state["enabled"].add(kind)
        _state["t0"] = _state["t0"] or time.monotonic_ns()

    def activity_disable(kind):
        _state["enabled"].discard(kind)

    def get_timestamp():
        return time.monotonic_ns()

    def activity_flush_all(flag):
        assert _state["requested"]()[0] > 0
        _state["completed"]([Record(ActivityKind.CONCURRENT_KERNEL, "sm90_xmma_gemm_f32f32", 0, 200),
                             Record(ActivityKind.CONCURRENT_KERNEL, "sm90_xmma_gemm_f32f32", 100, 300),
                             Record(ActivityKind.CONCURRENT_KERNEL, "cupy_multiply__float32", 400, 500),
                             Record(ActivityKind.MEMCPY, None, 500, 600, ActivityMemcpyKind.HTOD),
                             Record(ActivityKind.MEMSET, None, 550, 580)])
""")


def run_gputop(tmp_path, *args, fake_cupti=False, env_extra=None, command=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "CUDA_INJECTION", "NSYS_"))
           and k != "PYTHONPATH"}
    path = [str(FAKE_PYNVML), str(ROOT)]
    if fake_cupti:
        (tmp_path / "site" / "cupti").mkdir(parents=True)
        (tmp_path / "site" / "cupti" / "__init__.py").write_text("")
        (tmp_path / "site" / "cupti" / "cupti.py").write_text(FAKE_CUPTI)
        path.append(str(tmp_path / "site"))
    env.update({"PYTHONPATH": os.pathsep.join(path), "GPUTOP_PROFILE_AT": "0",
                "GPUTOP_PROFILE_DIR": str(tmp_path / "pbase"), **(env_extra or {})})
    (tmp_path / "prog.py").write_text(PROG)
    return subprocess.run([PY, "-m", "gputop", "--json", "--run", "--profile", *args, "--",
                           *(command or [PY, "prog.py"])], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=90)


def window_of(r):
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    return doc, doc["attribution"]["windows"][0]


@pytest.mark.slow
def test_a_cuda_program_without_torch_gets_a_cupti_window(tmp_path):
    r = run_gputop(tmp_path, "--profile-seconds", "1", fake_cupti=True)
    assert r.returncode == 7, r.stderr
    assert "cupy program done" in r.stderr  # --json: the command's stdout on stderr, unchanged
    doc, w = window_of(r)
    assert w["status"] == "ok" and w["basis"] == "kernels" and w["torch"] is None and w["profiler"] == "cupti"
    assert w["gpu_busy_s"] == 0.5 and 1.0 <= w["wall_s"] < 5
    cats = {c["category"]: c for c in w["categories"]}
    assert cats["GEMM/conv"]["us"] == 400_000.0 and cats["memcpy/memset"]["count"] == 2
    top = {k["name"]: k for k in w["top_kernels"]}
    assert top["sm90_xmma_gemm_f32f32"]["count"] == 2 and top["Memcpy HtoD"]["category"] == "memcpy/memset"
    assert doc["attribution"]["why_none"] is None


@pytest.mark.slow
def test_a_program_that_exits_during_its_cupti_window_still_gets_it(tmp_path):
    r = run_gputop(tmp_path, "--profile-seconds", "30", fake_cupti=True, env_extra={"EXIT_AFTER": "1.5"})
    assert r.returncode == 7, r.stderr
    _doc, w = window_of(r)
    assert w["status"] == "ok" and w["wall_s"] < 10  # ended by the exit, not after 30 s
    assert w["gpu_busy_s"] == 0.5


@pytest.mark.slow
def test_a_busy_cupti_is_one_line_and_the_program_goes_on(tmp_path):
    r = run_gputop(tmp_path, fake_cupti=True, env_extra={"FAKE_CUPTI_BUSY": "1"})
    assert r.returncode == 7 and "cupy program done" in r.stderr
    doc, w = window_of(r)
    assert w["status"] == "unavailable" and w["why_none"].startswith("CUPTI is busy")
    assert "MULTIPLE_SUBSCRIBERS" in w["why_none"] and "\n" not in w["why_none"]
    assert f"gputop: --profile: {w['why_none']}" in r.stderr  # --json: the line on stderr too

    (tmp_path / "nsight").mkdir()
    r = run_gputop(tmp_path / "nsight", fake_cupti=True,
                   env_extra={"CUDA_INJECTION64_PATH": "/nonexistent/libinjection.so"})
    assert r.returncode == 7
    _doc, w = window_of(r)
    assert w["why_none"].startswith("CUPTI is busy: CUDA_INJECTION64_PATH is set")


@pytest.mark.slow
def test_without_cupti_python_the_line_says_what_to_install(tmp_path):
    r = run_gputop(tmp_path, env_extra={"EXIT_AFTER": "20"})
    assert r.returncode == 7 and "cupy program done" in r.stderr
    doc, w = window_of(r)
    assert w["status"] == "unavailable" and w["why_none"] == cw.no_cupti(python=PY)  # (no driver here)
    assert f"{PY} -m pip install 'cupti-python'" in doc["attribution"]["why_none"]
    assert "\n" not in w["why_none"] and f"gputop: --profile: {w['why_none']}" in r.stderr  # one line, said


def test_the_cupti_line_names_the_drivers_cuda_and_the_programs_python():
    """On the 2026-11-27 H100 image (driver 580: CUDA 13.0, CuPy 14.2, no cupti-python) the line said to pip install
    cupti-python; which one, and into which Python, it now says."""
    line = cw.no_cupti((13, 0), "/opt/torch/.venv/bin/python3")
    assert line == ("the program has not imported torch and has no cupti-python in its environment: "
                    "/opt/torch/.venv/bin/python3 -m pip install 'cupti-python==13.*' (the driver runs CUDA 13.0), "
                    "for CUDA kernels of CuPy, JAX, Numba... without PyTorch")
    assert "'cupti-python==12.*' (the driver runs CUDA 12.8)" in cw.no_cupti((12, 8), "python3")
    assert cw.driver_cuda() is None or cw.driver_cuda() >= (11, 0)  # this machine's driver, where it has one


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler for a stand-in libcuda")
def test_the_drivers_cuda_is_read_from_libcuda_in_the_programs_process(tmp_path):
    """A libcuda.so.1 of the test's own (cuDriverGetVersion says 12080) first on the child's library path: the
    loader's driver_cuda reads (12, 8) from it, as it reads a driver's in a CUDA program."""
    (tmp_path / "cuda.c").write_text("int cuDriverGetVersion(int *v) { *v = 12080; return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "cuda.c")],
                   check=True, timeout=60)
    code = "from gputop.runner.profile_loader import cupti_window as cw; print(cw.driver_cuda(), cw.no_cupti())"
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env=dict(os.environ, LD_LIBRARY_PATH=str(tmp_path), PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("(12, 8) ") and "'cupti-python==12.*' (the driver runs CUDA 12.8)" in r.stdout


@pytest.mark.slow
def test_a_command_that_is_not_python_says_profile_is_for_python_only(tmp_path):
    """No window asked for (no GPU verdict here) or one asked: the same one line, in the document and on stderr."""
    for extra in ({"GPUTOP_PROFILE_AT": "-1"}, {}):
        r = run_gputop(tmp_path, env_extra=extra, command=["sh", "-c", "sleep 0.5; echo shell; exit 5"])
        assert r.returncode == 5 and "shell" in r.stderr
        doc = json.loads(r.stdout)
        jsonschema.validate(doc, SCHEMA)
        assert doc["attribution"]["why_none"] == NO_LOADER
        assert "Python programs only" in NO_LOADER and f"gputop: --profile: {NO_LOADER}" in r.stderr


@pytest.mark.slow
def test_a_named_subscriber_refused_falls_back_to_an_unnamed_one(tmp_path):
    """CUPTI's named subscriber (cuptiSubscribe_v2) refused with another error than "busy" (ERROR_INVALID_PARAMETER:
    a CuPy program on driver 580 with CUPTI 13.5): the window is recorded through cuptiSubscribe; both refused:
    one line naming both errors."""
    r = run_gputop(tmp_path, fake_cupti=True, env_extra={"FAKE_CUPTI_V2_INVALID": "1"})
    assert r.returncode == 7, r.stderr
    _doc, w = window_of(r)
    assert w["status"] == "ok" and w["gpu_busy_s"] == 0.5
    (tmp_path / "both").mkdir()
    r = run_gputop(tmp_path / "both", fake_cupti=True,
                   env_extra={"FAKE_CUPTI_V2_INVALID": "1", "FAKE_CUPTI_V1_INVALID": "1"})
    _doc, w = window_of(r)
    assert w["status"] == "unavailable" and w["why_none"].startswith("CUPTI refused a subscriber: ")
    assert w["why_none"].count("INVALID_PARAMETER") == 2 and "\n" not in w["why_none"]

