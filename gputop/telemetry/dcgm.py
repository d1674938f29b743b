"""Consumer mode: read the GPUs from a running dcgm-exporter's ``/metrics`` instead of arming GPM.

GPM (NVML) and DCGM's profiling module share the same hardware counters, so where NVIDIA's dcgm-exporter
already runs, gputop reads its Prometheus text (``gputop --source dcgm-exporter=URL``). The field mapping
is ``telemetry/dcgm_fields.py``; what dcgm-exporter does not export stays ``None`` (n/a) with a reason.
Host metrics come from gputop's own :class:`HostReader` (this machine), as with a live source.

dcgm-exporter refreshes its values every 30 s by default (``-c``); a read fetches the text at most every
``FETCH_PERIOD_S`` and ticks in between repeat the last values.
"""

from __future__ import annotations

import math
import time

from prometheus_client.parser import text_string_to_metric_families

from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.errors import BadSource, SourceError, SourceUnreachable
from gputop.telemetry.host import HostReader, PeriodicHost
from gputop.telemetry.sample import SAMPLE_FIELDS, decode_clock_reasons
from gputop.telemetry.urls import printable, request, source_url

KIND = "dcgm-exporter"
FETCH_PERIOD_S = 1.0
FETCH_TIMEOUT_S = 3.0  # the whole fetch: connect, headers and body
MAX_TEXT_BYTES = 64 << 20  # a node's /metrics is ~100 kB a GPU
NOT_EXPORTED = "not exported by dcgm-exporter"


def url_of(spec: str) -> str:
    """The URL of ``--source dcgm-exporter=URL`` (raises ValueError with one line on bad spelling)."""
    return source_url(spec, KIND, "http://127.0.0.1:9400/metrics")[0]


def fetch(url: str, timeout: float = FETCH_TIMEOUT_S) -> str:
    """The text at ``url``, whole within ``timeout`` seconds (connect, headers and body: ``urls.request``); raises
    SourceUnreachable when nothing answers there in time (or with an HTTP error), BadSource for what is not HTTP."""
    answer = request(url, KIND, deadline_s=timeout, max_bytes=MAX_TEXT_BYTES)
    if answer.status != 200:
        raise SourceUnreachable(f"{url}: HTTP {answer.status} {answer.reason}")
    return answer.body.decode("utf-8", errors="replace")


def _value(v: float) -> float | None:
    if not math.isfinite(v) or abs(v) >= F.FP64_BLANK:  # DCGM's blank sentinels mean "no value"
        return None
    return v


