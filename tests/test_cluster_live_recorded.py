"""The cluster live, as recorded on 2 H100s (tests/data/cluster_live_h100x2/README.md): two real exporters as two
"nodes" of one torchrun job, their scrapes backfilled into a real Prometheus and the cluster read at moments whose
truth is the programs' construction: a 3x-work rank on node-b (the straggler node), then node-b's rank idling while
node-a's waits in an all-reduce (node-b holds the job up). Each job is one id on both nodes (torchrun's run id read
from the ranks' environment by each exporter)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from export_util import free_port, get, wait_for
from gputop.evaluate.cluster_live import LOOKBACK, backfill, read

DATA = Path(__file__).parent / "data" / "cluster_live_h100x2" / "scrapes.jsonl.gz"
pytestmark = pytest.mark.skipif(not (shutil.which("prometheus") and shutil.which("promtool")),
                                reason="needs Prometheus and promtool")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("cluster_live")
    with gzip.open(DATA, "rt") as f:
        samples = [json.loads(line) for line in f]
    data = backfill(samples, work)
    port = free_port()
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 30s\n")
    proc = subprocess.Popen(["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
                             "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}",
                             f"--query.lookback-delta={LOOKBACK}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"

        def ready():
            assert proc.poll() is None, "prometheus exited"
            try:
                return get(url + "/-/ready") is not None
            except OSError:
                return False
        wait_for(ready, 120, "Prometheus to open the backfilled blocks", step=0.2)
        yield read(url, min(float(s["t"]) for s in samples), [40, 80, 95])
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_straggler_node_then_the_node_that_holds_the_job_up(cluster):
    straggling, *stalls = cluster
    (job, j), = straggling["jobs"].items()
    assert job.startswith("torchelastic:") and sorted(j["nodes"]) == ["node-a", "node-b"]
    assert j["finding"] == "straggler" and "node-b is the job's slowest node" in j["sentence"]
    assert "more work" in j["sentence"]
    for moment in stalls:
        (hung, h), = moment["jobs"].items()
        assert hung != job and hung.startswith("torchelastic:")  # the second job: another run id
        assert h["finding"] == "stall" and "node-b holds the job up" in h["sentence"], h
        by_node = {r["node"]: r for r in moment["rows"]}
        assert by_node["node-a"]["cls"] == "stalled"
        assert by_node["node-a"]["jobs"] == by_node["node-b"]["jobs"] == [hung]  # one job, two nodes


def test_every_gpu_is_a_row_of_its_own_node(cluster):
    for moment in cluster:
        assert sorted((r["node"], r["gpu"]) for r in moment["rows"]) == [("node-a", "0"), ("node-b", "1")], moment
        assert moment["notes"] == []
