"""A stand-in for the ``pynvml`` module in a gputop *subprocess* (the fault tests, on a machine without a GPU).

A test puts this folder first on the subprocess's PYTHONPATH; ``import pynvml`` in gputop then gets a
:class:`fake_nvml.FakeNvml` (tests/fake_nvml.py: the real pynvml structs, constants and error classes,
answering from a real recorded static record in tests/data/static/), exactly as the in-process tests pass
one to ``Nvml(lib)``. It is the same thin fake at the pynvml boundary, installed by module name.

Environment:

- GPUTOP_FAKE_NVML_STATIC: the record in tests/data/static/ to answer from (default h200_recorded.json);
- GPUTOP_FAKE_NVML_MARK: a file that gets one byte appended at each sample (each
  nvmlDeviceGetUtilizationRates call), so that a test can wait until gputop is sampling;
- GPUTOP_FAKE_NVML_GPUS: how many GPUs (default 1), each answering from the same record with a UUID of its own
  (a torchrun job's GPUs: the tree's processes are on each one);
- GPUTOP_FAKE_NVML_LINKS: an ``nvml_links.json`` a real node wrote (bench/gpu/corpus_multi/nvml_links.py): its GPUs,
  each answering NVLink calls as that node did (tests/fake_nvml.LinksNvml);
- GPUTOP_FAKE_NVML_ANSWERS: a record of NVML's answers (tests/data/health/, tests/fake_health.py): every call is
  answered from it, and nothing else above applies (``gputop --doctor``'s tests).

NVML's process list holds the processes under this one (the command gputop launched, its children), as
on a GPU machine where the command runs on the GPU; with GPUTOP_FAKE_NVML_HOLDERS=DIR, only those of them that
have made a file ``DIR/PID`` (as a process appears in NVML's list once it has created its CUDA context: a test's
ranks do, its launcher and multiprocessing's helpers do not).
"""

import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_TESTS = _HERE.parent


def _load_real_pynvml():
    """The real nvidia-ml-py module (structs, constants, errors), from the rest of sys.path."""
    path = [p for p in sys.path if Path(p or os.getcwd()).resolve() != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("pynvml", path)
    if spec is None or spec.loader is None:
        raise ImportError("the fake pynvml needs the real nvidia-ml-py installed (for its structs and constants)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_fake_nvml():
    spec = importlib.util.spec_from_file_location("gputop_tests_fake_nvml", _TESTS / "fake_nvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.modules[__name__] = _load_real_pynvml()  # fake_nvml's own `import pynvml` gets the real bindings
_fake_nvml = _load_fake_nvml()


class _NoLog(list):
    def append(self, item) -> None:  # FakeNvml logs every call; a long run need not keep them
        pass


_LINKS = os.environ.get("GPUTOP_FAKE_NVML_LINKS")


class _SubprocessFake(_fake_nvml.LinksNvml if _LINKS else _fake_nvml.FakeNvml):
    def __init__(self, static: dict, mark: str | None, gpus: int = 1):
        if _LINKS:
            super().__init__(static, json.loads(Path(_LINKS).read_text()))
            gpus = len(self.links["gpus"])
        else:
            super().__init__(static)
        self.mark = mark
        self.gpus = gpus

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        if self.gpus == 1:
            return super().nvmlDeviceGetHandleByIndex(i)
        if not 0 <= i < self.gpus:
            raise _fake_nvml.pynvml.NVMLError(_fake_nvml.pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return f"handle{i}"

    def nvmlDeviceGetUUID(self, h):
        return self.static["uuid"] if h == "handle0" else f"{self.static['uuid'][:-2]}{h[-1]:0>2}"

    def nvmlDeviceGetUtilizationRates(self, h):
        if self.mark:
            fd = os.open(self.mark, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b".")
            finally:
                os.close(fd)
        return super().nvmlDeviceGetUtilizationRates(h)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [types.SimpleNamespace(pid=k.pid, usedGpuMemory=1 << 30) for k in _holders()]

    def nvmlDeviceGetProcessUtilization(self, h, since):
        import time

        kids = _holders()
        now = int(time.time() * 1e6)
        if not kids or now <= since:
            raise _fake_nvml.pynvml.NVMLError(_fake_nvml.pynvml.NVML_ERROR_NOT_FOUND)
        return [types.SimpleNamespace(pid=k.pid, timeStamp=now, smUtil=40, memUtil=20, encUtil=0, decUtil=0)
                for k in kids]


def _holders():
    """The processes NVML lists: this one's descendants (GPUTOP_FAKE_NVML_HOLDERS: those that made their file)."""
    import psutil

    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    marks = os.environ.get("GPUTOP_FAKE_NVML_HOLDERS")
    return [k for k in kids if os.path.exists(os.path.join(marks, str(k.pid)))] if marks else kids


def _answers(path: str):
    spec = importlib.util.spec_from_file_location("gputop_tests_fake_health", _TESTS / "fake_health.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RecordedNvml(path)


def _fake():
    record = os.environ.get("GPUTOP_FAKE_NVML_STATIC") or "h200_recorded.json"
    static = json.loads((_TESTS / "data" / "static" / record).read_text())["static"]
    fake = _SubprocessFake(static, os.environ.get("GPUTOP_FAKE_NVML_MARK"),
                           int(os.environ.get("GPUTOP_FAKE_NVML_GPUS") or 1))
    fake.calls = _NoLog()
    return fake


_ANSWERS = os.environ.get("GPUTOP_FAKE_NVML_ANSWERS")
sys.modules[__name__] = _answers(_ANSWERS) if _ANSWERS else _fake()
