"""The workloads gputop knows: every ``*.py`` (not starting with ``_``) in ``workloads/``, plus the
folders named in ``GPUTOP_WORKLOADS_PATH`` (os.pathsep-separated; the tests use it for fault workloads).

Each module is loaded by file path under a unique module name. Loading only reads ``NAME``,
``DESCRIPTION``, ``PARAMS``, ``QUICK``, ``CPU``, ``NEEDS``, ``TIMEOUT`` (default timeout, s), ``analyze(doc)``
and ``csv_rows(doc)`` (the rows of ``--csv``, in the workload's own column order; default: the points): workload
scripts import cupy/torch inside ``run()``, so listing them never loads a GPU library. A module that
fails to load is skipped and its error kept in ``Registry.errors``. When two folders hold a workload
of the same name, the first one wins (``workloads/`` first, then the path entries in order).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from gputop import paths
from gputop.workload_api import Param

ENV_PATH = "GPUTOP_WORKLOADS_PATH"


class UnknownWorkload(LookupError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f"unknown workload '{name}' (known: {', '.join(known) or 'none'})")
        self.name, self.known = name, known


@dataclass
class WorkloadSpec:
    name: str
    description: str
    params: list[Param]
    path: Path
    module: ModuleType
    quick: dict = field(default_factory=dict)
    cpu: dict | None = None  # param overrides with --device cpu; None and no "device" param: GPU only
    needs: list[str] = field(default_factory=list)
    timeout: float | None = None  # a default timeout in seconds (module attribute TIMEOUT)

    @property
    def analyze(self) -> Callable[[dict], object] | None:
        fn = getattr(self.module, "analyze", None)
        return fn if callable(fn) else None

    @property
    def has_device_param(self) -> bool:
        return any(p.name == "device" for p in self.params)

    @property
    def supports_cpu(self) -> bool:
        dev = next((p for p in self.params if p.name == "device"), None)
        return dev is not None and (dev.type != "choice" or "cpu" in dev.choices)

    def describe(self) -> dict:
        return {"name": self.name, "description": self.description, "path": str(self.path),
                "needs": list(self.needs), "cpu": self.supports_cpu, "quick": dict(self.quick),
                "cpu_overrides": dict(self.cpu or {}), "params": [p.describe() for p in self.params]}


def workload_dirs(env: dict | None = None) -> list[Path]:
    env = os.environ if env is None else env
    dirs: list[Path] = []
    try:
        dirs.append(paths.workloads_dir())
    except FileNotFoundError:
        pass
    for entry in (env.get(ENV_PATH) or "").split(os.pathsep):
        if entry.strip():
            dirs.append(Path(entry.strip()).expanduser())
    return dirs


def _module_name(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    return f"gputop_workload_{path.stem}_{digest}"


def load_spec(path: Path) -> WorkloadSpec:
    """Load one workload module by file path (raises on any problem, with the reason)."""
    path = Path(path).resolve()
    modname = _module_name(path)
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    missing = [a for a in ("NAME", "DESCRIPTION", "PARAMS", "run") if not hasattr(module, a)]
    if missing:
        raise ImportError(f"{path.name} is not a workload (no {', '.join(missing)})")
    params = list(module.PARAMS)
    if not all(isinstance(p, Param) for p in params):
        raise ImportError(f"{path.name}: PARAMS must be gputop.workload_api.Param objects")
    return WorkloadSpec(
        name=str(module.NAME), description=str(module.DESCRIPTION), params=params, path=path, module=module,
        quick=dict(getattr(module, "QUICK", None) or {}), cpu=getattr(module, "CPU", None),
        needs=list(getattr(module, "NEEDS", None) or []), timeout=getattr(module, "TIMEOUT", None),
    )


class Registry:
    def __init__(self, dirs: list[Path] | None = None):
        self.dirs = workload_dirs() if dirs is None else [Path(d) for d in dirs]
        self.specs: dict[str, WorkloadSpec] = {}
        self.errors: list[str] = []  # "file: reason" of modules that could not be loaded
        for d in self.dirs:
            if not d.is_dir():
                self.errors.append(f"{d}: not a folder ({ENV_PATH})")
                continue
            for path in sorted(d.glob("*.py")):
                if path.name.startswith("_"):
                    continue
                try:
                    spec = load_spec(path)
                except BaseException as exc:  # a broken workload must not break --list
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    self.errors.append(f"{path}: {type(exc).__name__}: {exc}")
                    continue
                self.specs.setdefault(spec.name, spec)

    def names(self) -> list[str]:
        return sorted(self.specs)

    def get(self, name: str) -> WorkloadSpec:
        if name not in self.specs:
            raise UnknownWorkload(name, self.names())
        return self.specs[name]

    def __iter__(self):
        return iter(self.specs[n] for n in self.names())

    def __len__(self) -> int:
        return len(self.specs)
