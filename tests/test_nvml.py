"""The NVML choke point: real "no library" path on this machine, fault paths through a thin fake."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest

from fake_nvml import FakeNvml
from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.sample import GPM_METRICS, GpuReader, decode_clock_reasons
from gputop.telemetry.static import read_static

STATIC_DIR = Path(__file__).parent / "data" / "static"


def recorded_static() -> dict:
    """Static facts recorded off a real Hopper card (bench/gpu/gpu_foundation.sh)."""
    for name in ("h100_recorded.json", "h200_recorded.json"):
        p = STATIC_DIR / name
        if p.exists():
            return json.loads(p.read_text())["static"]
    pytest.skip("no recorded static info in tests/data/static")


def real_nvml_missing() -> bool:
    return not Nvml().available()


@pytest.mark.skipif(not real_nvml_missing(), reason="this machine has a working NVML")
def test_no_library_is_a_clear_message_not_a_crash():
    nvml = Nvml()
    assert not nvml.available()
    assert "libnvidia-ml" in nvml.error or "driver" in nvml.error
    assert nvml.get("name", "nvmlDeviceGetName", None) is None
    src = LiveSource(nvml)  # the TUI still opens on host metrics
    tick = src.read()
    assert tick["gpus"] == [] and tick["host"]["ram_total_bytes"] > 0


def test_fake_init_failure_reports_the_reason():
    nvml = Nvml(FakeNvml(recorded_static(), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert not nvml.available()
    assert "DriverNotLoaded" in nvml.error


def test_static_info_round_trips_through_nvml():
    st = recorded_static()
    info = read_static(Nvml(FakeNvml(st)), 0)
    for key in ("name", "uuid", "pci_bus_id", "compute_capability", "sm_count", "cuda_cores",
                "memory_bus_width_bits", "max_sm_clock_mhz", "max_mem_clock_mhz", "memory_total_bytes",
                "pcie_max_gen", "pcie_max_width", "power_limit_w", "gpm_supported"):
        assert info[key] == st[key], key


def test_not_supported_fields_become_none_and_are_logged_once(caplog):
    fake = FakeNvml(recorded_static(), fail={"nvmlDeviceGetTemperature": pynvml.NVML_ERROR_NOT_SUPPORTED,
                                             "nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NO_PERMISSION,
                                             "nvmlDeviceGetNumGpuCores": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
    nvml = Nvml(fake)
    info = read_static(nvml, 0)
    assert info["cuda_cores"] is None and info["sm_count"] is not None
    reader = GpuReader(nvml, 0)
    with caplog.at_level("INFO", logger="gputop.nvml"):
        s1, s2 = reader.read(), reader.read()
    assert s1["temp_c"] is None and s2["power_w"] is None and s2["sm_clock_mhz"] is not None
    assert nvml.na_reasons["temperature"] == "NotSupported"
    assert nvml.na_reasons["power"] == "NoPermission"
    assert nvml.na_reasons["cuda_cores"] == "FunctionNotFound"
    assert sum("temperature" in r.message for r in caplog.records) == 1  # logged once, not every tick


def test_gpm_window_needs_two_reads_and_reports_unsupported_metrics():
    fake = FakeNvml(recorded_static(), gpm_values={2: 0.03, 10: 87.0, 5: 0.0})
    nvml = Nvml(fake)
    reader = GpuReader(nvml, 0)
    first, second = reader.read(), reader.read()
    assert first["sm_active_pct"] is None  # the first read only opens the window
    assert second["sm_active_pct"] == pytest.approx(0.03)
    assert second["dram_bw_pct"] == pytest.approx(87.0)
    assert second["tensor_pct"] == 0.0
    assert second["hmma_pct"] is None and nvml.na_reasons["hmma_pct"] == "NotSupported"
    assert set(GPM_METRICS) <= set(second)


@pytest.mark.skipif(not real_nvml_missing(), reason="this machine has a working NVML")
def test_live_source_reads_the_host_every_second_at_rest_and_every_half_second_at_once_after_watch(monkeypatch):
    import os

    from gputop.telemetry import live

    clock = [1000.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    src = LiveSource(Nvml(FakeNvml(recorded_static())))
    reads = []
    real = src.host.read
    monkeypatch.setattr(src.host, "read", lambda: reads.append(clock[0]) or real())
    ticks = []
    for _ in range(22):  # 2.2 s at 10 Hz, no process watched
        ticks.append(src.read())
        clock[0] += 0.1
    assert reads == pytest.approx([1000.0, 1001.0, 1002.0])
    assert ticks[1]["host"] is ticks[0]["host"] and ticks[10]["host"] is not ticks[9]["host"]
    assert all(t["gpus"][0]["t"] == t["t"] for t in ticks)  # the GPU is read on every tick
    src.watch(os.getpid())
    tick = src.read()
    assert reads[-1] == clock[0] and str(os.getpid()) in tick["host"]["procs"]
    del reads[:]
    for _ in range(11):  # 1.1 s more, watching: every 0.5 s
        clock[0] += 0.1
        src.read()
    assert len(reads) == 2


def test_gpu_lost_mid_run_marks_it_and_stops_asking():
    fake = FakeNvml(recorded_static())
    nvml = Nvml(fake)
    reader = GpuReader(nvml, 0)
    assert reader.read()["lost"] is False
    fake.fail["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_GPU_IS_LOST
    s = reader.read()
    assert s["lost"] is True and s["util_gpu_pct"] is None
    n_calls = len(fake.calls)
    s = reader.read()
    assert s["lost"] is True and s["power_w"] is None
    assert len(fake.calls) == n_calls  # a lost GPU is not asked again


def test_clock_reasons_in_words():
    assert decode_clock_reasons(0) == []
    assert decode_clock_reasons(None) is None
    assert decode_clock_reasons(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]


def test_each_gpu_process_carries_its_process_group(monkeypatch):
    """A GPU's process list says each process's process group (a job's processes share it: the node view groups a
    node's GPUs into jobs by it), None for a pid that is not ours to see."""
    import os
    import subprocess
    import sys
    import types

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        fake = FakeNvml(recorded_static())
        procs = [types.SimpleNamespace(pid=p, usedGpuMemory=1 << 20) for p in (os.getpid(), child.pid, 2 ** 22 + 7)]
        monkeypatch.setattr(fake, "nvmlDeviceGetComputeRunningProcesses", lambda h: procs, raising=False)
        reader = GpuReader(Nvml(fake), 0, gpm=False, process_every=1)
        got = {p["pid"]: p["pgid"] for p in reader.read(0.0)["processes"]}
        assert got[os.getpid()] == os.getpgid(0)
        assert got[child.pid] == child.pid != os.getpgid(0)  # a session of its own: a job apart
        assert got[2 ** 22 + 7] is None
    finally:
        child.kill()
        child.wait()
