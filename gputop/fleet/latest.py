"""An instant query's answer kept between reads and topped up with what was scraped since (the cluster page's
refreshes: ``reader.py``).

An instant query asks Prometheus for each series' newest sample within its look-back (5 min): at 8,192 GPUs each of
the page's row series is 1.7 MB of answer, and a refresh's queries cost Prometheus about 2 s of CPU, read every 5 s
though a GPU is scraped every 15-60 s (docs/benchmarks.md, "Cluster scale at 8,192 GPUs"). :class:`Latest` asks the
whole answer once, then only for the series with a sample since its last read that an instant query has now
(``last_over_time(SELECTOR[Δ]) and SELECTOR``, Δ the time since, plus ``MARGIN_S``: a scrape's samples are stamped
when it starts and stored when it ends), and keeps the rest:

- the answer is kept **by GPU** (``analysis/cluster_identity.gpu_id``): a GPU in the top-up is replaced whole by
  what it holds (a target's series are scraped together: a job or class that changed leaves no series behind);
- a GPU not seen for ``LOOKBACK_S`` (Prometheus' look-back) is dropped, as an instant query would drop it; one the
  caller knows has stopped (``forget``) at once, and one it knows reports late (``keep``) is kept;
- read whole again where the top-up could not be exact: the first read, a clock set back, a gap longer than the
  look-back.

What a top-up cannot see that the whole answer would: a series whose exporter's clock is behind by more than Δ (its
samples land before the window): kept from the last whole read while the caller says it reports (``keep``; the
reader's late GPUs).
"""

from __future__ import annotations

from typing import Callable

from gputop.analysis.cluster_identity import gpu_id
from gputop.fleet import series as S

LOOKBACK_S = 300.0  # Prometheus' default look-back (--query.lookback-delta): an instant query's newest samples
MARGIN_S = 5.0  # each top-up reads this much before the last read's time (a scrape stamped before it, stored after)


def _key(labels: dict) -> tuple:
    """The GPU a series is of; a series without a ``gpu`` label (not a GPU's) is its own."""
    return gpu_id(labels) if "gpu" in labels else ("series",) + tuple(sorted(labels.items()))


class Latest:
    """One instant query, ``form(SELECTOR)``, answered whole once, then topped up (module text). ``form`` wraps the
    selector (``max by (...) (SELECTOR)``, ``SELECTOR and on(...) other``); ``read`` returns the answer's series
    as an instant query's (``{"metric", "value"}``), the kept ones with the value of their last read. With
    ``grouped``, ``groups`` holds each GPU's series as ``series.groups`` makes them (their points and jobs as tuples)
    and ``read`` returns this read's series only; ``of(key)`` says which read last changed a GPU (its stamp: what is
    made of it is made again only when that changes)."""

    def __init__(self, selector: str, form: Callable[[str], str] = lambda s: s, grouped: bool = False):
        self.selector, self.form, self.grouped = selector, form, grouped
        self._kept: dict[tuple, tuple[float, int, list[dict]]] = {}  # GPU -> (when last seen, stamp, its series)
        self.groups: dict[tuple, dict] = {}  # (grouped) GPU -> its series grouped (series.groups)
        self._at: float | None = None  # the last read's time
        self._stamp = 0  # reads so far
        self.whole = True  # whether the last read asked for the whole answer
        self.skipped = 0  # series kept that are not a GPU's (no ``gpu`` label)

    def read(self, client, now: float) -> list[dict]:
        since = None if self._at is None else now - self._at
        self.whole = since is None or not 0 < since <= LOOKBACK_S - MARGIN_S
        if self.whole:
            answer = client.query(self.form(self.selector), at=now)
            self._kept, self.groups = {}, {}
        else:
            window_ms = int((since + MARGIN_S) * 1000)
            # (``and`` the selector now: only the series an instant query has, under the server's own look-back and
            # staleness; a window that holds a job's change holds its old series' last sample too)
            answer = client.query(self.form(f"(last_over_time({self.selector}[{window_ms}ms]) and {self.selector})"),
                                  at=now)
        self._stamp += 1
        got: dict[tuple, list[dict]] = {}
        for r in answer:
            got.setdefault(_key(r["metric"]), []).append(r)
        for key, series in got.items():
            if not self.grouped:
                self._kept[key] = (now, self._stamp, series)
                continue
            # (kept for minutes, 10^5 of them: as few containers as can be, for Python's GC to walk)
            self._kept[key] = (now, self._stamp, series if key[0] == "series" else ())  # (those not a GPU's: counted)
            g = S.groups(series).get(key)
            if g is None:
                self.groups.pop(key, None)
            else:
                g["series"] = {name: tuple(points) for name, points in g["series"].items()}
                g["jobs"] = tuple(g["jobs"])
                self.groups[key] = g
        self.forget([k for k, (t, _, _) in self._kept.items() if now - t > LOOKBACK_S])
        self._at = now
        self.skipped = sum(len(series) for key, (_, _, series) in self._kept.items() if key[0] == "series")
        return answer if self.grouped else [r for _, _, series in self._kept.values() for r in series]

    def of(self, key: tuple) -> int:
        """The stamp of the read that last changed GPU ``key``'s series (0: none kept)."""
        kept = self._kept.get(key)
        return kept[1] if kept else 0

    def series_of(self, key: tuple) -> list[dict]:
        kept = self._kept.get(key)
        return kept[2] if kept else []

    def forget(self, keys) -> None:
        """Drop these GPUs (stopped reporting: an instant query has none of their series now)."""
        for key in keys:
            self._kept.pop(key, None)
            self.groups.pop(key, None)

    def keep(self, keys, now: float) -> None:
        """These GPUs report, late (their newest sample older than a top-up's window): keep what was read of them."""
        for key in keys:
            if key in self._kept:
                self._kept[key] = (now,) + self._kept[key][1:]
