"""The workloads gputop knows: every ``*.py`` (not starting with ``_``) in ``workloads/``, plus the
folders named in ``GPUTOP_WORKLOADS_PATH`` (os.pathsep-separated; the tests use it for fault workloads).

Each module is loaded by file path under a unique module name. Loading only reads ``NAME``,
``DESCRIPTION``, ``PARAMS``, ``QUICK``, ``CPU``, ``NEEDS``, ``TIMEOUT`` (default timeout, s), ``GPUS`` ("all":
every GPU is visible to it, and sampled): workload scripts import cupy/torch inside ``run()``, so listing them
never loads a GPU library. A workload's ``analyze(doc)`` and ``csv_rows(doc)`` (the rows of ``--csv``, in its
own column order; default: the points) are its lesson's (:func:`gputop.lessons.lesson`, by name), else the
script's own (a workload from ``GPUTOP_WORKLOADS_PATH`` may define them). When two folders
hold a workload of the same name, the first one wins (``workloads/`` first, then the path entries in order).

A workload that imports a third-party module at its top that is not installed here (numpy, say) is
still listed: the registry reads its NAME, DESCRIPTION and NEEDS from its source text (without running
it) and keeps the modules it lacks in ``WorkloadSpec.missing``. ``Registry.get`` refuses such a workload with
:class:`MissingWorkloadDependency` (gputop exits 4), since its script cannot even start. Any other
failure is an error, not a dependency: a syntax error, a missing gputop module, a missing piece of an
installed package, a module beside the workload, a module-level error; that module is skipped and its
error kept in ``Registry.errors``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from gputop import paths
from gputop.lessons import lesson
from gputop.workload.params import Param
from gputop.workload.script import install_hint, is_installed, missing_package

ENV_PATH = "GPUTOP_WORKLOADS_PATH"


class UnknownWorkload(LookupError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f"unknown workload '{name}' (known: {', '.join(known) or 'none'})")
        self.name, self.known = name, known


class MissingWorkloadDependency(UnknownWorkload):
    """The workload is known, but a module it imports at its top is not installed here: gputop exits
    4 (exitcodes.MISSING_DEPENDENCY). A kind of UnknownWorkload (there is no workload of that name that
    can run here), so a caller that only knows UnknownWorkload still gives its one line, not a traceback."""

    def __init__(self, name: str, missing: list[str]):
        LookupError.__init__(self, f"workload '{name}' needs " + "; ".join(f"{m}: {install_hint(m)}" for m in missing))
        self.name, self.known, self.missing = name, [], list(missing)


@dataclass
class WorkloadSpec:
    name: str
    description: str
    params: list[Param]
    path: Path
    module: ModuleType | None  # None: not loadable here (see ``missing``)
    quick: dict = field(default_factory=dict)
    cpu: dict | None = None  # param overrides with --device cpu; None and no "device" param: GPU only
    needs: list[str] = field(default_factory=list)  # NEEDS, then the missing modules NEEDS did not name
    timeout: float | None = None  # a default timeout in seconds (module attribute TIMEOUT)
    missing: list[str] = field(default_factory=list)  # imported at the top, not installed: it cannot run here
    gpus: str = "one"  # GPUS: "one" (its cuda:0 is the chosen GPU) or "all" (every GPU visible: a torchrun job)

    @property
    def runnable(self) -> bool:
        return not self.missing

    def not_installed(self) -> list[str]:
        """The needs that are not installed here (a NEEDS entry may only matter on one device)."""
        return [n for n in self.needs if n in self.missing or not is_installed(n)]

    @property
    def analyze(self) -> Callable[[dict], object] | None:
        """Its lesson's ``analyze``, else the script's own, else None."""
        return self._lesson_or_own("analyze")

    @property
    def csv_rows(self) -> Callable[[dict], list[dict]] | None:
        """Its lesson's ``csv_rows``, else the script's own, else None (``--csv`` writes the points)."""
        return self._lesson_or_own("csv_rows")

    def _lesson_or_own(self, what: str):
        found = lesson(self.name)
        fn = getattr(found, what) if found is not None else getattr(self.module, what, None)
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
                "needs": list(self.needs), "install": {n: install_hint(n) for n in self.needs},
                "not_installed": self.not_installed(), "runnable": self.runnable,
                "cpu": self.supports_cpu, "quick": dict(self.quick),
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


def _exec(path: Path) -> ModuleType:
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
    return module


def _missing_here(exc: BaseException, path: Path) -> str | None:
    """The third-party module whose absence ``exc`` reports, or None if it is a real error."""
    top = missing_package(exc)
    if top is None or (path.parent / f"{top}.py").exists() or (path.parent / top).is_dir():
        return None  # a module beside the workload is not on sys.path here: not something to install
    return top


def _top_level_missing(tree: ast.Module, path: Path) -> list[str]:
    """The third-party modules the file imports at its top level that are not installed here."""
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            beside = (path.parent / f"{top}.py").exists() or (path.parent / top).is_dir()
            if top != "gputop" and not beside and not is_installed(top) and top not in out:
                out.append(top)
    return out


def _literals(tree: ast.Module) -> dict:
    """The module-level ``NAME = <literal>`` assignments of a file, read without running it."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def _spec_from_source(path: Path, first: BaseException) -> WorkloadSpec:
    """A workload that cannot be loaded here because a module it imports at its top is missing: listed
    from its source text (NAME, DESCRIPTION, NEEDS; its parameters need the module), never run."""
    tree = ast.parse(path.read_text(), str(path))
    missing = _top_level_missing(tree, path)
    consts = _literals(tree)
    if not missing or not isinstance(consts.get("NAME"), str):
        raise first
    needs = [str(n) for n in consts.get("NEEDS") or []]
    return WorkloadSpec(name=consts["NAME"], description=str(consts.get("DESCRIPTION", "")), params=[], path=path,
                        module=None, needs=needs + [m for m in missing if m not in needs], missing=missing)


