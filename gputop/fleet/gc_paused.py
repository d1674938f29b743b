"""Python's cyclic garbage collector held off while a fleet's answers are read.

A refresh at 8,192 GPUs decodes ~10 MB of JSON into millions of small objects and makes rows of them; each 700 new
objects start a collection, and the oldest generation's, which walks every object the process holds (the page's
rows, the judging's window, the app), runs several times a read: measured 0.45-0.5 s of this process' CPU a refresh
(1.05 -> 0.59 s held off; docs/benchmarks.md "The collector held off"). What is read is acyclic (dicts, lists,
numbers: freed by their counts as usual); any cycle is collected after, as always. ``paused`` nests and may be
entered from several threads at once: the collector runs again once the last one leaves (where it ran before).
"""

from __future__ import annotations

import functools
import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def paused():
    """The collector off within (as it was after the last holder leaves)."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


def while_paused(fn):
    """``fn`` run with the collector :func:`paused`."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with paused():
            return fn(*args, **kwargs)
    return wrapped
