"""The results views of the lessons that draw their own (``NAME.py``, by workload name): the roofline's plot
against the roofs, offload's time against size, fusion's bars per variant, transfer's bandwidth and streams.

Each module has ``view(doc, width, height) -> list[Text]``; :mod:`gputop.tui.results.view` asks :func:`view` for a
run's, and draws the bars where there is none. :mod:`.plot` holds the plots they share. Pure (Rich ``Text``).
"""

from __future__ import annotations

import importlib
from typing import Callable

NAMES = ("fusion", "offload", "roofline", "transfer")


def view(workload: str | None) -> Callable | None:
    """The results view of ``workload`` (``view(doc, width, height)``), or None: no view of its own."""
    if workload not in NAMES:
        return None
    return importlib.import_module(f"{__name__}.{workload}").view
