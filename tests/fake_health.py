"""NVML's answers recorded, and played back at the pynvml boundary: what ``gputop --doctor`` is tested on without a GPU.

A record (``tests/data/health/*.json``) holds, for each call gputop made, the answer NVML gave::

    {"format": "gputop-nvml-answers", "version": 1, "provenance": "...", "gpus": N,
     "answers": {"nvmlDeviceGetEccMode(gpu0)": [1, 1], ...}, "errors": {"nvmlDeviceGetRetiredPages(gpu0,0)": 3}}

A key is the function and its arguments, a device's handle written ``gpu<i>`` (``nvmlDeviceGetNvLinkState(gpu0,3)``);
an answer is JSON (a struct as an object of its fields, bytes as text); an error, NVML's return code. A record may
name a ``base`` record (a file beside it) whose answers it overrides: a fault is its few changed answers.

:class:`RecordingLib` wraps the real pynvml and writes such a record of every call (``bench/gpu/doctor_record.py``
on a GPU machine); :class:`RecordedNvml` answers from one, with the real pynvml's constants and error class, so
gputop's code runs as it does against the real library. A call the record does not hold answers NotSupported and
is listed in ``missing`` (a test can assert there is none).
"""

from __future__ import annotations

import ctypes
import gzip
import json
import types
from pathlib import Path

import pynvml

FORMAT, VERSION = "gputop-nvml-answers", 1
DATA = Path(__file__).resolve().parent / "data" / "health"
RECORDED = "recorded_h100_80gb_hbm3_x2.json"  # a healthy 2x H100 node at rest, 2026-11-27 (data/health/README.md)
RUNS = DATA / "doctor_h100x2_2026-11-27"  # the documents of the doctor's runs on that node, and nvidia-smi -q


class Handle:
    def __init__(self, index: int, real):
        self.index, self.real = index, real


def _arg(a) -> str:
    if isinstance(a, Handle):
        return f"gpu{a.index}"
    if isinstance(a, str) and a.startswith("gpu") and a[3:].isdigit():
        return a
    if isinstance(a, (list, tuple)):
        return json.dumps([list(x) if isinstance(x, tuple) else x for x in a], separators=(",", ":"))
    return str(a)


def key(fn: str, args) -> str:
    return f"{fn}({','.join(_arg(a) for a in args)})"


def encode(v):
    """A pynvml answer as JSON: structs and unions as objects of their fields, arrays and tuples as lists."""
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)) or isinstance(v, ctypes.Array):
        return [encode(x) for x in v]
    if isinstance(v, (ctypes.Structure, ctypes.Union)):
        return {name: encode(getattr(v, name)) for name, *_ in v._fields_}
    if hasattr(v, "value") and isinstance(v, ctypes._SimpleCData):
        return encode(v.value)
    if hasattr(v, "__dict__"):
        return {k: encode(x) for k, x in vars(v).items() if not k.startswith("_") and not callable(x)}
    return str(v)


def decode(v):
    """A recorded answer as gputop reads it: objects as attribute bags, lists as lists."""
    if isinstance(v, dict):
        return types.SimpleNamespace(**{k: decode(x) for k, x in v.items()})
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


class RecordingLib:
    """The real pynvml, every ``nvml*`` call's answer (or error) kept in ``answers`` / ``errors``."""

    def __init__(self, lib=pynvml):
        self._lib = lib
        self.answers: dict[str, object] = {}
        self.errors: dict[str, int] = {}

    def __getattr__(self, name):
        real = getattr(self._lib, name)
        if not name.startswith("nvml") or not callable(real) or name.startswith("nvmlClocks"):
            return real

        def call(*args):
            k = key(name, args)
            try:
                got = real(*[a.real if isinstance(a, Handle) else a for a in args])
            except pynvml.NVMLError as exc:
                self.errors[k] = int(exc.value)
                raise
            if name == "nvmlDeviceGetHandleByIndex":
                self.answers[k] = f"gpu{args[0]}"
                return Handle(args[0], got)
            self.answers[k] = encode(got)
            return got

        return call

    def record(self, provenance: str, gpus: int) -> dict:
        return {"format": FORMAT, "version": VERSION, "provenance": provenance, "gpus": gpus,
                "answers": dict(sorted(self.answers.items())), "errors": dict(sorted(self.errors.items()))}


