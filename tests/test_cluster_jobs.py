"""A job that spans nodes, judged whole (issue 38): a real Prometheus scraping ``gputop --export --replay`` exporters
that play recorded multi-GPU jobs (tests/data/traces/corpus_multi_*) split over two "nodes" each, one job each (its
``SLURM_JOB_ID``, as ``srun gputop --export`` in a job step sees it). Each exporter judges its own GPUs only; the
cluster reads the job's GPUs over both nodes and must find what no node alone can:

* job 5001, ``hang_exit`` on 4 H100s: rank 1 exits while ranks 0, 2, 3 wait in an all-reduce (the construction's
  truth); node ``vm`` plays GPUs 0, 2, 3 and another node also named ``vm`` (a cloned host name) plays GPU 1: the
  stall is on the first, the culprit node the second;
* job 5002, ``straggler`` on 4 H100s: rank 1 does 3x the math (the truth); ``node-a`` plays GPUs 0, 2, 3 (they wait
  in collectives), ``node-b`` GPU 1: the straggler node, with more work;
* job 5003, ``comms_mlp_pcie`` on 2 H100s without a peer-to-peer path (NCCL through host memory, NVLink idle):
  ``pcie-a`` plays GPU 0, ``pcie-b`` GPU 1: comms-bound across nodes, PCIe busy both ways.

Each replay holds a steady stretch of its recording (``cluster_util.held_trace``); a 2-GPU stretch changes regime
where it starts again, so the comms finding is waited for (it must come, and no other finding before it).
"""

from __future__ import annotations

import time

import pytest

from cluster_util import PROMETHEUS, TRACES, Prometheus, cluster_json, gputop, held_trace
from export_util import free_port, start_exporter, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH "
                                                                                "(apt-get install prometheus)")]
X4, X2 = TRACES / "corpus_multi_h100x4", TRACES / "corpus_multi_h100x2"
NODES = {  # exporter -> (job, trace, stretch held, host name (None: the recording's, vm), GPUs played)
    "stall-a": ("5001", X4 / "hang_exit.jsonl.gz", (20.0, 40.0), None, (0, 2, 3)),
    "stall-b": ("5001", X4 / "hang_exit.jsonl.gz", (20.0, 40.0), None, (1,)),
    "strag-a": ("5002", X4 / "straggler.jsonl.gz", (11.0, 24.0), "node-a", (0, 2, 3)),
    "strag-b": ("5002", X4 / "straggler.jsonl.gz", (11.0, 24.0), "node-b", (1,)),
    "pcie-a": ("5003", X2 / "comms_mlp_pcie.jsonl.gz", (14.5, 30.0), "pcie-a", (0,)),
    "pcie-b": ("5003", X2 / "comms_mlp_pcie.jsonl.gz", (14.5, 30.0), "pcie-b", (1,)),
}
SETTLE_S = 6.0


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jobs")
    ports, procs, prom = {}, [], None
    try:
        for name, (job, trace, stretch, host, gpus) in NODES.items():
            ports[name] = free_port()
            # one recording per job, its GPUs' UUIDs their own (the 4-GPU recordings share one machine's)
            held = held_trace(trace, tmp / f"{name}.jsonl.gz", host, stretch, uuid_seed=f"job-{job}")
            args = [a for g in gpus for a in ("--gpu", str(g))]
            procs.append(start_exporter(f"127.0.0.1:{ports[name]}", "--replay", str(held), *args,
                                        SLURM_JOB_ID=job))
        targets = [f"127.0.0.1:{p}" for p in ports.values()]
        prom = Prometheus(tmp, f"  - job_name: gputop\n    static_configs: [{{targets: {targets}}}]\n")
        prom.wait_up(len(NODES), procs)
        t0 = time.monotonic()
        wait_for(lambda: time.monotonic() - t0 > SETTLE_S, SETTLE_S + 5, "the exporters' first verdicts")
        yield {"url": prom.url, "ports": ports}
    finally:
        if prom is not None:
            prom.stop()
        for p in procs:
            stop(p)


