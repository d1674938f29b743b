"""The one place gputop calls NVML.

Every NVML call in gputop goes through :meth:`Nvml.get`. It initialises NVML lazily, and turns every
NVML error into ``None`` ("n/a") for that field instead of an exception. The first failure of each
field is logged once and remembered in :attr:`Nvml.na_reasons`, so a frontend can say *why* a value
is n/a (``NotSupported``, ``NoPermission``, ...). A GPU that reports ``GpuIsLost`` is marked lost and
not asked again.

The ``lib`` argument is the pynvml module (default: ``import pynvml``); tests pass a thin fake at this
boundary to exercise fault paths (NotSupported fields, GpuIsLost mid-run, no library).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

log = logging.getLogger("gputop.nvml")

# NVML return codes (from nvml.h), kept here so the reasons read well without pynvml installed.
_REASON_NAMES = {
    1: "Uninitialized",
    2: "InvalidArgument",
    3: "NotSupported",
    4: "NoPermission",
    6: "NotFound",
    9: "DriverNotLoaded",
    10: "Timeout",
    12: "LibraryNotFound",
    13: "FunctionNotFound",
    15: "GpuIsLost",
    17: "OperatingSystem",
    18: "LibRmVersionMismatch",
    21: "NoData",
    25: "ArgumentVersionMismatch",
    26: "Deprecated",
    27: "NotReady",
    28: "GpuNotFound",
    999: "Unknown",
}
GPU_IS_LOST = 15
NOT_FOUND = 6
# nvmlValueType_t -> the member of nvmlValue_t that holds a field value (nvml.h).
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this machine (no library, no driver, or no GPU)."""


def _load_pynvml():
    import pynvml  # nvidia-ml-py

    return pynvml


class Nvml:
    """Lazy, guarded access to NVML. Thread-safe for the sampler thread plus one UI thread."""

    def __init__(self, lib: Any = None):
        self._lib = lib
        self._lock = threading.Lock()
        self._state: str | None = None  # None: not tried; "ok"; otherwise the reason it is unavailable
        self.na_reasons: dict[str, str] = {}  # field -> reason, first failure of each field
        self.lost: set[int] = set()  # indices of GPUs that reported GpuIsLost

    # -- initialisation ---------------------------------------------------------------------------
    @property
    def lib(self):
        return self._lib

    def available(self) -> bool:
        """Initialise NVML on first use; True when it works and sees at least one GPU."""
        if self._state is None:
            with self._lock:
                if self._state is None:
                    self._state = self._init()
        return self._state == "ok"

    @property
    def error(self) -> str | None:
        """Why NVML is unavailable, in one line (None when it works)."""
        self.available()
        return None if self._state == "ok" else self._state

    def require(self) -> None:
        if not self.available():
            raise NvmlUnavailable(self._state)

    def _init(self) -> str:
        if self._lib is None:
            try:
                self._lib = _load_pynvml()
            except ImportError:
                return "the nvidia-ml-py package (import pynvml) is not installed"
        try:
            self._lib.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            reason = self.reason(exc)
            if reason == "LibraryNotFound":
                return "no NVIDIA driver library (libnvidia-ml.so.1 not found): is this a GPU machine?"
            if reason == "DriverNotLoaded":
                return "the NVIDIA driver is not loaded (NVML: DriverNotLoaded)"
            return f"NVML failed to initialise: {reason}"
        try:
            count = self._lib.nvmlDeviceGetCount()
        except Exception as exc:
            return f"NVML could not count GPUs: {self.reason(exc)}"
        if count == 0:
            return "NVML works but sees no GPU"
        return "ok"

    def shutdown(self) -> None:
        if self._state == "ok":
            try:
                self._lib.nvmlShutdown()
            except Exception:
                pass
            self._state = None

    # -- the choke point ---------------------------------------------------------------------------
    def reason(self, exc: BaseException) -> str:
        value = getattr(exc, "value", None)
        if isinstance(value, int):
            return reason_name(value)
        if isinstance(exc, AttributeError):
            return "FunctionNotFound"  # this pynvml has no such binding
        return type(exc).__name__

    def get(self, field: str, fn: str | Callable, *args, gpu: int | None = None) -> Any:
        """Call ``lib.<fn>(*args)``; any failure gives None for ``field`` (logged once).

        ``gpu`` names the GPU index the call is about, so that GpuIsLost marks it lost.
        """
        if not self.available():
            return None
        if gpu is not None and gpu in self.lost:
            return None
        try:
            func = getattr(self._lib, fn) if isinstance(fn, str) else fn
            return func(*args)
        except Exception as exc:
            reason = self.reason(exc)
            if getattr(exc, "value", None) == GPU_IS_LOST and gpu is not None:
                if gpu not in self.lost:
                    log.warning("GPU %s is lost (NVML: GpuIsLost); its fields are n/a from now on", gpu)
                self.lost.add(gpu)
            if field not in self.na_reasons:
                self.na_reasons[field] = reason
                log.info("NVML: %s is n/a (%s)", field, reason)
            return None

    def field_values(self, field: str, h, ids: list, gpu: int | None = None) -> list | None:
        """``nvmlDeviceGetFieldValues`` for ``ids`` (field ids, or ``(field id, scope id)`` pairs): the values
        as Python numbers, None for each one NVML could not give (its reason kept under ``field``), or None
        when the call itself failed."""
        values = self.get(field, "nvmlDeviceGetFieldValues", h, list(ids), gpu=gpu)
        if values is None:
            return None
        out = []
        for v in values:
            if v.nvmlReturn != 0:
                self.na_reasons.setdefault(field, reason_name(v.nvmlReturn))
                out.append(None)
                continue
            member = _VALUE_MEMBERS.get(int(v.valueType))
            out.append(getattr(v.value, member) if member else None)
        return out

    def process_utilization(self, h, since_us: int, gpu: int | None = None) -> list[dict] | None:
        """NVML's per-process utilisation samples of one GPU newer than ``since_us`` (NVML's microsecond
        timestamps; 0: all it keeps): ``[{"pid", "t_us", "sm_pct", "mem_pct"}]``, ``[]`` when no process ran
        a kernel since then (NVML says NotFound), None when the call is not available (reason kept under
        ``process_utilization``)."""

        def call(handle, since):
            try:
                return self._lib.nvmlDeviceGetProcessUtilization(handle, since)
            except Exception as exc:
                if getattr(exc, "value", None) == NOT_FOUND:
                    return []
                raise

        got = self.get("process_utilization", call, h, int(since_us), gpu=gpu)
        if got is None:
            return None
        return [{"pid": int(x.pid), "t_us": int(x.timeStamp), "sm_pct": float(x.smUtil),
                 "mem_pct": float(x.memUtil)} for x in got]

    def const(self, name: str, default: Any = None) -> Any:
        """A constant of the bindings (None-safe for older pynvml)."""
        if self._lib is None and not self.available():
            return default
        return getattr(self._lib, name, default)


def reason_name(code: int) -> str:
    return _REASON_NAMES.get(code, f"NVML error {code}")


def text(value: Any) -> Any:
    """NVML returns bytes in old bindings and str in new ones."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value
