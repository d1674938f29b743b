"""Where the shipped folders are: the same code works from a checkout, an editable install and a wheel.

In a checkout (``PYTHONPATH=.`` or ``pip install -e .``) ``workloads/`` and ``kernels/`` sit beside the
``gputop/`` package; a wheel installs them inside it as ``gputop/workloads`` and ``gputop/kernels``.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (PACKAGE / name, PACKAGE.parent / name):
        if candidate.is_dir() and any(candidate.iterdir()):
            return candidate
    raise FileNotFoundError(f"gputop: cannot find its {name}/ folder (looked in {PACKAGE} and {PACKAGE.parent})")


def workloads_dir() -> Path:
    return _find("workloads")


def kernels_dir() -> Path:
    return _find("kernels")


def package_root() -> Path:
    """The folder that holds the ``gputop`` package (put on a child's PYTHONPATH)."""
    return PACKAGE.parent