def load_spec(path: Path) -> WorkloadSpec:
    """Load one workload module by file path (raises on any problem, with the reason). A workload whose
    top-level import of a third-party module fails is listed from its source text instead, with the
    modules it lacks in ``missing``."""
    path = Path(path).resolve()
    try:
        module = _exec(path)
    except ModuleNotFoundError as exc:
        if _missing_here(exc, path) is None:
            raise
        return _spec_from_source(path, exc)
    return _spec(path, module)


def _spec(path: Path, module: ModuleType) -> WorkloadSpec:
    lacking = [a for a in ("NAME", "DESCRIPTION", "PARAMS", "run") if not hasattr(module, a)]
    if lacking:
        raise ImportError(f"{path.name} is not a workload (no {', '.join(lacking)})")
    params = list(module.PARAMS)
    if not all(isinstance(p, Param) for p in params):
        raise ImportError(f"{path.name}: PARAMS must be gputop.workload.Param objects")
    return WorkloadSpec(
        name=str(module.NAME), description=str(module.DESCRIPTION), params=params, path=path, module=module,
        quick=dict(getattr(module, "QUICK", None) or {}), cpu=getattr(module, "CPU", None),
        needs=list(getattr(module, "NEEDS", None) or []), timeout=getattr(module, "TIMEOUT", None),
        gpus="all" if getattr(module, "GPUS", "one") == "all" else "one",
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
        """The workload to run; raises UnknownWorkload, or MissingWorkloadDependency when a module it
        imports at its top is not installed (``specs[name]`` still has it, for listing)."""
        if name not in self.specs:
            raise UnknownWorkload(name, self.names())
        spec = self.specs[name]
        if spec.missing:
            raise MissingWorkloadDependency(name, spec.missing)
        return spec

    def __iter__(self):
        return iter(self.specs[n] for n in self.names())

    def __len__(self) -> int:
        return len(self.specs)
