"""Every GPU kept apart by its identity (issue 38): a real Prometheus scraping exporters whose hosts share a name and
whose GPUs share indices, some their UUIDs too, one without UUID labels; ``--once --json`` counts the GPUs exactly
as Prometheus holds them.

The exporters, all under the host name ``vm`` (the recordings' own), all with a GPU 0:

* ``twin-a`` and ``twin-b``: ``gputop --export --replay`` of two recordings of one H200 (the bf16 matmul, the starved
  loader): one UUID, two GPUs as Prometheus holds them, two rows, both flagged (a replay beside a replay);
* ``pair`` and ``pair-clone``: the same 2-GPU recording (2 H100s, comms_mlp) played by two exporters: four rows,
  all flagged;
* ``demo``: the demo recording (an H200), and ``beside``: a dcgm-exporter's text of that same GPU (its UUID, its
  host name): one GPU seen by both exporters of its node, one row, gputop's verdict;
* ``no-uuid``: a dcgm-exporter's text without a UUID label: its target's GPU 0.

Truth comes from the exporters themselves: each row is one (UUID, target) an exporter serves, with that exporter's
class and numbers.
"""

from __future__ import annotations

import time

import pytest

from cluster_util import (PROMETHEUS, TRACES, DcgmServer, Prometheus, cluster_json, dcgm_text, gputop, held_trace,
                          served_gpus)
from export_util import free_port, start_exporter, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH "
                                                                                "(apt-get install prometheus)")]
DEMO = TRACES.parent.parent.parent / "gputop" / "data" / "demo.jsonl.gz"
EXPORTERS = {  # name -> (trace, stretch held)
    "twin-a": (TRACES / "matmul_bf16.compute-bound.jsonl.gz", (4.0, 11.0)),
    "twin-b": (TRACES / "dataloader_starved.input-starved.jsonl.gz", (10.5, 18.6)),
    "pair": (TRACES / "corpus_multi_h100x2" / "comms_mlp.jsonl.gz", (10.0, 18.0)),
    "pair-clone": (TRACES / "corpus_multi_h100x2" / "comms_mlp.jsonl.gz", (10.0, 18.0)),
    "demo": (DEMO, (28.8, 35.6)),
}
DEMO_UUID = "GPU-cc41ac5f-c4b8-f7cb-d1d6-35a1e9203ca8"  # the demo's GPU, and tests/data/dcgm's
SETTLE_S = 4.0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("identity")
    dcgm = DcgmServer({"/beside/metrics": dcgm_text("h200_matmul_bf16.prom", "vm"),
                       "/no-uuid/metrics": dcgm_text("h200_matmul_bf16.prom", "vm", uuid=None)})
    ports, procs, prom = {}, [], None
    started = time.monotonic()
    try:
        for name, (trace, stretch) in EXPORTERS.items():
            ports[name] = free_port()
            procs.append(start_exporter(f"127.0.0.1:{ports[name]}", "--replay",
                                        str(held_trace(trace, tmp / f"{name}.jsonl.gz", None, stretch))))
        targets = [f"127.0.0.1:{p}" for p in ports.values()]
        prom = Prometheus(tmp, f"  - job_name: gputop\n    static_configs: [{{targets: {targets}}}]\n"
                          + dcgm.scrape_jobs(["beside", "no-uuid"]))
        prom.wait_up(len(EXPORTERS) + 2, procs)
        last: dict = {}

        def settled():  # every exporter's classes unchanged over two scrapes (2 s), after their first regime
            now, t = {n: {k: g["class"] for k, g in served_gpus(p).items()} for n, p in ports.items()}, \
                time.monotonic()
            if now != last.get("state") or any(c is None for gpus in now.values() for c in gpus.values()):
                last.update(state=now, since=t)
            return t - last["since"] >= 2.0 and t - started > SETTLE_S
        wait_for(settled, 60, "the exporters' verdicts to settle", step=0.3)
        yield {"url": prom.url, "ports": ports, "dcgm_port": dcgm.port}
    finally:
        if prom is not None:
            prom.stop()
        for p in procs:
            stop(p)
        dcgm.close()


