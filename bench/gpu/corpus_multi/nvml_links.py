"""What NVML says of each GPU's NVLinks on this machine: the common-speed field, each link's speed field (scope =
link), each link's state and version (nvmlDeviceGetNvLinkVersion: 6 = NVLink 4, 7 = NVLink 5), the P2P status
between GPU pairs. Printed as JSON (bench/gpu/corpus_multi_gpu.sh keeps it)."""

import json

import pynvml as N

N.nvmlInit()
out = {"driver": N.nvmlSystemGetDriverVersion(), "gpus": []}
n = N.nvmlDeviceGetCount()


def field(h, fid, scope=0):
    try:
        v = N.nvmlDeviceGetFieldValues(h, [(fid, scope)])[0]
        if v.nvmlReturn != 0:
            return f"ret {v.nvmlReturn}"
        return {0: v.value.dVal, 1: v.value.uiVal, 2: v.value.ulVal, 3: v.value.ullVal, 4: v.value.sllVal,
                5: v.value.siVal}.get(v.valueType, f"type {v.valueType}")
    except N.NVMLError as exc:
        return str(exc)


def call(fn, *a):
    try:
        return fn(*a)
    except N.NVMLError as exc:
        return str(exc)


for i in range(n):
    h = N.nvmlDeviceGetHandleByIndex(i)
    g = {"index": i, "name": N.nvmlDeviceGetName(h), "speed_common": field(h, N.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON),
         "link_count": field(h, N.NVML_FI_DEV_NVLINK_LINK_COUNT), "links": []}
    for link in range(18):
        state = call(N.nvmlDeviceGetNvLinkState, h, link)
        if isinstance(state, str) and "Invalid" in state:
            break
        g["links"].append({"link": link, "state": state, "version": call(N.nvmlDeviceGetNvLinkVersion, h, link),
                           "get_speed": field(h, N.NVML_FI_DEV_NVLINK_GET_SPEED, link),
                           "get_state": field(h, N.NVML_FI_DEV_NVLINK_GET_STATE, link),
                           "remote_bus": getattr(call(N.nvmlDeviceGetNvLinkRemotePciInfo, h, link), "busId", None)})
    g["p2p_nvlink"] = {j: call(N.nvmlDeviceGetP2PStatus, h, N.nvmlDeviceGetHandleByIndex(j), N.NVML_P2P_CAPS_INDEX_NVLINK)
                       for j in range(n) if j != i}
    out["gpus"].append(g)
print(json.dumps(out, indent=1, default=str))
