"""A thin fake at the pynvml boundary, for fault paths only (NotSupported, GpuIsLost, no library).

It answers from a real recorded static record (tests/data/static/*.json, read off an H100/H200 by
``bench/gpu/gpu_foundation.sh``) and uses the real pynvml structs and error classes, so gputop's code runs
exactly as with the real library; ``fail`` maps a pynvml function name to the NVML error code it raises.
"""

from __future__ import annotations

import ctypes
import types

import pynvml


def _err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class FakeNvml(types.SimpleNamespace):
    def __init__(self, static: dict, fail: dict[str, int] | None = None, init_error: int | None = None,
                 gpm_values: dict[int, float] | None = None):
        super().__init__()
        self.static = static
        self.fail = dict(fail or {})
        self.init_error = init_error
        self.gpm_values = gpm_values or {}
        self.calls: list[str] = []
        for name in dir(pynvml):  # constants and structs of the real bindings
            if name.startswith(("NVML_", "c_nvml", "nvmlClocks")):
                setattr(self, name, getattr(pynvml, name))

    def __getattribute__(self, name):
        if name.startswith("nvml") and not name.startswith("nvmlClocks"):
            fail = object.__getattribute__(self, "fail")
            object.__getattribute__(self, "calls").append(name)
            if name in fail:
                code = fail[name]

                def raiser(*a, **k):
                    raise _err(code)

                return raiser
        return object.__getattribute__(self, name)

    # -- the functions gputop calls ----------------------------------------------------------------
    def nvmlInit(self):
        if self.init_error is not None:
            raise _err(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        if i != 0:
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return "handle0"

    def nvmlSystemGetDriverVersion(self):
        return self.static["driver_version"]

    def nvmlSystemGetNVMLVersion(self):
        return "13.580"

    def nvmlSystemGetCudaDriverVersion(self):
        major, minor = self.static["cuda_driver_version"].split(".")
        return int(major) * 1000 + int(minor) * 10

    def nvmlDeviceGetName(self, h):
        return self.static["name"]

    def nvmlDeviceGetUUID(self, h):
        return self.static["uuid"]

    def nvmlDeviceGetPciInfo(self, h):
        return types.SimpleNamespace(busId=self.static["pci_bus_id"].encode())

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return tuple(self.static["compute_capability"])

    def nvmlDeviceGetNumGpuCores(self, h):
        return self.static["cuda_cores"]

    def nvmlDeviceGetAttributes(self, h):
        return types.SimpleNamespace(multiprocessorCount=self.static["sm_count"])

    def nvmlDeviceGetMemoryBusWidth(self, h):
        return self.static["memory_bus_width_bits"]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return {pynvml.NVML_CLOCK_SM: self.static["max_sm_clock_mhz"],
                pynvml.NVML_CLOCK_MEM: self.static["max_mem_clock_mhz"],
                pynvml.NVML_CLOCK_GRAPHICS: self.static.get("max_graphics_clock_mhz")}[kind]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.nvmlDeviceGetMaxClockInfo(h, kind)

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        total = self.static["memory_total_bytes"]
        reserved = 600 << 20 if version else 0  # v2 reports the driver's reserved memory apart from "used"
        return types.SimpleNamespace(total=total, used=total // 10, free=total - total // 10 - reserved,
                                     reserved=reserved)

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h):
        return self.static["pcie_max_gen"]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self.static["pcie_max_gen"]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self.static["pcie_max_width"]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self.static["pcie_cur_gen"]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self.static["pcie_cur_width"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return int(self.static["power_limit_w"] * 1000)

    def nvmlDeviceGetPowerUsage(self, h):
        return int(self.static["power_limit_w"] * 100)

    def nvmlDeviceGetMigMode(self, h):
        return (0, 0)

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 35

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=100, memory=40)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4  # software power cap

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return 1000

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return []

    # NVML's per-process utilisation samples: (pid, timeStamp in us, smUtil, memUtil); set by a test
    proc_util: tuple = ()

    def nvmlDeviceGetProcessUtilization(self, h, since):
        got = [types.SimpleNamespace(pid=p, timeStamp=t, smUtil=sm, memUtil=mem, encUtil=0, decUtil=0)
               for p, t, sm, mem in self.proc_util if t > since]
        if not got:
            raise _err(pynvml.NVML_ERROR_NOT_FOUND)  # what NVML says when no process ran since ``since``
        return got

    def nvmlSystemGetProcessName(self, pid):
        return "python3"

    def nvmlGpmQueryDeviceSupport(self, h):
        return types.SimpleNamespace(isSupportedDevice=int(self.static["gpm_supported"]))

    def nvmlGpmSampleAlloc(self):
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, s):
        pass

    def nvmlGpmSampleGet(self, h, s):
        return s

    def nvmlGpmMetricsGet(self, mg):
        for i in range(mg.numMetrics):
            m = mg.metrics[i]
            if m.metricId in self.gpm_values:
                m.value = ctypes.c_double(self.gpm_values[m.metricId]).value
                m.nvmlReturn = 0
            else:
                m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return mg


class LinksNvml(FakeNvml):
    """A node of several GPUs whose NVLink answers come from what a real machine said (``nvml_links.json`` of
    ``bench/gpu/corpus_multi/nvml_links.py``: per GPU the common-speed field's answer, the link count, each link's
    state, version and speed field, the P2P status to each other GPU); everything else as :class:`FakeNvml`."""

    def __init__(self, static: dict, links: dict, **kw):
        super().__init__(static, **kw)
        self.links = links

    def _gpu(self, h) -> dict:
        return self.links["gpus"][int(str(h).removeprefix("handle"))]

    def nvmlDeviceGetCount(self):
        return len(self.links["gpus"])

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.links["gpus"]):
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return f"handle{i}"

    def nvmlDeviceGetUUID(self, h):
        return f"{self.static['uuid']}-{int(str(h).removeprefix('handle'))}"

    def nvmlDeviceGetFieldValues(self, h, ids):
        g = self._gpu(h)
        out = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            out[i].fieldId, out[i].scopeId = fid, scope
            out[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            if fid == pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
                answer = g["speed_common"]
            elif fid == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
                answer = g["link_count"]
            elif fid == pynvml.NVML_FI_DEV_NVLINK_GET_SPEED and scope < len(g["links"]):
                answer = g["links"][scope]["get_speed"]
            else:
                answer = f"ret {pynvml.NVML_ERROR_NOT_SUPPORTED}"
            if isinstance(answer, str):  # "ret 3": the NVML return code the real machine gave
                out[i].nvmlReturn = int(answer.split()[1])
            else:
                out[i].value.uiVal = answer
        return out

    def _link(self, h, link):
        g = self._gpu(h)
        if link >= len(g["links"]):
            raise _err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return g["links"][link]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self._link(h, link)["state"]

    def nvmlDeviceGetNvLinkVersion(self, h, link):
        return self._link(h, link)["version"]

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert index == pynvml.NVML_P2P_CAPS_INDEX_NVLINK
        return self._gpu(a)["p2p_nvlink"][str(int(str(b).removeprefix("handle")))]