def parse(text: str, where: str = "the text") -> dict[int, dict]:
    """dcgm-exporter's text -> ``{gpu index: {"labels": {...}, "values": {DCGM name: value}}}``.

    Only whole GPUs: series with a ``gpu`` label and no MIG instance or NVLink/NVSwitch label. Raises
    BadSource when the text is not Prometheus text or holds no DCGM_FI_* GPU series."""
    gpus: dict[int, dict] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if not s.name.startswith("DCGM_FI_"):
                    continue
                labels = s.labels
                if any(k in labels for k in (*F.LABELS_MIG, "nvlink", "nvswitch")) or F.LABEL_GPU not in labels:
                    continue
                try:
                    index = int(labels[F.LABEL_GPU])
                except ValueError:
                    continue
                gpu = gpus.setdefault(index, {"labels": dict(labels), "values": {}})
                gpu["values"].setdefault(s.name, _value(float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # the parser quotes the line: shown printable, cut
        raise BadSource(f"{where} is not Prometheus text ({printable(exc, 80)})") from None
    if not gpus:
        raise BadSource(f"{where} has no DCGM_FI_* GPU metrics: not a dcgm-exporter")
    return gpus


def _label(labels: dict, *names: str) -> str | None:
    """The first of ``names`` the exporter labels its series with (printable: shown as is on a terminal)."""
    return next((printable(labels[n], 80) for n in names if labels.get(n)), None)


def _mem_total(values: dict) -> int | None:
    parts = [values.get(name) for name in F.MEM_TOTAL_PARTS]
    if parts[0] is None or parts[1] is None:
        return None
    return int(round(sum(p for p in parts if p is not None) * F.MEM_TOTAL_SCALE))


_FIELD_OF = {dcgm_name: (field, scale, kind) for dcgm_name, field, scale, kind in F.FIELDS}
_NO_VALUES = dict.fromkeys(SAMPLE_FIELDS)


def to_sample(index: int, t: float, values: dict | None) -> dict:
    """One gputop sample from a GPU's DCGM values (``None``: the GPU was not in the last text). (A fleet's refresh
    makes 8,192 of them: the values a GPU has are walked, not every field.)"""
    s: dict = {"index": index, "t": t, **_NO_VALUES}
    for dcgm_name, v in (values or {}).items():
        spec = _FIELD_OF.get(dcgm_name)
        if spec is None or v is None:
            continue
        field, scale, kind = spec
        if kind == "bitmask":
            s[field] = decode_clock_reasons(int(v))
        elif field in F.INTEGER_FIELDS:
            s[field] = int(round(v * scale))
        else:
            s[field] = v * scale
    s["mem_total_bytes"] = _mem_total(values or {})
    s["processes"] = None
    s["lost"] = values is None
    return s


def to_static(index: int, labels: dict, values: dict) -> dict:
    """A static record (the keys of ``telemetry.static.read_static``) from one GPU's labels; what
    dcgm-exporter does not give is None."""
    mig = any(k in labels for k in F.LABELS_MIG)
    return {
        "index": index, "name": _label(labels, F.LABEL_MODEL_NAME), "uuid": _label(labels, *F.LABELS_UUID),
        "pci_bus_id": _label(labels, F.LABEL_PCI_BUS_ID), "driver_version": _label(labels, F.LABEL_DRIVER_VERSION),
        "cuda_driver_version": None, "nvml_version": None, "compute_capability": None, "architecture": None,
        "sm_count": None, "cuda_cores": None, "memory_bus_width_bits": None, "max_sm_clock_mhz": None,
        "max_mem_clock_mhz": None, "max_graphics_clock_mhz": None, "memory_total_bytes": _mem_total(values),
        "pcie_max_gen": None, "pcie_max_width": None, "pcie_cur_gen": None, "pcie_cur_width": None,
        "power_limit_w": None, "mig_mode": True if mig else None,
        "gpm_supported": any(name.startswith("DCGM_FI_PROF_") for name in values),
    }


class DcgmExporterSource:
    """A telemetry source (a :class:`gputop.telemetry.source.Source`, like LiveSource / ReplaySource) over a
    dcgm-exporter's ``/metrics``; raises SourceError when it cannot be read at first."""

    kind = KIND
    nvml = None
    loop = False
    finished = False

    def __init__(self, url: str, gpus: list[int] | None = None, fetch_period: float = FETCH_PERIOD_S,
                 timeout: float = FETCH_TIMEOUT_S):
        self.url, self.path, self.label = url, url, url
        self.fetch_period, self.timeout = fetch_period, timeout
        self._gpus = parse(fetch(url, timeout), url)  # raises SourceError: the source does not open
        self._fetched = time.monotonic()
        self.indices = sorted(self._gpus) if not gpus else [i for i in gpus if i in self._gpus]
        self._static = [to_static(i, self._gpus[i]["labels"], self._gpus[i]["values"]) for i in self.indices]
        first = self._gpus[self.indices[0]]["labels"] if self.indices else {}
        exported = {name for g in self._gpus.values() for name in g["values"]}
        na = {field: NOT_EXPORTED for name, field, _, _ in F.FIELDS if name not in exported}
        if not exported.issuperset(F.MEM_TOTAL_PARTS[:2]):
            na["mem_total_bytes"] = NOT_EXPORTED
        na["processes"] = NOT_EXPORTED
        self.na_reasons = na  # field -> why it is n/a
        self.hostname = _label(first, *F.LABELS_HOSTNAME)
        self.header = {"hostname": self.hostname, "na_reasons": na, "rate_hz": None}
        self.error: str | None = None  # the last failed fetch, while the exporter is unreachable
        self.host = HostReader()
        self._host = PeriodicHost(self.host)

    def static(self) -> list[dict]:
        return self._static

    def _refresh(self, t: float) -> None:
        if t - self._fetched < self.fetch_period:
            return
        self._fetched = t
        try:
            self._gpus = parse(fetch(self.url, self.timeout), self.url)
            self.error = None
        except SourceError as exc:  # the exporter restarting: its GPUs read n/a (lost) until it is back
            self._gpus, self.error = {}, str(exc)

    def read(self) -> dict:
        t = time.monotonic()
        self._refresh(t)
        gpus = [to_sample(i, t, self._gpus[i]["values"] if i in self._gpus else None) for i in self.indices]
        return {"t": t, "gpus": gpus, "host": self._host.read(t)}

    def delay(self, interval: float) -> float:
        return interval

    def watch(self, pid: int) -> None:
        self.host.watch(pid)
        self._host.again()

    def unwatch(self, pid: int) -> None:
        self.host.unwatch(pid)

    def close(self) -> None:
        pass
