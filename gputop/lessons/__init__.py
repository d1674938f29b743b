"""The lessons: what gputop knows about each teaching workload, one module per workload (``NAME.py``).

A lesson holds its workload's analysis: ``analyze(doc)`` (verdicts on the run document), ``csv_rows(doc)``
where ``--csv`` has its own columns, ``figures(doc)`` (its key figure's series, :class:`.figures.Curves` or
:class:`.figures.Bars`, drawn at the end of its text report) and ``TOUR`` (``gputop --tour``'s sentence on
what to look at) where it is a stop of the tour. The modules beside them are no lessons: :mod:`.docs` holds
the document helpers they share, :mod:`.figures` draws the figures, :mod:`.report_lines` writes the results
and verdicts of the text reports. The script in ``workloads/`` only runs and measures; the runner, the
headless CLI and the TUI find its lesson here, by the workload's name: ``lesson(name)``. A workload without a
lesson (one from ``GPUTOP_WORKLOADS_PATH``) may define ``analyze`` and ``csv_rows`` itself
(:class:`gputop.runner.registry.WorkloadSpec`).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Callable

NAMES = ("allreduce", "amp", "batchsize", "cudagraphs", "dataloader", "fusion", "offload", "roofline", "transfer")


@dataclass(frozen=True)
class Lesson:
    name: str
    analyze: Callable[[dict], object]
    csv_rows: Callable[[dict], list[dict]] | None = None  # None: --csv writes the points
    tour: str | None = None  # None: not a stop of gputop --tour
    figures: Callable[[dict], list] | None = None  # None: the text report draws no figure


@functools.cache
def lesson(name: str | None) -> Lesson | None:
    """The lesson of workload ``name``, or None when gputop has none for it."""
    if name not in NAMES:
        return None
    module = importlib.import_module(f"{__name__}.{name}")
    return Lesson(name, module.analyze, getattr(module, "csv_rows", None), getattr(module, "TOUR", None),
                  getattr(module, "figures", None))
