"""Map a CUDA device (as a workload sees it) to an NVML device, honouring CUDA_VISIBLE_DEVICES.

CUDA numbers the devices it can see 0..n-1 after CUDA_VISIBLE_DEVICES has filtered them; NVML
always numbers every GPU in PCI order. Entries of CUDA_VISIBLE_DEVICES are NVML-order indices or
UUID prefixes (``GPU-8c1b...``); CUDA stops at the first entry it cannot parse. MIG entries
(``MIG-...``) name an instance, not a whole GPU, and are not mapped.
"""

from __future__ import annotations

import os


def visible_entries(env: dict | None = None) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES (None when it is unset: every GPU is visible)."""
    env = os.environ if env is None else env
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [e.strip() for e in raw.split(",")] if raw.strip() else []


def nvml_index_for_cuda(cuda_index: int, uuids: list[str], env: dict | None = None) -> int | None:
    """NVML index of CUDA device ``cuda_index``; ``uuids`` are the NVML UUIDs in NVML index order.

    Assumes CUDA_DEVICE_ORDER=PCI_BUS_ID order when CUDA_VISIBLE_DEVICES is unset (the order NVML
    uses; CUDA's default "fastest first" differs only on machines with mixed GPUs).
    """
    entries = visible_entries(env)
    if entries is None:
        return cuda_index if 0 <= cuda_index < len(uuids) else None
    resolved: list[int] = []
    for e in entries:
        idx = _resolve(e, uuids)
        if idx is None:  # CUDA ignores this entry and every one after it
            break
        if idx in resolved:  # a duplicate makes CUDA see no devices at all
            return None
        resolved.append(idx)
    return resolved[cuda_index] if 0 <= cuda_index < len(resolved) else None


def _resolve(entry: str, uuids: list[str]) -> int | None:
    if entry.isdigit():
        i = int(entry)
        return i if i < len(uuids) else None
    if entry.startswith("GPU-"):
        hits = [i for i, u in enumerate(uuids) if u and u.startswith(entry)]
        return hits[0] if len(hits) == 1 else None
    return None  # MIG-..., or garbage


def child_env_for(nvml_index: int, uuids: list[str], env: dict | None = None) -> dict:
    """The environment for a workload child that must run on NVML GPU ``nvml_index`` as its cuda:0."""
    env = dict(os.environ if env is None else env)
    env["CUDA_VISIBLE_DEVICES"] = uuids[nvml_index] if uuids[nvml_index] else str(nvml_index)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


# NVLink multicast (NVLS) stays off in every process gputop starts: NCCL's NVLS algorithms, PyTorch's
# symmetric memory and NVSHMEM each have their own switch. ``multicast_off(env)`` sets the ones not set.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def multicast_off(env: dict) -> dict:
    """``env`` with NVLink multicast switched off (a value the caller already set is kept)."""
    for k, v in MULTICAST_OFF.items():
        env.setdefault(k, v)
    return env


def child_env_all(uuids: list[str], env: dict | None = None) -> dict:
    """The environment for a child that uses every GPU (a ``torchrun`` job): all of them visible, in NVML order."""
    env = dict(os.environ if env is None else env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(u if u else str(i) for i, u in enumerate(uuids))
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env
