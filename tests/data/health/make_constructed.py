"""Writes the constructed NVML answer records of this folder (``python tests/data/health/make_constructed.py``).

Constructed, not recorded: a 2-GPU H100 80GB HBM3 node whose NVLink answers are the ones a real 2x H100 node gave
(``tests/data/traces/corpus_multi_h100x2/nvml_links.json``), its device facts the published H100 SXM figures
(``tests/data/static/h100_sxm_published.json``), and every health answer in the shape nvml.h documents for it, with
the values a healthy card under gputop's load would give. Each fault is the few answers that differ, over that
base (``"base"``). ``bench/gpu/doctor_gpu.sh`` records real nodes (``recorded_*.json``: a healthy 2x H100 on
2026-11-27), which the tests of a healthy node use; no fault was recorded on a real card yet, so the fault files
and their base stay constructed: their names say so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

import pynvml  # noqa: E402

from fake_health import RecordingLib, record_node  # noqa: E402
from fake_nvml import LinksNvml  # noqa: E402
from gputop.telemetry.nvml import Nvml  # noqa: E402

SM, MEM = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
BUS = ["00000000:18:00.0", "00000000:2A:00.0"]
CPUS = [(0, 56), (56, 112)]  # each GPU's NUMA node's CPUs


class ConstructedH100x2(LinksNvml):
    """Health answers in nvml.h's shapes, as a healthy H100 SXM under the doctor's bf16 load gives them."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.nvmlMemory_v2 = pynvml.nvmlMemory_v2  # the constant the real bindings have: memory read as v2

    def _i(self, h) -> int:
        return int(str(h).removeprefix("handle"))

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetPciInfo(self, h):
        info = pynvml.nvmlPciInfo_t()
        info.busId = BUS[self._i(h)].encode()
        return info

    def nvmlDeviceGetSerial(self, h):
        return f"165392300{self._i(h):04d}"

    def nvmlDeviceGetEccMode(self, h):
        return (1, 1)

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        return 0

    def nvmlDeviceGetRemappedRows(self, h):
        return (0, 0, 0, 0)

    def nvmlDeviceGetRowRemapperHistogram(self, h):
        v = pynvml.c_nvmlRowRemapperHistogramValues()
        v.max = 640
        return v

    def nvmlDeviceGetRetiredPages(self, h, cause):
        return []

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return 0

    def nvmlDeviceGetNvLinkErrorCounter(self, h, link, counter):
        self._link(h, link)
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4  # software power cap: a healthy H100 under a bf16 matmul load

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {SM: 1755, MEM: 2619}.get(kind, 1755)

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        return 1980

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 62

    def nvmlDeviceGetTemperatureThreshold(self, h, kind):
        return {pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 90, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92}[kind]

    def nvmlDeviceGetPowerUsage(self, h):
        return 688000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return 700000

    def nvmlDeviceGetPersistenceMode(self, h):
        return 1

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return 0

    def nvmlDeviceGetCpuAffinity(self, h, words):
        lo, hi = CPUS[self._i(h)]
        out = (pynvml.c_ulonglong * words)()
        for cpu in range(lo, hi):
            out[cpu // 64] |= 1 << (cpu % 64)
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return []


R = "nvmlDeviceGetCurrentClocksEventReasons"
FAULTS = {  # name: (what it is, answers, errors)
    "thermal_load": ("GPU 1 held by software thermal slowdown at 1297 MHz under the load while GPU 0 holds 1755 MHz "
                     "at the power cap (the 2-H100 machine of 2026-11-27, issue 39)",
                     {f"{R}(gpu1)": 0x24, f"nvmlDeviceGetClockInfo(gpu1,{SM})": 1297,
                      "nvmlDeviceGetTemperature(gpu1,0)": 88}, {}),
    "hw_slowdown": ("GPU 0 in hardware slowdown (0x8) and hardware power brake (0x80)",
                    {f"{R}(gpu0)": 0x88, f"nvmlDeviceGetClockInfo(gpu0,{SM})": 690}, {}),
    "pcie_gen3": ("GPU 0's link trained at gen 3 x16 under load, gen 5 allowed", {
        "nvmlDeviceGetCurrPcieLinkGeneration(gpu0)": 3}, {}),
    "pcie_x8": ("GPU 1's link at gen 5 x8 under load, x16 allowed", {"nvmlDeviceGetCurrPcieLinkWidth(gpu1)": 8}, {}),
    "remap_pending": ("GPU 0: 1 row remapped for an uncorrectable error, the remap pending a reset",
                      {"nvmlDeviceGetRemappedRows(gpu0)": [0, 1, 1, 0],
                       f"nvmlDeviceGetTotalEccErrors(gpu0,1,1)": 1}, {}),
    "remap_failure": ("GPU 1: the row-remapping failure flag set, 8 rows remapped",
                      {"nvmlDeviceGetRemappedRows(gpu1)": [0, 8, 0, 1]}, {}),
    "remap_exhausted": ("GPU 0: 2 banks with no spare row left",
                        {"nvmlDeviceGetRowRemapperHistogram(gpu0)": {"max": 630, "high": 6, "partial": 2, "low": 0,
                                                                      "none": 2}}, {}),
    "ecc_volatile_dbe": ("GPU 1: 2 uncorrectable errors since the driver loaded",
                         {"nvmlDeviceGetTotalEccErrors(gpu1,1,0)": 2, "nvmlDeviceGetTotalEccErrors(gpu1,1,1)": 2}, {}),
    "ecc_off": ("GPU 0: ECC off, on at the next reset", {"nvmlDeviceGetEccMode(gpu0)": [0, 1]}, {}),
    "retired_pages_limit": ("a pre-Ampere GPU 0 (no row remapper) with 40 single-bit and 24 double-bit retired pages",
                            {f"nvmlDeviceGetRetiredPages(gpu0,0)": list(range(4096, 4096 + 40)),
                             f"nvmlDeviceGetRetiredPages(gpu0,1)": list(range(8192, 8192 + 24))},
                            {"nvmlDeviceGetRemappedRows(gpu0)": pynvml.NVML_ERROR_NOT_SUPPORTED,
                             "nvmlDeviceGetRowRemapperHistogram(gpu0)": pynvml.NVML_ERROR_NOT_SUPPORTED}),
    "retired_pages_pending": ("a pre-Ampere GPU 1 with 2 retired pages, one pending a reload",
                              {f"nvmlDeviceGetRetiredPages(gpu1,1)": [8192, 8193],
                               "nvmlDeviceGetRetiredPagesPendingStatus(gpu1)": 1},
                              {"nvmlDeviceGetRemappedRows(gpu1)": pynvml.NVML_ERROR_NOT_SUPPORTED,
                               "nvmlDeviceGetRowRemapperHistogram(gpu1)": pynvml.NVML_ERROR_NOT_SUPPORTED}),
    "nvlink_down": ("GPU 1's NVLink 7 down, 17 up", {"nvmlDeviceGetNvLinkState(gpu1,7)": 0}, {}),
    "power_limit_low": ("GPU 0's power limit lowered to 500 W (default 700 W)",
                        {"nvmlDeviceGetEnforcedPowerLimit(gpu0)": 500000}, {}),
    "app_clock_low": ("GPU 1's application clock lowered to 1410 MHz (default 1980)",
                      {f"nvmlDeviceGetApplicationsClock(gpu1,{SM})": 1410, f"{R}(gpu1)": 0x2}, {}),
    "other_process": ("GPU 0 held by another user's process",
                      {"nvmlDeviceGetComputeRunningProcesses(gpu0)": [{"pid": 4194301, "usedGpuMemory": 8589934592,
                                                                      "gpuInstanceId": 4294967295,
                                                                      "computeInstanceId": 4294967295}],
                       "nvmlSystemGetProcessName(4194301)": "python3"}, {}),
    "gpu_lost": ("GPU 1 lost: NVML answers GpuIsLost", {},
                 {k: pynvml.NVML_ERROR_GPU_IS_LOST for k in ("nvmlDeviceGetEccMode(gpu1)", "nvmlDeviceGetName(gpu1)")}),
    "hot_idle": ("GPU 0 at 88 C with the slowdown at 90 C, software thermal slowdown at rest",
                 {"nvmlDeviceGetTemperature(gpu0,0)": 88, f"{R}(gpu0)": 0x21}, {}),
    "mig_on": ("GPU 1 in MIG mode", {"nvmlDeviceGetMigMode(gpu1)": [1, 1]}, {}),
}


def main() -> None:
    static = json.loads((TESTS / "data" / "static" / "h100_sxm_published.json").read_text())["static"]
    static = {**static, "uuid": "GPU-c0175a7d-0000-4000-8000-c0a57ac7ed00", "driver_version": "580.159.04",
              "cuda_driver_version": "13.0"}
    links = json.loads((TESTS / "data" / "traces" / "corpus_multi_h100x2" / "nvml_links.json").read_text())
    lib = RecordingLib(ConstructedH100x2(static, links))
    record_node(Nvml(lib))
    base = "constructed_h100x2_healthy.json"
    rec = lib.record("constructed (not recorded): " + __doc__.split("\n\n")[1].replace("\n", " "), 2)
    (HERE / base).write_text(json.dumps(rec, indent=1) + "\n")
    for name, (what, answers, errors) in FAULTS.items():
        over = {"format": rec["format"], "version": rec["version"], "base": base,
                "provenance": f"constructed (not recorded) over {base}: {what}", "answers": answers, "errors": errors}
        (HERE / f"constructed_{name}.json").write_text(json.dumps(over, indent=1) + "\n")
    print(f"{1 + len(FAULTS)} records in {HERE}")


if __name__ == "__main__":
    main()
