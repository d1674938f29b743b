"""What every teaching workload script in ``workloads/`` is made of, and what it uses while it runs.

A workload module defines::

    NAME = "roofline"
    DESCRIPTION = "one line for `gputop --list`"
    PARAMS = [device_param("cuda: CuPy kernels; cpu: NumPy on the host"),
              Param("n", "int", 1 << 26, lo=1024, hi=1 << 31, help="elements"), ...]
    NEEDS = ["cupy"]          # optional: what run() imports ("cupy", "torch"; see script.INSTALL)
    QUICK = {...}; CPU = {...}  # optional: param overrides for --quick / --device cpu
    TIMEOUT = 300.0           # optional: default timeout (s) of `gputop --run NAME`

    def run(p: dict, emit: Emitter) -> None: ...   # p: validated parameter values

    if __name__ == "__main__":
        raise SystemExit(main(sys.modules[__name__]))

Its analysis (``analyze``, ``csv_rows``, its figure) is its lesson's (:mod:`gputop.lessons`), found by name; a
workload of one's own (``GPUTOP_WORKLOADS_PATH``) may define ``analyze(doc)`` and ``csv_rows(doc)`` itself.
As a plain script from a checkout (``python workloads/NAME.py``), ``gputop`` may not be on sys.path (or an
installed one would shadow the checkout's), so each script starts with three lines that put its checkout
first; they run before any of gputop is importable, so they cannot live here. It imports cupy/torch
*inside* ``run`` so that ``gputop --list`` and ``--help`` work without them. A third-party module imported
at the top (numpy in ``dataloader.py``) must be a dependency of gputop (pyproject.toml); where it is missing
all the same, ``gputop --list`` still shows the workload with what it needs, and ``gputop --run`` refuses it
with exit 4 (see gputop.runner.registry).

- :mod:`.params`: :class:`Param`, its checks, ``device_param``;
- :mod:`.emit`: :class:`Emitter`, the events a run writes (JSON lines for gputop, text on its own);
- :mod:`.script`: its command line, its run (signals, errors, exit codes), what it needs installed;
- :mod:`.util`: timing statistics, the torch device and TF32, a small CNN, what joins two GPUs, and the
  verdicts at the end of a run by hand.

The names a script imports are here; the runner, the frontends and the tests import from the modules.
"""

from __future__ import annotations

from gputop.workload.emit import Emitter
from gputop.workload.params import Param, ParamError, device_param
from gputop.workload.script import MissingDependency, is_oom, main, require_cupy, require_torch

__all__ = ["Emitter", "MissingDependency", "Param", "ParamError", "device_param", "is_oom", "main",
           "require_cupy", "require_torch"]