def judged(url: str, job: str, finding: str, words: str = "") -> dict:
    """The job's entry of the cluster document once it has ``finding`` and says ``words`` (a held stretch changes
    regime where it starts again: each read checked, no other finding)."""
    seen = []

    def read():
        doc = cluster_json(url, "--range", "2m")
        entry = next(j for j in doc["jobs"] if j["job"] == job)
        seen.append(entry["finding"])
        assert entry["finding"] in (None, finding), (entry, seen)
        return (entry, doc) if entry["finding"] == finding and words in entry["sentence"] else None
    return wait_for(read, 40, f"job {job} judged {finding!r} (seen: {seen})", step=0.5)


def test_a_stall_on_one_node_names_the_node_whose_gpu_is_outside_it(jobs):
    entry, doc = judged(jobs["url"], "5001", "stall")
    b = f"vm (127.0.0.1:{jobs['ports']['stall-b']})"  # two nodes named vm: each named by its target too
    assert entry["gpus"] == 4 and entry["nodes"] == [f"vm (127.0.0.1:{jobs['ports']['stall-a']})", b]
    assert entry["culprit_nodes"] == [b]
    assert "3 GPUs" in entry["sentence"] and "holds the job up" in entry["sentence"]
    rows = [g for g in doc["gpus"] if g["jobs"] == ["5001"]]
    assert sorted((g["gpu"], g["class"]) for g in rows) == [("0", "stalled"), ("1", "idle"), ("2", "stalled"),
                                                            ("3", "stalled")]
    assert not any(g["duplicate"] for g in rows)  # one host name, four GPUs: none merged, none flagged


def test_a_straggler_node_is_named_with_why(jobs):
    entry, _ = judged(jobs["url"], "5002", "straggler", "more work")
    assert entry["straggler_node"] == "node-b" and entry["nodes"] == ["node-a", "node-b"]
    assert "more work" in entry["sentence"] and "its peers on node-a wait for it" in entry["sentence"]


def test_comms_across_nodes_is_pcie_both_ways_with_nvlink_idle(jobs):
    entry, _ = judged(jobs["url"], "5003", "comms across nodes")
    assert entry["gpus"] == 2 and sorted(entry["nodes"]) == ["pcie-a", "pcie-b"]
    ev = entry["evidence"]
    assert ev["pcie_rx_bps"] > 1e9 and ev["pcie_tx_bps"] > 1e9


def test_the_text_and_the_accounting_say_what_a_fix_would_win_back(jobs):
    judged(jobs["url"], "5001", "stall")
    r = gputop("--source", f"prometheus={jobs['url']}", "--once", "--range", "2m")
    assert r.returncode == 0, r.stderr
    assert "jobs judged whole, over their nodes:" in r.stdout
    assert "job 5001 (4 GPUs on 2 nodes): stalled:" in r.stdout
    doc = cluster_json(jobs["url"], "--range", "2m")
    # every query answered (the accounting's joins too); this Prometheus has no recording rules loaded: the
    # accounting reads the raw series and says so in its one line
    assert [n for n in doc["notes"] if not n.startswith("accounting from the raw series: ")] == [], doc["notes"]
    assert len(doc["notes"]) == 1
    acc = {j["job"]: j for j in doc["accounting"]["jobs"]}
    waiting = acc["5002"]  # the straggler's peers: comms-bound, their SMs' idle share
    assert [w["class"] for w in waiting["win_back"]] == ["comms-bound"] and 0.3 < waiting["win_back_share"] < 0.9
    stall = acc["5001"]  # stalled and idle GPUs: all of their time
    assert stall["win_back_share"] == pytest.approx(
        sum(c["share"] for c in stall["classes"] if c["class"] in ("stalled", "idle", "culprit")), abs=0.02)
    assert stall["win_back_share"] > 0.8
    assert [j["job"] for j in doc["accounting"]["jobs"]][0] == "5001"  # the most won back first
