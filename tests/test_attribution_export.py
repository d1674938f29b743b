"""``--export`` beside ``--run --profile -- CMD`` (issue 27): the latest profiler window as Prometheus series
(gputop/export/attribution_series.py). A real gputop (on tests/fake_pynvml) runs a real torch program, records a
real CPU window, and a scrape of its /metrics holds the window's series; the GPU-only series are checked on a
window built by hand (kernels and a kernel timeline whose idle breakdown is known by construction)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fault_util
from export_util import free_port, get, stop, wait_for
from gputop.analysis.attribution import attribute
from gputop.export.attribution_series import attribution_families
from test_attribution import SPANS, TRAIN, _gpu_window, _named

PY = sys.executable


def scrape_text(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def families_of(win: dict, now: float) -> dict[str, list]:
    class One:
        def collect(self):
            yield from attribution_families(win, now)

    reg = CollectorRegistry(auto_describe=False)
    reg.register(One())
    return scrape_text(generate_latest(reg).decode())


def test_a_gpu_window_becomes_shares_by_category_and_by_idle_reason():
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    ew = _named("void at::native::vectorized_elementwise_kernel")
    win = _gpu_window([(gemm, 4, 60.0), (ew, 5, 40.0)], wall_s=0.001, busy_s=0.0004, steps=3)
    win["kernel_spans"] = [list(s) for s in SPANS]
    a = {**attribute(win), "status": "ok", "pid": 4242, "ended_at": 1000.0}
    fams = families_of(a, now=1012.5)
    (age,) = fams["gputop_attribution_window_age_seconds"]
    assert age.value == 12.5 and age.labels == {"pid": "4242"}
    assert fams["gputop_attribution_window_seconds"][0].value == 0.001
    assert fams["gputop_attribution_gpu_busy_share"][0].value == 0.4
    idle = {s.labels["reason"]: s.value for s in fams["gputop_attribution_gpu_idle_share"]}
    assert set(idle) == {"host_wait", "kernel_wait", "other"}
    assert abs(sum(idle.values()) - 0.6) < 1e-3  # the reasons split the idle share: busy + idle = 1
    assert idle["host_wait"] == round(0.6 * 225 / 285, 4)
    shares = {s.labels["category"]: s.value for s in fams["gputop_attribution_kernel_share"]}
    assert shares == {"GEMM/conv": 0.6, "elementwise": 0.4}
    assert fams["gputop_attribution_kernels_per_step"][0].value == 3.0

    no_split = families_of({**a, "idle": {"why_none": "no timeline"}}, now=1001.0)
    assert [(s.labels["reason"], s.value) for s in no_split["gputop_attribution_gpu_idle_share"]] == [("unknown", 0.6)]
    assert families_of({"status": "unavailable", "why_none": "x"}, now=0) == {}
    assert families_of(None, now=0) == {}


@pytest.mark.slow
def test_a_real_export_beside_a_profiled_command_serves_its_window(tmp_path):
    go = tmp_path / "go"  # the program trains until the test has scraped the window
    prog = TRAIN.replace("while time.time() - t0 < float(sys.argv[1]):",
                         f"while not os.path.exists({str(go)!r}) and time.time() - t0 < float(sys.argv[1]):")
    (tmp_path / "train.py").write_text(prog)
    port = free_port()
    env = fault_util.env(fake_nvml=True, GPUTOP_PROFILE_AT="0.3")
    proc = subprocess.Popen([PY, "-m", "gputop", "--export", f"127.0.0.1:{port}", "--json", "--run", "--profile",
                             "--profile-seconds", "0.5", "--profile-steps", "0", "--", PY, "train.py", "60"],
                            cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def window_served():
            if proc.poll() is not None:
                raise AssertionError(f"gputop exited {proc.returncode}: {proc.stderr.read()}")
            text = get(f"http://127.0.0.1:{port}/metrics", timeout=2.0)
            return text if "gputop_attribution_window_age_seconds{" in text else None

        fams = scrape_text(wait_for(window_served, 60, "the window's series"))
        assert "DCGM_FI_DEV_SM_CLOCK" in fams  # the GPUs' series, as --export serves them
        (age,) = fams["gputop_attribution_window_age_seconds"]
        assert 0 <= age.value < 60
        (length,) = fams["gputop_attribution_window_seconds"]
        assert length.value >= 0.5 and length.labels["pid"] == age.labels["pid"] != ""
        assert "gputop_attribution_kernel_share" not in fams  # a CPU window: no kernels, no GPU shares
        def older():
            (now,) = scrape_text(get(f"http://127.0.0.1:{port}/metrics"))["gputop_attribution_window_age_seconds"]
            return now.value > age.value

        wait_for(older, 30, "the window's age to grow")  # it ages
        go.write_text("")
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode == 3, err  # the command's exit code, unchanged
    doc = json.loads(out)
    assert doc["attribution"]["windows"][0]["status"] == "ok"
    assert "exporting" in err and f":{port}/metrics" in err


def test_export_goes_beside_a_command_and_nowhere_else_it_did_not(capsys):
    import pytest

    from gputop import cli

    args, command = cli.parse(["--export", "127.0.0.1:9999", "--run", "--profile", "--", "true"])
    assert command == ["true"] and cli.mode_of(args, command) == "run-command" and args.export_address[1] == 9999
    for argv in (["--export", "--run", "matmul"], ["--export", "--tui", "--run", "--", "true"],
                 ["--export", "--watch", "1"]):
        with pytest.raises(SystemExit) as e:
            cli.parse(argv)
        assert e.value.code == 2, argv
    assert "beside --run [--profile] -- CMD" in capsys.readouterr().err


def test_a_jobs_ranks_each_have_their_series_under_their_pid():
    """A window every rank of a job answered (``per_process``): each rank's shares under its own pid label, one
    family each."""
    gemm = _named("void cutlass::Kernel2<cutlass_75_tensorop_bf16")
    nccl = _named("ncclDevKernel_AllReduce")
    ranks = [{"pid": 11, **attribute(_gpu_window([(nccl, 10, 90.0), (gemm, 10, 10.0)]))},
             {"pid": 12, **attribute(_gpu_window([(gemm, 10, 90.0), (nccl, 10, 10.0)]))}]
    win = {**ranks[0], "status": "ok", "ended_at": 1000.0, "per_process": ranks}
    fams = families_of(win, now=1001.0)
    shares = {(s.labels["pid"], s.labels["category"]): s.value for s in fams["gputop_attribution_kernel_share"]}
    assert shares == {("11", "communication"): 0.9, ("11", "GEMM/conv"): 0.1,
                      ("12", "GEMM/conv"): 0.9, ("12", "communication"): 0.1}
    assert sorted(s.labels["pid"] for s in fams["gputop_attribution_window_age_seconds"]) == ["11", "12"]