def load_record(path: str | Path) -> dict:
    """A record, with its ``base`` record's answers under its own."""
    path = Path(path)
    rec = json.loads(path.read_text())
    if rec.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} record")
    if rec.get("base"):
        base = load_record(path.parent / rec["base"])
        answers = {**base["answers"], **rec.get("answers", {})}
        errors = {k: v for k, v in {**base["errors"], **rec.get("errors", {})}.items()
                  if k not in rec.get("answers", {})}
        answers = {k: v for k, v in answers.items() if k not in rec.get("errors", {})}
        rec = {**base, **rec, "answers": answers, "errors": errors}
    return rec


class RecordedNvml(types.SimpleNamespace):
    """pynvml answering from a record (a dict, or a file name in tests/data/health/); ``missing``: the calls it
    held no answer for."""

    def __init__(self, record):
        super().__init__()
        if not isinstance(record, dict):
            p = Path(record)
            record = load_record(p if p.is_absolute() or p.exists() else DATA / p)
        self.record = record
        self.missing: list[str] = []
        for name in dir(pynvml):
            if name.startswith(("NVML_", "c_nvml", "nvmlClocks", "nvmlMemory")) or name == "NVMLError":
                setattr(self, name, getattr(pynvml, name))

    def __getattribute__(self, name):
        if not name.startswith("nvml") or name.startswith(("nvmlClocks", "nvmlMemory_")):
            return object.__getattribute__(self, name)
        record = object.__getattribute__(self, "record")
        missing = object.__getattribute__(self, "missing")

        def call(*args):
            k = key(name, args)
            if name in ("nvmlInit", "nvmlShutdown"):
                if k in record["errors"]:
                    raise pynvml.NVMLError(record["errors"][k])
                return None
            if name == "nvmlDeviceGetHandleByIndex" and k not in record["answers"] and k not in record["errors"]:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            if k in record["errors"]:
                raise pynvml.NVMLError(record["errors"][k])
            if k in record["answers"]:
                return decode(record["answers"][k])
            missing.append(k)
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

        return call


def record_node(nvml) -> None:
    """Every NVML read ``gputop --doctor`` makes of a node, made once (through ``nvml``, whose library records):
    each GPU's static facts, health, a sample, its PCIe link and CPU affinity, and each pair's link facts."""
    from gputop.telemetry.health import read_cpu_affinity, read_health, read_pcie_link
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.static import device_count, read_link, read_static

    n = device_count(nvml)
    for i in range(n):
        read_static(nvml, i)
        read_health(nvml, i)
        read_pcie_link(nvml, i)
        read_cpu_affinity(nvml, i)
        for j in range(n):
            if j != i:
                read_link(nvml, i, j)
    src = LiveSource(nvml, gpus=list(range(n)), gpm=False, process_every=1)
    src.read()
    src.read()
    src.close()


def recorded_document(name: str) -> dict:
    """One document ``gputop --doctor --json`` wrote on the recorded node (``full_3``, ``quick_1``, ``passive_2``)."""
    return json.loads(gzip.decompress((RUNS / f"{name}.json.gz").read_bytes()))


def recorded_figures(run: str = "full_3", gpu: int = 1) -> dict:
    """The figures GPU ``gpu`` measured in doctor run ``run`` on the recorded node (default: GPU 1 of the full run
    in which nothing was beyond ok: a healthy H100's)."""
    return dict(recorded_document(run)["gpus"][gpu]["active"]["figures"])
