"""The quick loop's share of a parametrized sweep: ``pytest -m "not slow"`` runs a representative of each family of
cases, the full suite runs every case (the others are marked ``slow``; nothing is dropped)."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import pytest


def first_of_each(cases: Iterable[Sequence], family: Callable[[Sequence], object],
                  ids: Callable[[Sequence], str] | None = None) -> list:
    """``cases`` as ``pytest.param``s: the first case of each ``family(case)`` in the quick loop, the rest ``slow``."""
    seen, out = set(), []
    for case in cases:
        key = family(case)
        marks = () if key not in seen else pytest.mark.slow
        seen.add(key)
        out.append(pytest.param(*case, marks=marks, id=ids(case) if ids else None))
    return out


def only(cases: Iterable, quick: Callable[[object], bool], ids: Callable[[object], str] | None = None,
         unpack: bool = False) -> list:
    """``cases`` as ``pytest.param``s: those ``quick(case)`` holds for in the quick loop, the others ``slow``."""
    out = []
    for case in cases:
        values = tuple(case) if unpack else (case,)
        out.append(pytest.param(*values, marks=() if quick(case) else pytest.mark.slow,
                                id=ids(case) if ids else None))
    return out


def slow(*values, id: str | None = None):
    """One case of a parametrize list that only the full suite runs."""
    return pytest.param(*values, marks=pytest.mark.slow, id=id)
