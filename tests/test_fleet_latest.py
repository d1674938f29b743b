"""An instant query's answer kept between the cluster page's reads and topped up with what was scraped since
(gputop/fleet/latest.py), against a stand-in for Prometheus that answers both forms from one set of samples, as
Prometheus does: an instant selector (each series' newest sample within the 5 min look-back) and
``(last_over_time(SELECTOR[Nms]) and SELECTOR)`` (those of them with a sample within the window)."""

from __future__ import annotations

import re

from gputop.analysis.cluster_identity import gpu_id
from gputop.fleet.latest import LOOKBACK_S, MARGIN_S, Latest


class Scraped:
    """Samples of series ``{labels: [(t, value), ...]}``; ``query`` answers as Prometheus would and says what it was
    asked."""

    def __init__(self, lookback: float = LOOKBACK_S):
        self.lookback = lookback  # the server's (--query.lookback-delta)
        self.samples: dict[tuple, list[tuple[float, float]]] = {}
        self.asked: list[str] = []

    def scrape(self, t: float, **series: dict) -> None:
        for labels in series.values():
            self.samples.setdefault(tuple(sorted(labels.items())), []).append((t, labels.pop("_v", 1.0)))

    def query(self, promql: str, at: float):
        self.asked.append(promql)
        m = re.fullmatch(r"\(last_over_time\(DCGM_FI_DEV_GPU_UTIL\[(\d+)ms\]\) and DCGM_FI_DEV_GPU_UTIL\)", promql)
        assert m or promql == "DCGM_FI_DEV_GPU_UTIL", promql
        out = []
        for labels, points in self.samples.items():
            now = [v for t, v in points if at - self.lookback <= t <= at]  # what an instant query has ...
            since = [v for t, v in points if at - int(m.group(1)) / 1000 <= t <= at] if m else now  # ... and, since
            if now and since:
                out.append({"metric": dict(labels), "value": [at, str(since[-1])]})
        return out


def gpu(node: str, job: str | None = None, v: float = 1.0) -> dict:
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node, "gpu": "0", "UUID": f"GPU-{node}", "_v": v}
    return dict(labels, hpc_job=job) if job else labels


def shown(answer: list[dict]) -> dict:
    return {(r["metric"]["Hostname"], r["metric"].get("hpc_job")): float(r["value"][1]) for r in answer}


def key(node: str) -> tuple:
    return gpu_id(gpu(node))


def test_the_first_read_is_whole_then_each_reads_what_was_scraped_since_and_shows_what_a_whole_read_shows():
    prom, latest = Scraped(), Latest("DCGM_FI_DEV_GPU_UTIL")
    for t in range(0, 600, 10):  # node a scraped every 30 s at 0 s, b at 10 s, c at 20 s; b's job 7, then 8 from 310
        node = "abc"[t // 10 % 3]
        prom.scrape(t, one=gpu(node, job="8" if node == "b" and t >= 310 else "7", v=t))
    for now in (102, 107, 112, 117, 150, 302, 307):
        assert shown(latest.read(prom, now)) == shown(prom.query("DCGM_FI_DEV_GPU_UTIL", now)), now
    assert prom.asked[0] == "DCGM_FI_DEV_GPU_UTIL"
    topped = [q for q in prom.asked if "last_over_time" in q]  # each read since the last, and 5 s before it
    assert topped == [f"(last_over_time(DCGM_FI_DEV_GPU_UTIL[{int((d + MARGIN_S) * 1000)}ms]) and DCGM_FI_DEV_GPU_UTIL)"
                      for d in (5, 5, 5, 33, 152, 5)]
    # b's job changed at 310: its old job's series is gone from what is kept (as from Prometheus' answer where its
    # staleness markers end it; a whole read within the look-back holds both)
    assert shown(latest.read(prom, 312)) == {("a", "7"): 300.0, ("b", "8"): 310.0, ("c", "7"): 290.0}
    assert shown(latest.read(prom, 340)) == {("a", "7"): 330.0, ("b", "8"): 340.0, ("c", "7"): 320.0}
    assert ("b", "7") in shown(prom.query("DCGM_FI_DEV_GPU_UTIL", 340))


def test_a_gpu_not_seen_for_the_look_back_is_dropped_one_said_gone_at_once_one_said_late_kept():
    prom, latest = Scraped(), Latest("DCGM_FI_DEV_GPU_UTIL")
    prom.scrape(0, a=gpu("a"), b=gpu("b"), c=gpu("c"))
    assert set(shown(latest.read(prom, 1))) == {("a", None), ("b", None), ("c", None)}
    for t in range(30, 700, 30):  # only a is scraped from now on
        prom.scrape(t, a=gpu("a"))
    assert set(shown(latest.read(prom, 31))) == {("a", None), ("b", None), ("c", None)}  # (b's sample at 0)
    latest.forget([key("b")])  # b: said gone (its exporter stopped: an instant query has none of its series now)
    for now in range(61, 700, 30):
        if now < 200:
            latest.keep([key("c")], now)  # c: said late (its samples older than a top-up's window) until 200
        expected = {("a", None), ("c", None)} if now <= 181 + LOOKBACK_S else {("a", None)}
        assert set(shown(latest.read(prom, now))) == expected, now
    assert latest.whole is False


def test_a_clock_set_back_or_a_gap_longer_than_the_look_back_reads_whole():
    prom, latest = Scraped(), Latest("DCGM_FI_DEV_GPU_UTIL")
    prom.scrape(0, a=gpu("a"))
    for now, whole in ((10, True), (20, False), (15, True), (15 + LOOKBACK_S, True), (20 + LOOKBACK_S, False)):
        latest.read(prom, now)
        assert latest.whole is whole, now


def test_a_window_that_holds_a_jobs_change_keeps_only_what_an_instant_query_has_now():
    """A server with a short look-back (3 s: the recorded 2-H100 cluster's, scraped every second) read 45 s apart:
    the window holds the old job's last samples and the new job's; the top-up, ``and`` the selector now, only the
    new job's (as a new reader's whole read)."""
    prom, latest = Scraped(lookback=3.0), Latest("DCGM_FI_DEV_GPU_UTIL")
    for t in range(0, 100):
        prom.scrape(t, a=gpu("a", job="old" if t < 60 else "new", v=t))
    assert shown(latest.read(prom, 40)) == {("a", "old"): 40.0}
    assert shown(latest.read(prom, 85)) == {("a", "new"): 85.0} == shown(prom.query("DCGM_FI_DEV_GPU_UTIL", 85))
