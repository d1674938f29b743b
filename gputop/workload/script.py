"""A workload script from start to end: what it needs installed, its own command line
(``python workloads/NAME.py [--param k=v] [--quick] [--events]``), and its run with SIGINT/SIGTERM as a graceful
stop and every failure turned into an error event and an exit code (gputop.exitcodes).

A module not found inside ``run`` (cupy, torch) ends the run with exit 4 and how to install it
(:class:`MissingDependency`, :func:`missing_package`); the registry reads :func:`install_hint` and
:func:`is_installed` to list a workload that cannot run here.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import traceback

from gputop import exitcodes
from gputop.workload.emit import Emitter
from gputop.workload.params import Param, ParamError, resolve_params

# Exit codes of a workload child: names for gputop.exitcodes (the one place that defines them).
EXIT_OK = exitcodes.OK
EXIT_FAILED = exitcodes.FAILED
EXIT_USAGE = exitcodes.USAGE
EXIT_MISSING_DEPENDENCY = exitcodes.MISSING_DEPENDENCY
EXIT_INTERRUPTED = exitcodes.INTERRUPTED
# A file the runner (gputop/runner/workload_run.py) creates when it asks this workload to stop: a SIGINT that comes
# while Python starts up is swallowed there (site's .pth processing, the import system's path hooks: beside two test
# suites, 2 stops of 150 asked just before the start were lost), so the handler's first act is to look for it.
STOP_FILE_ENV = "GPUTOP_STOP_FILE"

# How to get what a workload imports: gputop's extras (pyproject.toml) for the GPU libraries, and
# numpy, a dependency of gputop itself (missing only from a broken install).
INSTALL = {
    "cupy": "pip install 'gputop[cuda12]' or 'gputop[cuda13]'",
    "torch": "pip install 'gputop[torch]'",
    "numpy": "pip install numpy",
}


def install_hint(package: str) -> str:
    """How to install ``package`` (a top-level import name), as gputop's messages say it."""
    return INSTALL.get(package, f"install the package that provides the module '{package}'")


def is_installed(package: str) -> bool:
    """True if the top-level module ``package`` can be found here (it is not imported)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def missing_package(exc: BaseException) -> str | None:
    """The third-party package that ``exc`` says is not installed: the top-level name of a
    ModuleNotFoundError's module, unless that is gputop itself or is installed (then a submodule or
    something inside the package is missing: a real error, not a dependency to install)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    return None if top == "gputop" or is_installed(top) else top


class MissingDependency(RuntimeError):
    """A package the workload needs is not installed; the message says how to install it."""

    def __init__(self, package: str, extra: str | None = None):
        how = f"pip install 'gputop[{extra}]'" if extra else install_hint(package)
        super().__init__(f"this workload needs {package}: {how}")
        self.package, self.extra = package, extra


def require_cupy():
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise MissingDependency("cupy") from None
    return cupy


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingDependency("torch") from None
    return torch


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    return "OutOfMemory" in name or "out of memory" in str(exc).lower()


def main(module, argv: list[str] | None = None) -> int:
    """The command line of a workload script: ``python workloads/NAME.py [--param k=v] [--events]``."""
    params: list[Param] = module.PARAMS
    ap = argparse.ArgumentParser(
        prog=f"python workloads/{module.NAME}.py",
        description=module.DESCRIPTION,
        epilog="parameters (give each as --param NAME=VALUE or --NAME VALUE):\n" + "\n".join(
            f"  {p.name:<14} {p.help}  [default {p.default}; {p.allowed()}]" for p in params),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="set a parameter")
    for p in params:
        ap.add_argument(f"--{p.name.replace('_', '-')}", dest=f"p_{p.name}", metavar="VALUE", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="a few-second version of the run")
    ap.add_argument("--events", action="store_true", help="write JSON-lines events on stdout (used by gputop)")
    args = ap.parse_args(argv)
    emit = Emitter(events=args.events)
    given = {}
    for item in args.param:
        if "=" not in item:
            print(f"error: --param takes NAME=VALUE (got {item!r})", file=sys.stderr)
            return EXIT_USAGE
        k, v = item.split("=", 1)
        given[k.strip()] = v
    for p in params:
        v = getattr(args, f"p_{p.name}")
        if v is not None:
            given[p.name] = v
    try:
        overrides = dict(getattr(module, "QUICK", None) or {}) if args.quick else {}
        values = resolve_params(params, given, overrides)
        if values.get("device") == "cpu" and getattr(module, "CPU", None):
            overrides.update(module.CPU)  # the CPU sizes win over --quick, as in `gputop --run --device cpu`
            values = resolve_params(params, given, overrides)
    except ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return run_module(module, values, emit)


def run_module(module, values: dict, emit: Emitter) -> int:
    """Run ``module.run`` with graceful SIGINT/SIGTERM and errors turned into events."""

    def _stop(signum, frame):
        if emit.stop_requested:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        emit.stop_requested = True

    old_int = signal.signal(signal.SIGINT, _stop)
    old_term = signal.signal(signal.SIGTERM, _stop)
    stop_file = os.environ.get(STOP_FILE_ENV)
    if stop_file and os.path.exists(stop_file):  # asked before this process could hear it (STOP_FILE_ENV)
        emit.stop_requested = True
    code = EXIT_OK
    try:
        module.run(values, emit)
        if emit.stop_requested:
            emit.status, code = "interrupted", EXIT_INTERRUPTED
        elif emit.status == "error":
            code = EXIT_FAILED
    except MissingDependency as exc:
        emit.error(str(exc), kind="missing_dependency")
        code = EXIT_MISSING_DEPENDENCY
    except KeyboardInterrupt:
        emit.status, code = "interrupted", EXIT_INTERRUPTED
    except ParamError as exc:
        emit.error(str(exc), kind="bad_param")
        code = EXIT_USAGE
    except Exception as exc:
        package = missing_package(exc)  # `import numpy` inside run() where numpy is not installed
        if package is not None:
            emit.error(str(MissingDependency(package)), kind="missing_dependency")
            code = EXIT_MISSING_DEPENDENCY
        else:
            kind = "oom" if is_oom(exc) else ("cuda" if "cuda" in type(exc).__module__.lower() or "CUDA" in str(exc) else "exception")
            emit.error(f"{type(exc).__name__}: {exc}", kind=kind, detail=traceback.format_exc(limit=8))
            code = EXIT_FAILED
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    if not emit.events and emit.report and emit.points:  # on its own: the results, the key figure and the verdicts
        from gputop.workload.util import print_verdicts

        print_verdicts(module.NAME, emit.params, emit.device, emit.points, emit.results, stream=emit.stream)
    emit.done()
    return code

