"""The allreduce workload on the CPU: real torchrun, 2 gloo ranks, through gputop (as CI runs it).

One quick run gives the document the first tests read; two more stop a run (gputop's stop in the DDP
phase, and a SIGKILL of gputop) and check that torchrun and both of its ranks (each in a session of its
own) are gone with gputop. A failed run's assertion shows the stderr of torchrun and its ranks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import jsonschema
import psutil
import pytest

from tests.fault_util import PY, ROOT, Gputop, Proc, assert_none_alive, env, one_json, reaper, wait_until  # noqa: F401

pytest.importorskip("torch")

RUN_SCHEMA = json.loads((ROOT / "gputop" / "schema" / "run.schema.json").read_text())
WORKLOAD = ROOT / "workloads" / "allreduce.py"


def _cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


SEVERAL_GPUS = _cuda_gpus() >= 2
fewer_than_two = pytest.mark.skipif(SEVERAL_GPUS, reason="this machine has 2+ GPUs: the workload runs for real")


def explain(doc: dict | None, stderr: str = "") -> str:
    """What a failed run says about itself: its errors and warnings, each with the stderr of torchrun and
    its ranks that gputop kept (a rank other than 0 speaks only there)."""
    out = [stderr[-3000:]] if stderr else []
    for e in (doc or {}).get("errors") or []:
        out.append(f"error {e.get('kind')}: {e.get('message')}\n{(e.get('detail') or '')[-4000:]}")
    out += [f"warning {w.get('code')}: {w.get('message')}" for w in (doc or {}).get("warnings") or []]
    return "\n".join(out)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    folder = tmp_path_factory.mktemp("allreduce")
    g = Gputop(["--run", "allreduce", "--device", "cpu", "--quick", "--json"], folder, env())
    try:
        code = g.wait(180)
    finally:
        g.kill()
    try:
        d = json.loads(g.stdout)
    except ValueError:
        d = None
    assert code == 0, explain(d, g.stderr)
    return one_json(g.stdout, "gputop --run allreduce --json")


@pytest.mark.slow
def test_the_cpu_run_is_a_valid_run_document_of_two_gloo_ranks(doc):
    jsonschema.validate(doc, RUN_SCHEMA)
    assert doc["status"] == "ok" and doc["exit_code"] == 0
    reported = doc["device"]["reported"]
    assert reported["world_size"] == 2 and reported["backend"] == "gloo"
    assert [ph["name"] for ph in doc["phases"]] == ["bus bandwidth", "ddp step"]


@pytest.mark.slow
def test_busbw_follows_nccl_tests_definitions(doc):
    sweep = [q for q in doc["points"] if q["phase"] == "bus bandwidth"]
    assert [q["size_bytes"] for q in sweep] == [4096, 65536, 1048576]  # the CPU sizes, one point per size
    n = doc["device"]["reported"]["world_size"]
    for q in sweep:
        assert q["algbw_gbps"] == pytest.approx(q["size_bytes"] / (q["time_us"] * 1e-6) / 1e9)
        assert q["busbw_gbps"] == pytest.approx(q["algbw_gbps"] * 2 * (n - 1) / n)
        assert q["verdict"]["class"] in ("latency-bound", "comms-bound")
        assert q["bound"] == ("latency" if q["verdict"]["class"] == "latency-bound" else "bandwidth")


@pytest.mark.slow
def test_the_ddp_step_says_how_much_communication_was_exposed(doc):
    steps = {q["mode"]: q for q in doc["points"] if q["phase"] == "ddp step"}
    assert set(steps) == {"compute only", "overlap", "no overlap"}
    base = steps["compute only"]["step_ms"]
    for q in steps.values():
        assert q["exposed_comm_ms"] == pytest.approx(max(0.0, q["step_ms"] - base))
        assert q["grad_bytes"] > 0 and q["comm_ms"] > 0
    v = doc["verdict"]
    assert v["class"] in ("comms-bound", "compute-bound")
    assert v["evidence"]["no_overlap_step_ms"] == pytest.approx(steps["no overlap"]["step_ms"])
    assert (v["class"] == "comms-bound") == (steps["no overlap"]["exposed_share"] >= 0.2)


@pytest.mark.slow
def test_the_tuis_results_view_draws_busbw_by_size_and_the_step_times(doc):
    from gputop.tui.results.view import bars_view

    lines = [t.plain for t in bars_view(doc, 100, 20)]
    assert sum("GB/s busbw" in ln for ln in lines) == 3 and sum("ms step" in ln for ln in lines) == 3


@pytest.mark.slow
@fewer_than_two
def test_on_a_machine_with_fewer_than_two_gpus_the_script_says_so_and_exits_2(tmp_path):
    out = subprocess.run([PY, str(WORKLOAD), "--device", "cuda"], capture_output=True, text=True, env=env(),
                         timeout=120, cwd=ROOT)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and "needs at least 2 GPUs" in lines[0]


def _ranks(g: Gputop) -> list[psutil.Process]:
    """torchrun and its ranks under gputop (each has allreduce.py on its command line)."""
    try:
        kids = psutil.Process(g.pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            if any("allreduce.py" in a for a in k.cmdline()):
                out.append(k)
        except psutil.Error:
            pass
    return out


def _running(reaper, tmp_path) -> Gputop:
    """A long CPU run, once torchrun and both ranks are up."""
    g = Gputop(["--run", "allreduce", "--device", "cpu", "--json", "--param", "steps=100000"], tmp_path, env())
    reaper.gputops.append(g)
    wait_until(lambda: len(_ranks(g)) >= 3, 60, "torchrun and its 2 ranks", g.proc)
    g.snapshot()
    return g


@pytest.mark.slow
def test_a_stop_in_the_ddp_phase_is_agreed_by_both_ranks_and_ends_in_time():
    """gputop's stop on its SIGINT (as ``gputop --run`` does it: SIGINT to torchrun, which passes it on to
    each rank) once the DDP phase runs: the ranks agree to stop at their next step, rank 0 says
    "interrupted", nobody is killed, and torchrun and both ranks are gone with the run. A rank that gets a
    second stop (a standalone script's "stop now") still leaves only at the agreement."""
    import threading

    from gputop.runner.registry import load_spec
    from gputop.runner.workload_run import WorkloadRun

    spec = load_spec(Path(WORKLOAD))
    values = {p.name: p.default for p in spec.params}
    values.update(spec.cpu, steps=100000)
    in_ddp = threading.Event()
    run = WorkloadRun(spec, values, device="cpu", grace_s=60.0, on_event=lambda ev: (  # time to agree, however slow
        ev.get("event") == "phase" and ev.get("name") == "ddp step") and in_ddp.set())
    run.start()
    try:
        assert in_ddp.wait(120), explain(run.document(), "\n".join(run.events.stderr_tail))
        kids = psutil.Process(run.pid).children(recursive=True)
        pids = [Proc.of(p.pid, "rank") for p in kids]
        assert sum(any("allreduce.py" in a for a in p.cmdline()) for p in kids) == 2  # both ranks, under torchrun
        for p in kids:  # each rank gets the stop twice: this one, then torchrun's (as on a busy machine, when
            os.kill(p.pid, signal.SIGINT)  # torchrun's reaches a rank only after the ranks agreed to stop)
        run.stop(signal.SIGINT)
        assert run.wait(90), explain(run.document(), "\n".join(run.events.stderr_tail))
    finally:
        run.kill()
        run.wait(30)
    d = run.document()
    why = explain(d, "\n".join(run.events.stderr_tail))
    assert d["status"] == "interrupted" and d["interrupted"] is True and run.exit_code == 130, why
    assert [w for w in d["warnings"] if w["code"] == "killed"] == [], why
    assert [q["phase"] for q in d["points"]] == ["bus bandwidth"] * 3, why  # the sweep, then no DDP mode finished
    assert_none_alive([p for p in pids if p], within=5.0, what="after the agreed stop")


@pytest.mark.slow
def test_sigkill_of_gputop_takes_torchrun_and_its_ranks_with_it(reaper, tmp_path):
    g = _running(reaper, tmp_path)
    ranks = [Proc.of(p.pid, "rank") for p in _ranks(g)]
    g.send(signal.SIGKILL)  # no clean-up in gputop: the watchdog and the ranks' parent-death signal do it
    g.wait(10)
    assert_none_alive([p for p in ranks if p] + g.seen, within=10.0, what="after SIGKILL of gputop")


def test_the_workload_lists_its_launcher_and_cpu_sizes():
    from gputop.runner.registry import load_spec

    spec = load_spec(Path(WORKLOAD))
    assert spec.gpus == "all" and spec.supports_cpu and spec.cpu["nproc"] == 2


# -- the supervisor, for any launcher that starts its workers in sessions of their own (as torchrun does) --------
LAUNCHER = """
import json, os, signal, subprocess, sys, time
import psutil
signal.signal(signal.SIGINT, signal.SIG_IGN)  # stubborn: only the supervisor's SIGKILL ends it
w = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                      "time.sleep(300)"], start_new_session=True)  # a worker in a session of its own
path = sys.argv[1]
with open(path + ".tmp", "w") as f:
    json.dump({"worker": [w.pid, psutil.Process(w.pid).create_time()]}, f)
os.replace(path + ".tmp", path)
time.sleep(300)
"""


def _launcher(reaper, tmp_path) -> tuple[Gputop, list]:
    from tests.fault_util import read_pids

    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    g = Gputop(["--json", "--grace", "1", "--run", "--", PY, "-c", LAUNCHER, str(pid_file)], tmp_path,
               env(fake_nvml=True))  # the stubborn launcher is killed after 1 s
    reaper.gputops.append(g)
    procs = wait_until(lambda: read_pids(pid_file), 30, "the launcher's worker", g.proc)
    g.snapshot()
    return g, procs


@pytest.mark.slow
def test_a_stop_kills_the_workers_that_left_the_commands_session(reaper, tmp_path):
    g, worker = _launcher(reaper, tmp_path)
    g.send(signal.SIGINT)  # the launcher ignores it: SIGKILL after the grace period, to its group and its tree
    assert g.wait(30) == 130, g.stderr[-2000:]
    assert_none_alive(worker + g.seen, within=5.0, what="after the grace period")


def test_sigkill_of_gputop_kills_the_workers_that_left_the_commands_session(reaper, tmp_path):
    g, worker = _launcher(reaper, tmp_path)
    g.send(signal.SIGKILL)  # the watchdog kills the group and the tree under its leader
    g.wait(10)
    assert_none_alive(worker + g.seen, within=10.0, what="after SIGKILL of gputop")


@pytest.mark.slow
@fewer_than_two
def test_gputop_on_a_machine_with_one_gpu_exits_2_with_the_reason(tmp_path):
    """The fake NVML shows one GPU (and torch here sees none): the workload refuses, gputop exits 2."""
    g = Gputop(["--run", "allreduce", "--quick", "--json"], tmp_path, env(fake_nvml=True))
    try:
        assert g.wait(120) == 2, g.stderr[-2000:]
    finally:
        g.kill()
    d = one_json(g.stdout, "the refused run's document")
    jsonschema.validate(d, RUN_SCHEMA)
    assert d["status"] == "error" and d["exit_code"] == 2 and d["points"] == []
    assert [e["kind"] for e in d["errors"]] == ["bad_param"] and "needs at least 2 GPUs" in d["errors"][0]["message"]
    lines = [ln for ln in g.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs at least 2 GPUs" in lines[0]


def test_every_child_gets_nvlink_multicast_off_and_a_torchrun_job_sees_every_gpu(monkeypatch):
    from gputop.runner.registry import load_spec
    from gputop.runner.workload_run import WorkloadRun
    from gputop.telemetry.nvml import Nvml
    from tests.test_comms_class import STATIC, NvlinkNvml

    class TwoGpus(NvlinkNvml):
        def nvmlDeviceGetUUID(self, h):
            return f"GPU-{h}"

    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    spec = load_spec(Path(WORKLOAD))
    values = {p.name: p.default for p in spec.params}
    env_cpu = WorkloadRun(spec, values, device="cpu").build_env()
    env_gpu = WorkloadRun(spec, values, device="cuda", nvml=Nvml(TwoGpus(STATIC))).build_env()
    for e in (env_cpu, env_gpu):
        assert [e[k] for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")] == \
            ["0", "1", "1"]
    assert env_gpu["CUDA_VISIBLE_DEVICES"] == "GPU-handle0,GPU-handle1"


def test_a_users_command_gets_nvlink_multicast_off(tmp_path):
    code = "import os; print('multicast', *(os.environ.get(k) for k in ('NCCL_NVLS_ENABLE', " \
           "'TORCH_SYMM_MEM_DISABLE_MULTICAST', 'NVSHMEM_DISABLE_NVLS')))"
    e = env(fake_nvml=True)
    e.pop("NCCL_NVLS_ENABLE", None)
    g = Gputop(["--json", "--run", "--", PY, "-c", code], tmp_path, e)
    try:
        assert g.wait(60) == 0, g.stderr[-2000:]
    finally:
        g.kill()
    assert "multicast 0 1 1" in g.stderr  # the command's output goes to stderr beside --json


@pytest.mark.slow
def test_a_command_on_two_gpus_gets_a_diagnosis_of_each(tmp_path):
    """`gputop --run -- torchrun ...`: the fake NVML has two GPUs with the command's tree on both."""
    e = env(fake_nvml=True, GPUTOP_FAKE_NVML_GPUS="2")
    rank = "import time; time.sleep(1.5)"
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {rank!r}])"
    g = Gputop(["--json", "--run", "--", PY, "-c", launcher], tmp_path, e)
    try:
        assert g.wait(60) == 0, g.stderr[-2000:]
    finally:
        g.kill()
    d = one_json(g.stdout, "the monitor document")
    jsonschema.validate(d, json.loads((ROOT / "gputop" / "schema" / "monitor.schema.json").read_text()))
    assert d["gpus_used"] == [0, 1] and [g_["used"] for g_ in d["gpus"]] == [True, True]
    assert all(g_["verdict"] is not None for g_ in d["gpus"])


def test_analyze_compares_busbw_with_the_link_peak_nvml_gave():
    """A GPU run's document, made up: a sweep (tests/test_comms_class._sweep) and rank 0's link facts."""
    from gputop.runner.registry import load_spec
    from tests.test_comms_class import _sweep

    pts = [dict(q, phase="bus bandwidth") for q in _sweep(20.0, 300.0, n=8)]
    facts = {"kind": "nvlink", "gpus": [0, 1], "nvlink_links_active": 18, "nvlink_speed_mbps": 26562}
    doc = {"points": pts, "phases": [{"name": "bus bandwidth"}], "results": {"link": facts}, "warnings": []}
    out = load_spec(Path(WORKLOAD)).analyze(doc)
    big = out["points"][-1]
    assert big["busbw_gbps_peak"] == pytest.approx(18 * 26.562)
    assert big["verdict"]["evidence"]["link_pct"] == pytest.approx(100 * big["busbw_gbps"] / (18 * 26.562))
    assert out["results"]["link"] == facts and out["results"]["link_peak"]["kind"] == "nvlink"
    assert out["verdict"] == out["phases"][0]["verdict"] == big["verdict"]  # no DDP phase: the largest message's



@pytest.mark.gpu
@pytest.mark.skipif(not SEVERAL_GPUS, reason="needs 2+ GPUs and torch with CUDA")
def test_on_several_gpus_nccl_measures_every_size_against_the_link_nvml_reports(tmp_path):
    g = Gputop(["--run", "allreduce", "--quick", "--json"], tmp_path, env())
    try:
        assert g.wait(300) == 0, g.stderr[-3000:]
    finally:
        g.kill()
    d = one_json(g.stdout, "gputop --run allreduce --quick --json")
    jsonschema.validate(d, RUN_SCHEMA)
    assert d["device"]["reported"]["backend"] == "nccl" and d["device"]["reported"]["world_size"] == _cuda_gpus()
    assert d["results"]["link"]["kind"] in ("nvlink", "pcie") and d["results"]["link_peak"]["peak_gbps"] > 0
    sweep = [q for q in d["points"] if q["phase"] == "bus bandwidth"]
    assert len(sweep) == 5 and all(q["busbw_gbps_peak"] == d["results"]["link_peak"]["peak_gbps"] for q in sweep)
