"""What every workload script in ``workloads/`` shares: parameters, events, and its own command line.

A workload module defines::

    NAME = "roofline"
    DESCRIPTION = "one line for `gputop --list`"
    PARAMS = [Param("n", "int", 1 << 26, lo=1024, hi=1 << 31, help="elements"), ...]
    NEEDS = ["cupy"]          # optional: what run() imports ("cupy", "torch"; see INSTALL)
    QUICK = {...}; CPU = {...}  # optional: param overrides for --quick / --device cpu
    TIMEOUT = 300.0           # optional: default timeout (s) of `gputop --run NAME`

    def run(p: dict, emit: Emitter) -> None: ...   # p: validated parameter values
    def analyze(doc: dict) -> None: ...            # optional: enrich the run document (gputop process)
    def csv_rows(doc: dict) -> list[dict]: ...     # optional: rows of `--csv FILE` (default: the points)

    if __name__ == "__main__":
        raise SystemExit(main(sys.modules[__name__]))

As a plain script from a checkout (``python workloads/NAME.py``), ``gputop`` may not be on sys.path
(or an installed one would shadow the checkout's), so each script starts with::

    _CHECKOUT = Path(__file__).resolve().parents[1]
    if (_CHECKOUT / "gputop").is_dir() and str(_CHECKOUT) not in sys.path:
        sys.path.insert(0, str(_CHECKOUT))

It imports cupy/torch *inside* ``run`` so that ``gputop --list`` and ``--help`` work without them.
A third-party module imported at the top (numpy in ``dataloader.py``) must be a dependency of gputop
(pyproject.toml); where it is missing all the same, ``gputop --list`` still shows the workload with
what it needs, and ``gputop --run`` refuses it with exit 4 (see gputop.runner.registry). A module not
found inside ``run`` ends the run the same way: exit 4, with how to install it.

Events (one JSON object per line on stdout when run with ``--events``; the runner and the TUI read
them; ``t`` is ``time.monotonic()``, the same clock as gputop's sampler on Linux)::

    {"event": "started", "workload", "params", "device": {...}, "pid"}
    {"event": "phase", "name"}                 # a new phase begins (telemetry is summarised per phase)
    {"event": "progress", "done", "total", "message"}
    {"event": "point", "data": {...}}          # one measured result (a roofline point, a mode, a batch size)
    {"event": "result", "data": {...}}         # workload-level results (measured roofs, summary)
    {"event": "log", "message"}
    {"event": "warning", "message", "code"}
    {"event": "error", "message", "kind"}      # kind: missing_dependency | oom | cuda | bad_param | exception
    {"event": "done", "status"}                # ok | interrupted | error

Without ``--events`` the same calls print readable text, so the script is a teaching tool on its own.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from gputop import exitcodes
from gputop.documents import jsonable

# Exit codes of a workload child: names for gputop.exitcodes (the one place that defines them).
EXIT_OK = exitcodes.OK
EXIT_FAILED = exitcodes.FAILED
EXIT_USAGE = exitcodes.USAGE
EXIT_MISSING_DEPENDENCY = exitcodes.MISSING_DEPENDENCY
EXIT_INTERRUPTED = exitcodes.INTERRUPTED

PARAM_TYPES = ("int", "float", "int_list", "float_list", "str", "bool", "choice")


class ParamError(ValueError):
    """A bad parameter value; the message names the parameter and what is allowed."""


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


@dataclass
class Param:
    name: str
    type: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: list[str] = field(default_factory=list)
    help: str = ""

    def __post_init__(self):
        if self.type not in PARAM_TYPES:
            raise ValueError(f"param {self.name}: unknown type {self.type}")

    def allowed(self) -> str:
        if self.type == "choice":
            return "one of " + ", ".join(self.choices)
        if self.type == "bool":
            return "true or false"
        kind = {"int": "an integer", "float": "a number", "int_list": "comma-separated integers",
                "float_list": "comma-separated numbers", "str": "text"}[self.type]
        if self.lo is not None and self.hi is not None:
            return f"{kind} in [{_num(self.lo)}, {_num(self.hi)}]"
        if self.lo is not None:
            return f"{kind} >= {_num(self.lo)}"
        return kind

    def parse(self, text: str) -> Any:
        """Parse and validate a value given as text (``--param name=text``)."""
        text = str(text).strip()
        bad = ParamError(f"bad value for parameter '{self.name}': {text!r} (allowed: {self.allowed()})")
        try:
            if self.type == "int":
                value = _int(text)
            elif self.type == "float":
                value = float(text)
            elif self.type in ("int_list", "float_list"):
                conv = _int if self.type == "int_list" else float
                value = [conv(x) for x in text.split(",") if x.strip()]
                if not value:
                    raise bad
            elif self.type == "bool":
                if text.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise bad
                value = text.lower() in ("1", "true", "yes", "on")
            elif self.type == "choice":
                if text not in self.choices:
                    raise bad
                value = text
            else:
                value = text
        except (ValueError, OverflowError):
            raise bad from None
        self.check(value, bad)
        return value

    def check(self, value: Any, bad: ParamError | None = None) -> Any:
        bad = bad or ParamError(f"bad value for parameter '{self.name}': {value!r} (allowed: {self.allowed()})")
        items = value if isinstance(value, list) else [value]
        if self.type in ("int", "float", "int_list", "float_list"):
            for v in items:
                if v != v or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
                    raise bad
        return value

    def describe(self) -> dict:
        d = {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
             "allowed": self.allowed()}
        if self.choices:
            d["choices"] = self.choices
        return d


def _int(text: str) -> int:
    text = text.strip().replace("_", "")
    if "**" in text:  # 2**26
        base, exp = text.split("**")
        return int(base) ** int(exp)
    if text.startswith("1<<"):
        return 1 << int(text[3:])
    return int(text)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def resolve_params(params: list[Param], given: dict[str, str], quick_overrides: dict | None = None) -> dict:
    """Defaults, then ``quick_overrides`` (for --quick), then the given ``name=text`` values, validated."""
    by_name = {p.name: p for p in params}
    unknown = [k for k in given if k not in by_name]
    if unknown:
        raise ParamError(f"unknown parameter '{unknown[0]}' (known: {', '.join(by_name) or 'none'})")
    values = {p.name: p.default for p in params}
    values.update(quick_overrides or {})
    for k, text in given.items():
        values[k] = by_name[k].parse(text)
    return values


class Emitter:
    """Sends events: JSON lines (``events=True``, for gputop) or readable text (standalone)."""

    def __init__(self, events: bool = False, stream=None, err=None):
        self.events = events
        self.stream = stream or sys.stdout
        self.err = err or sys.stderr
        self.stop_requested = False
        self.status = "ok"
        self.on_point: Callable[[dict], None] | None = None  # a standalone script's own printer
        self.params, self.device, self.points, self.results = {}, {}, [], {}  # standalone: for the report at the end
        self.report = True  # standalone: print the results, the figure and the verdicts at the end (a quiet rank: no)

    def _send(self, event: str, **fields) -> None:
        if self.events:
            fields = {"event": event, "t": time.monotonic(), **fields}
            self.stream.write(json.dumps(fields, default=jsonable) + "\n")
            self.stream.flush()

    def started(self, workload: str, params: dict, device: dict) -> None:
        self._send("started", workload=workload, params=params, device=device, pid=_pid())
        if not self.events:
            self.params, self.device = dict(params), dict(device)
            print(f"{workload} on {device.get('name', device.get('kind'))}  params: "
                  + " ".join(f"{k}={_short(v)}" for k, v in params.items()), file=self.stream)

    def phase(self, name: str) -> None:
        self._send("phase", name=name)
        if not self.events:
            print(f"\n== {name}", file=self.stream)

    def progress(self, done: int, total: int, message: str = "") -> None:
        self._send("progress", done=done, total=total, message=message)

    def point(self, data: dict) -> None:
        self._send("point", data=data)
        if not self.events:
            self.points.append(dict(data))
            if self.on_point:
                self.on_point(data)
            else:
                print("  " + "  ".join(f"{k}={_short(v)}" for k, v in data.items()), file=self.stream)

    def result(self, data: dict) -> None:
        self._send("result", data=data)
        if not self.events:  # printed as labelled lines at the end (run_module)
            self.results.update(data)

    def log(self, message: str) -> None:
        self._send("log", message=message)
        if not self.events:
            print(message, file=self.stream)

    def warning(self, message: str, code: str = "warning") -> None:
        self._send("warning", message=message, code=code)
        if not self.events:
            print(f"WARNING: {message}", file=self.err)

    def error(self, message: str, kind: str = "exception", detail: str = "") -> None:
        self.status = "error"
        self._send("error", message=message, kind=kind, detail=detail)
        if not self.events:
            print(f"error: {message}", file=self.err)

    def done(self) -> None:
        self._send("done", status=self.status)

    def should_stop(self) -> bool:
        """True after SIGINT/SIGTERM: finish the current measurement, emit what you have, return."""
        return self.stop_requested


def _pid() -> int:
    import os

    return os.getpid()


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ",".join(_short(x) for x in v)
    return str(v)


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
        from gputop.workload_util import print_verdicts

        print_verdicts(module.NAME, emit.params, emit.device, emit.points, emit.results, stream=emit.stream)
    emit.done()
    return code

