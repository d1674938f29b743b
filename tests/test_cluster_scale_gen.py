"""The scale bench's fleet (gputop/evaluate/synthetic_fleet.py, what bench/perf/cluster_scale.py measures on) at a
small size: valid OpenMetrics (prometheus_client's strict parser), backfilled by promtool with every sample, and in
the series and labels the cluster reader queries."""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from gputop.analysis.vocabulary import CLASSES
from gputop.evaluate import synthetic_fleet as S
from gputop.export.dcgm_names import GPU_LABELS
from gputop.fleet.series import NAMES

END = 1_800_000_000  # a 2 h block boundary
START = END - 5 * 3600 - 600  # three 2 h blocks, the first partial


@pytest.mark.slow
def test_the_fleet_is_openmetrics_in_the_readers_series_and_labels(tmp_path):
    plan = S.schedule(4, START, END)  # 4 nodes: 3 run gputop --export, the 4th dcgm-exporter only
    times = list(range(END - 600, END, 30))
    text = tmp_path / "block.om"
    written = S.write_block(text, plan, times, 26)
    families = list(text_string_to_metric_families(text.read_text()))
    assert sum(len(f.samples) for f in families) == written
    assert {f.name for f in families} <= set(NAMES) | {"gputop_bottleneck", "gputop_verdict_confidence"}
    current = defaultdict(list)  # (node, gpu, t) -> the classes at 1
    for f in families:
        for s in f.samples:
            node = s.labels["Hostname"]
            dcgm_only = node == "node-0003"
            assert set(GPU_LABELS) <= set(s.labels) and s.labels["modelName"] == S.MODEL
            assert ("DCGM_FI_DRIVER_VERSION" in s.labels) == dcgm_only
            if f.name.startswith("gputop_"):
                assert not dcgm_only and s.labels["class"] in CLASSES
            if f.name == "gputop_bottleneck" and s.value == 1:
                current[(node, s.labels["gpu"], float(s.timestamp))].append(s.labels["class"])
            if f.name == "DCGM_FI_PROF_SM_ACTIVE":
                assert 0 <= s.value <= 1
    assert len(current) == 3 * 8 * len(times)  # every gputop GPU, every scrape: one class at 1
    assert all(len(c) == 1 for c in current.values())
    day = {cls for node_plan in plan.values() for _, _, _, phases, _ in node_plan for _, _, cls, _ in phases}
    assert len(day) >= 4  # the classes change over the day
    jobs = {m.group(1) for m in re.finditer(r'hpc_job="(\d+)"', text.read_text())}
    assert jobs


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (apt-get install prometheus)")
def test_promtool_backfills_every_sample_in_2h_blocks(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    made = S.backfill(data, 32, START, END, 300, tmp_path)
    metas = [json.loads(m.read_text()) for m in data.glob("*/meta.json")]
    assert len(metas) == 3 and sum(m["stats"]["numSamples"] for m in metas) == made["samples"] > 0
    assert all(m["maxTime"] - m["minTime"] <= S.BLOCK_S * 1000 for m in metas)
    assert min(m["minTime"] for m in metas) == START * 1000 and not list(tmp_path.glob("*.om*"))


def test_each_nodes_scrapes_fall_at_its_own_offset_within_the_block(tmp_path):
    """As Prometheus spreads its targets' scrapes over the interval (a read of the last seconds then holds some
    nodes, not all or none); a sample its offset would stamp in the next block is not written in this one."""
    plan = S.schedule(8, START, END)
    times = list(range(END - 300, END, 30))
    text = tmp_path / "block.om"
    written = S.write_block(text, plan, times, 26, step=30, limit=END)
    stamps = defaultdict(set)  # node -> its sample times
    for f in text_string_to_metric_families(text.read_text()):
        for s in f.samples:
            stamps[s.labels["Hostname"]].add(int(float(s.timestamp)))
    offsets = {node: {t % 30 for t in ts} for node, ts in stamps.items()}
    assert all(len(o) == 1 for o in offsets.values())  # one offset a node ...
    assert len({o.pop() for o in offsets.values()}) == 8  # ... each its own
    assert max(max(ts) for ts in stamps.values()) < END and min(min(ts) for ts in stamps.values()) == END - 300
    assert all(len(ts) == 10 for ts in stamps.values()) and written > 0
    # a block that ends 15 s after its last scrape: the nodes whose offset is 15 s or more leave that one to the next
    S.write_block(text, plan, times, 26, step=30, limit=END - 15)
    late = defaultdict(set)
    for f in text_string_to_metric_families(text.read_text()):
        for s in f.samples:
            late[s.labels["Hostname"]].add(int(float(s.timestamp)))
    assert {node: len(ts) for node, ts in late.items()} == {
        node: 10 - (min(ts) % 30 >= 15) for node, ts in stamps.items()}
    assert max(max(ts) for ts in late.values()) < END - 15