def test_every_gpu_prometheus_holds_is_a_row_of_its_own_flagged_where_its_uuid_is_claimed_twice(fleet):
    doc = cluster_json(fleet["url"], "--range", "2m")
    rows = {(g["uuid"], g["instance"], g["gpu"]): g for g in doc["gpus"]}
    served = {name: served_gpus(port) for name, port in fleet["ports"].items()}
    truth = {(uuid, f"127.0.0.1:{fleet['ports'][name]}", gpu): g
             for name, gpus in served.items() for (uuid, gpu), g in gpus.items()}
    no_uuid = (None, f"127.0.0.1:{fleet['dcgm_port']}", "0")
    # 1 + 1 twins, 2 + 2 of the pair, the demo's GPU (its dcgm-exporter beside it: the same GPU), the GPU without UUID
    assert len(truth) == 7 and set(rows) == set(truth) | {no_uuid}
    assert doc["summary"]["gpus"] == doc["summary"]["gpus_in_cluster"] == len(doc["gpus"]) == 8
    assert {g["node"] for g in doc["gpus"]} == {"vm"} and doc["summary"]["gpus_duplicate"] == 6
    for key, g in truth.items():
        row = rows[key]
        # the class its own exporter served (the held 2-GPU stretch changes regime where it starts again: any class
        # that exporter served over the last seconds, as Prometheus holds them)
        assert (row["class"], row["subclass"]) in recent_classes(fleet["url"], key[0], key[1]), key
        assert row["duplicate"] == (key[0] != DEMO_UUID) and row["judged_by"] == "gputop --export"
        if row["duplicate"]:  # the other claim named, by its target
            others = [f"127.0.0.1:{p}" for n, p in fleet["ports"].items() if n != "demo"
                      and any(u == key[0] for u, _ in served[n]) and f"127.0.0.1:{p}" != key[1]]
            assert others and all(o in row["flags"][0] for o in others), row["flags"]
    # one GPU's numbers together: the twins share node, index and UUID, not their work
    a, b = (rows[k] for k in truth if k[1] in (f"127.0.0.1:{fleet['ports']['twin-a']}",
                                               f"127.0.0.1:{fleet['ports']['twin-b']}"))
    assert {a["class"], b["class"]} == {"compute-bound", "input-starved"}
    bf16, starved = (a, b) if a["class"] == "compute-bound" else (b, a)
    assert bf16["tensor_pct"] > 50 and starved["tensor_pct"] < 40 and bf16["sm_pct"] > starved["sm_pct"]
    # the demo's GPU: its gputop's verdict, the dcgm-exporter beside it merged in, not a second row
    demo = rows[(DEMO_UUID, f"127.0.0.1:{fleet['ports']['demo']}", "0")]
    assert not demo["duplicate"] and demo["flags"] == []
    # the GPU without a UUID: its target's GPU 0, judged here from its series
    row = rows[no_uuid]
    assert row["scrape_job"] == "no-uuid" and row["judged_by"] == "gputop" and row["class"] == "compute-bound"


def recent_classes(url: str, uuid: str, instance: str) -> set[tuple[str, str | None]]:
    """The classes the exporter at ``instance`` exported for ``uuid`` over the last 15 s, as Prometheus holds them."""
    from gputop.telemetry.prometheus import PrometheusClient

    now = time.time()
    got = PrometheusClient(url, env={}).query_range(f'gputop_bottleneck{{UUID="{uuid}",instance="{instance}"}} == 1',
                                                    now - 15, now, 1)
    return {(r["metric"]["class"], r["metric"].get("subclass") or None) for r in got}


def test_the_text_names_each_duplicate_and_its_other_claim(fleet):
    r = gputop("--source", f"prometheus={fleet['url']}", "--once", "--range", "2m")
    assert r.returncode == 0, r.stderr
    assert "8 GPUs on 1 node" in r.stdout.splitlines()[0]
    flagged = [ln for ln in r.stdout.splitlines() if "also exported by" in ln]
    assert len(flagged) == 6 and all(ln.startswith("  vm GPU ") for ln in flagged)
