"""The cluster read from a real Prometheus: ``gputop --source prometheus=URL --once``.

One Prometheus (Debian's ``prometheus``, scrape and rule evaluation every second) per module scrapes four real
``gputop --export --replay TRACE`` processes, each replaying a steady stretch of a different shipped trace, held
for an hour (:func:`held_trace`: a job that runs on), under its own hostname and job (``--job-map``), and one HTTP endpoint per node serving dcgm-exporter's text (tests/data/dcgm) under other
hostnames and jobs (``hpc_job``; Kubernetes' ``pod``/``namespace``). It loads a copy of
docs/prometheus/gputop-rules.yml with its ``for:`` cut to a second and its GPU-hours counted every second. The tests read the cluster through the real
CLI and check every row against what its exporter serves.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

from cluster_util import DcgmServer, cluster_json, dcgm_text, gputop, node_uuid, query
from export_util import free_port, get, start_exporter, stop, wait_for
from gputop.analysis.vocabulary import CLASSES

ROOT = Path(__file__).resolve().parents[1]
DCGM = ROOT / "tests" / "data" / "dcgm"
PROMETHEUS = shutil.which("prometheus")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH (scripts/test installs "
                                 "Debian's `prometheus` package; apt-get install prometheus)")]

# node -> (trace, job, the stretch of it held, s): the gputop --export nodes, each a job that runs on in one regime (a
# replay that ends stops exporting its GPU, issue 35): the loader's starved steps, the memory held full, the bf16
# matmul, the demo's pageable copies
EXPORTERS = {
    "node-starved": (ROOT / "tests/data/traces/dataloader_starved.input-starved.jsonl.gz", "1001", (10.5, 18.6)),
    "node-full": (ROOT / "tests/data/traces/memory_full.memory-capacity.jsonl.gz", "1002", (4.0, 12.0)),
    "node-bf16": (ROOT / "tests/data/traces/matmul_bf16.compute-bound.jsonl.gz", "1003", (4.0, 11.0)),
    "node-demo": (ROOT / "gputop/data/demo.jsonl.gz", "1004", (28.8, 35.6)),
}
HOLD_S, HOLD_EVERY = 3600.0, 5  # an hour of the stretch (longer than any module runs), every 5th tick (2 Hz)
SETTLE_S = 4.0  # the live verdict's first regime may be the stretch's first second (the demo's: its launches)
# node -> (dcgm-exporter text, extra labels, the job they name): the nodes only dcgm-exporter exports
DCGM_NODES = {
    "dcgm-a": ("h200_matmul_bf16.prom", 'hpc_job="7001"', "7001"),
    "dcgm-b": ("h200_device_copy.prom", 'namespace="ml",pod="trainer-0"', "ml/trainer-0"),
    "dcgm-c": ("h200_matmul_bf16_default_counters.prom", "", None),
}


def held_trace(src: Path, dest: Path, hostname: str, stretch: tuple[float, float]) -> Path:
    """A trace of ``src``'s recorded ticks within ``stretch`` (every ``HOLD_EVERY``-th), played again and again for
    ``HOLD_S`` seconds (times shifted on), under a header that names another recording machine (the exporter's
    Hostname label) and gives its GPUs UUIDs of their own (as another machine's; the recordings share GPUs)."""
    with gzip.open(src, "rt") as f:
        rows = [json.loads(line) for line in f]
    lo, hi = stretch
    ticks = [r for r in rows[1:] if r.get("type") == "tick" and lo <= r["t"] < hi][::HOLD_EVERY]
    devices = [dict(d, uuid=node_uuid(hostname, d.get("index", i))) for i, d in enumerate(rows[0]["devices"])]
    with gzip.open(dest, "wt") as f:
        f.write(json.dumps(dict(rows[0], hostname=hostname, devices=devices)) + "\n")
        for k in range(int(HOLD_S // (hi - lo)) + 1):
            for r in ticks:
                t = r["t"] - lo + k * (hi - lo)
                f.write(json.dumps(dict(r, t=t, gpus=[dict(g, t=t) for g in r["gpus"]])) + "\n")
    return dest


def exported_class(port: int) -> tuple[str, str | None]:
    """The class (and subclass) an exporter serves now, read from its /metrics text."""
    for line in get(f"http://127.0.0.1:{port}/metrics").splitlines():
        m = re.match(r'gputop_bottleneck\{.*class="([^"]*)",.*subclass="([^"]*)"\} 1\.0$', line)
        if m:
            return m.group(1), m.group(2) or None
    raise AssertionError(f"no gputop_bottleneck at 1 on port {port}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    dcgm = DcgmServer({f"/{node}/metrics": dcgm_text(name, node, extra, uuid=node_uuid(node, 0))
                       for node, (name, extra, _) in DCGM_NODES.items()})
    ports, procs, prom = {}, [], None
    rules = (ROOT / "docs/prometheus/gputop-rules.yml").read_text()
    # the test's copy: alerts after a second, GPU-hours counted every second (the shipped figures: test_cluster_rules)
    rules = re.sub(r"\bfor: \S+", "for: 1s", rules).replace("interval: 1m", "interval: 1s")
    (tmp / "rules.yml").write_text(rules.replace(":1m]", ":1s]").replace(") / 60", ") / 3600"))
    started = time.monotonic()
    try:
        for node, (trace, job, stretch) in EXPORTERS.items():
            jobs = tmp / f"jobs-{node}"
            jobs.mkdir()
            (jobs / "0").write_text(job + "\n")
            ports[node] = free_port()
            procs.append(start_exporter(f"127.0.0.1:{ports[node]}", "--replay",
                                        str(held_trace(trace, tmp / f"{node}.jsonl.gz", node, stretch)),
                                        "--job-map", str(jobs)))
        targets = [f"127.0.0.1:{p}" for p in ports.values()]
        dcgm_jobs = dcgm.scrape_jobs(DCGM_NODES).rstrip("\n")
        config = tmp / "prometheus.yml"
        config.write_text(f"""global: {{scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}}
rule_files: ["{tmp / 'rules.yml'}"]
scrape_configs:
  - job_name: gputop
    static_configs: [{{targets: {json.dumps(targets)}}}]
{dcgm_jobs}
""")
        prom_port = free_port()
        log = open(tmp / "prometheus.log", "w")
        argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}"]
        prom = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        prometheus = {"proc": prom, "argv": argv, "log": log}  # a test may stop it and start it again (same port, data)

        def all_up():
            assert prom.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            for p in procs:
                assert p.poll() is None, p.stderr.read()
            up = query(prom_port, "up == 1")
            return len(up) == len(EXPORTERS) + len(DCGM_NODES) and len(query(prom_port, "gputop_bottleneck == 1")) \
                == len(EXPORTERS)
        wait_for(all_up, 60, "Prometheus to scrape every exporter and gputop's four verdicts", step=0.3)
        # each exporter's live verdict settles on its stretch's regime within a couple of seconds and holds it

        last: dict = {}

        def settled():  # every exporter's class unchanged over two scrapes (2 s), after its first regime
            now, t = {node: exported_class(port) for node, port in ports.items()}, time.monotonic()
            if now != last.get("state"):
                last.update(state=now, since=t)
            return now if t - last["since"] >= 2.0 and t - started > SETTLE_S else None
        expected = wait_for(settled, 40, "the exporters' verdicts to settle", step=0.2)
        yield {"url": f"http://127.0.0.1:{prom_port}", "prom_port": prom_port, "expected": expected, "tmp": tmp,
               "prometheus": prometheus}
    finally:
        if prom is not None:
            stop(prometheus["proc"])
        for p in procs:
            stop(p)
        dcgm.close()


def test_every_gpu_comes_out_on_its_row_with_the_class_that_went_in(cluster):
    doc = cluster_json(cluster["url"], "--range", "2m")
    rows = {g["node"]: g for g in doc["gpus"]}
    assert doc["notes"] == [] and not any(g["flags"] for g in doc["gpus"])  # everything read, nothing odd
    assert set(rows) == set(EXPORTERS) | set(DCGM_NODES)
    assert doc["summary"]["gpus"] == len(rows) == doc["summary"]["gpus_in_cluster"]
    assert len({cls for cls, _ in cluster["expected"].values()}) >= 3, cluster["expected"]  # the test means something
    for node, (cls, sub) in cluster["expected"].items():
        row = rows[node]
        assert (row["class"], row["subclass"]) == (cls, sub), node
        assert row["judged_by"] == "gputop --export" and row["missing"] == []
        assert row["jobs"] == [EXPORTERS[node][1]] and row["gpu"] == "0" and row["model"] == "NVIDIA H200"
        assert 0 < row["confidence"] <= 1
    # dcgm-exporter's nodes: judged here, by the same classifier, with what was missing said
    assert (rows["dcgm-a"]["class"], rows["dcgm-a"]["subclass"]) == ("compute-bound", "tensor")
    assert rows["dcgm-b"]["class"] == "memory-bound"
    assert rows["dcgm-c"]["class"] in CLASSES
    for node, (name, _, job) in DCGM_NODES.items():
        row = rows[node]
        assert row["judged_by"] == "gputop" and row["jobs"] == ([job] if job else [])
        values = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(DCGM_FI_\w+)\{.*\} (\S+)$",
                                                                     (DCGM / name).read_text(), re.M)}
        assert row["tensor_pct"] == pytest.approx(100 * values["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])
        assert row["mem_used_bytes"] == values["DCGM_FI_DEV_FB_USED"] * 2**20
        if "DCGM_FI_PROF_SM_ACTIVE" in values:
            assert row["sm_pct"] == pytest.approx(100 * values["DCGM_FI_PROF_SM_ACTIVE"])
    assert "DCGM_FI_PROF_SM_ACTIVE (not exported)" in rows["dcgm-c"]["missing"]
    assert not any("DCGM_FI_PROF_SM_ACTIVE" in m for m in rows["dcgm-a"]["missing"])
    wastes = [g["waste"] for g in doc["gpus"]]
    assert wastes == sorted(wastes, reverse=True)  # the most wasted GPU-time first


def test_filters_keep_one_job_one_node_one_class(cluster):
    node, (cls, _) = next(iter(cluster["expected"].items()))
    assert [g["node"] for g in cluster_json(cluster["url"], "--job", EXPORTERS[node][1])["gpus"]] == [node]
    assert [g["node"] for g in cluster_json(cluster["url"], "--node", "dcgm-b")["gpus"]] == ["dcgm-b"]
    by_class = cluster_json(cluster["url"], "--class", cls)
    assert by_class["gpus"] and all(g["class"] == cls for g in by_class["gpus"])
    assert by_class["summary"]["gpus_in_cluster"] == len(EXPORTERS) + len(DCGM_NODES)


def test_job_accounting_counts_gpu_hours_by_class_in_json_and_text(cluster):
    doc = cluster_json(cluster["url"], "--range", "2m")
    acc = doc["accounting"]
    assert acc["range_s"] == 120 and acc["step_s"] == 1
    jobs = {j["job"]: j for j in acc["jobs"]}
    for node, (cls, sub) in cluster["expected"].items():
        j = jobs[EXPORTERS[node][1]]
        assert 0 < j["gpu_hours"] <= 120 / 3600 + 1e-9  # one GPU, at most the range
        assert sum(c["share"] for c in j["classes"]) == pytest.approx(1.0)
        assert (cls, sub) in {(c["class"], c["subclass"]) for c in j["classes"]}  # what it does now is counted
    assert [(c["class"], c["subclass"]) for c in jobs["7001"]["classes"]] == [("compute-bound", "tensor")]
    assert [c["class"] for c in jobs["ml/trainer-0"]["classes"]] == ["memory-bound"]
    wasted = [j["wasted_gpu_hours"] for j in acc["jobs"]]
    assert wasted == sorted(wasted, reverse=True)
    r = gputop("--source", f"prometheus={cluster['url']}", "--once", "--range", "2m")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^job 7001: [0-9.e-]+ GPU-h, 100% compute-bound \(tensor\)$", r.stdout, re.M), r.stdout
    assert re.search(r"^job ml/trainer-0: [0-9.e-]+ GPU-h, 100% memory-bound$", r.stdout, re.M), r.stdout
    for node in EXPORTERS:
        assert re.search(rf"^{node}\s+0\s+{EXPORTERS[node][1]}\s", r.stdout, re.M), r.stdout
    assert "dcgm-c GPU 0: DCGM_FI_PROF_SM_ACTIVE (not exported)" in r.stdout


def test_the_rules_fire_and_record_on_a_live_prometheus(cluster):
    port = cluster["prom_port"]
    starved = [n for n, (c, _) in cluster["expected"].items() if c == "input-starved"]
    full = [n for n, (c, _) in cluster["expected"].items() if c == "memory-capacity"]
    assert starved and full, cluster["expected"]

    def firing(name):
        return {a["metric"].get("Hostname") for a in query(port, f'ALERTS{{alertname="{name}",alertstate="firing"}}')}
    assert wait_for(lambda: firing("GpuInputStarved") == set(starved), 20, "GpuInputStarved to fire", step=0.3)
    assert wait_for(lambda: set(full) <= firing("GpuMemoryNearCapacity"), 20, "GpuMemoryNearCapacity", step=0.3)
    counts = wait_for(lambda: query(port, "job_class:gputop_gpus:count"), 20, "the recording rule", step=0.3)
    got = {(r["metric"].get("hpc_job"), r["metric"]["class"]) for r in counts}
    assert got == {(EXPORTERS[n][1], c) for n, (c, _) in cluster["expected"].items()}
    hours = query(port, "job_class:gputop_gpu_hours:1h")
    assert hours and all(0 < float(r["value"][1]) <= 1 for r in hours)


def test_the_client_reads_series_instant_and_range_answers(cluster):
    from gputop.telemetry.prometheus import PrometheusClient

    client = PrometheusClient(cluster["url"], env={})
    series = client.series('gputop_bottleneck{class="idle"}', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname="dcgm-a"}')
    assert {(s["__name__"], s["Hostname"]) for s in series} == {("gputop_bottleneck", n) for n in EXPORTERS} | {
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "dcgm-a")}

    def last_four_seconds():  # (a server started a moment ago has scraped fewer: wait for four)
        (up,) = client.query('up{job="dcgm-a"}')
        t = float(up["value"][0])
        (m,) = client.query_range('up{job="dcgm-a"}', t - 4, t, 1)
        return m if len(m["values"]) >= 4 else None
    matrix = wait_for(last_four_seconds, 20, "4 s of the target's up series", step=0.3)
    assert [float(v) for _, v in matrix["values"]] == [1.0] * len(matrix["values"])


# -- the filters, checked (issue 35) ------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value, names", [("--node", "nosuch", "nodes"), ("--job", "nosuch", "jobs")])
def test_a_node_or_job_the_cluster_does_not_have_is_one_line_and_exit_2(cluster, flag, value, names):
    """A --node or --job that matches nothing (a job: neither now nor in --range's accounting) is a usage error, as
    --gpu N of a GPU that is not there: one line naming what there is, exit 2, and --json's one document says so;
    the cluster page says the same before it starts."""
    r = gputop("--source", f"prometheus={cluster['url']}", "--once", flag, value)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
    assert f"{flag} {value}: no such" in lines[0] and f"{names}:" in lines[0]
    assert ("node-bf16" if flag == "--node" else "1003") in lines[0]
    r = gputop("--source", f"prometheus={cluster['url']}", "--once", "--json", flag, value)
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, json.loads((ROOT / "gputop/schema/cluster.schema.json").read_text()))
    assert r.returncode == 2 and doc["exit_code"] == 2 and doc["gpus"] == [] and f"{flag} {value}" in \
        doc["errors"][0]["message"]
    r = gputop("--source", f"prometheus={cluster['url']}", flag, value)  # the page: before it needs a terminal
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and f"{flag} {value}: no such" in r.stderr


def test_the_accounting_follows_the_filters(cluster):
    """The accounting below the rows is that of the jobs whose GPUs are shown (and of --job's job), as on the page."""
    def accounted(*args):
        return {j["job"] for j in cluster_json(cluster["url"], "--range", "2m", *args)["accounting"]["jobs"]}
    everything = accounted()
    assert {"1001", "1002", "1003", "1004", "7001", "ml/trainer-0", None} <= everything
    assert accounted("--node", "dcgm-b") == {"ml/trainer-0"}
    assert accounted("--job", "1002") == {"1002"}
    compute = {g["job"] for g in cluster_json(cluster["url"], "--class", "compute-bound")["gpus"]}
    assert accounted("--class", "compute-bound") == compute and len(compute) >= 2
    r = gputop("--source", f"prometheus={cluster['url']}", "--once", "--range", "2m", "--node", "dcgm-b")
    assert r.returncode == 0 and re.findall(r"^job (\S+):", r.stdout, re.M) == ["ml/trainer-0"], r.stdout


def test_the_accounting_from_the_recording_rules_counts_what_the_raw_series_count(cluster, monkeypatch):
    """The rules of docs/prometheus/gputop-rules.yml's accounting group (here every second, as the scrapes) give each
    job the GPU-hours by class and the win-back the raw series give, to a step or two of a rule's evaluation; and
    the accounting says which it read."""
    import gputop.fleet.accounting as acc
    from gputop.telemetry.prometheus import PrometheusClient

    client = PrometheusClient(cluster["url"], env={})
    wait_for(lambda: acc.recorded(client, 60.0, 1.0, time.time()), 60, "the rules to hold a minute", step=0.5)
    now = time.time()
    ruled, _, notes = acc.account(client, 60.0, now)
    assert not any(n.startswith("accounting from the raw series") for n in notes), notes
    monkeypatch.setattr(acc, "recorded", lambda *a: False)
    raw, _, raw_notes = acc.account(client, 60.0, now)
    assert any(n.startswith("accounting from the raw series") for n in raw_notes), raw_notes
    exported = {EXPORTERS[n][1] for n in EXPORTERS}
    ruled = {j.job: j for j in ruled if j.job in exported}
    raw = {j.job: j for j in raw if j.job in exported}
    assert set(ruled) == set(raw) == exported
    for job, j in raw.items():
        assert ruled[job].gpu_hours == pytest.approx(j.gpu_hours, abs=3 / 3600)  # (a GPU at 1 s: 3 steps)
        assert ruled[job].win_back_gpu_hours == pytest.approx(j.win_back_gpu_hours, abs=3 / 3600)
        assert set(ruled[job].hours) == set(j.hours)  # the same (class, subclass) pairs


def test_a_reader_read_again_shows_what_a_new_reader_shows(cluster):
    """The cluster page's refreshes (one reader, read again every 2 s: its judged GPUs' verdicts reused within a step
    of their grid, their window rolled on) show what a new reader reading everything at the same moment shows: every
    GPU, its numbers, class, jobs and flags."""
    from gputop.fleet.reader import ClusterReader
    from gputop.telemetry.prometheus import PrometheusClient

    def shown(rows):
        return {r.key: (r.node, r.cls, r.subclass, r.sm_pct, r.dram_pct, r.tensor_pct, r.util_pct, r.mem_used_bytes,
                        r.jobs, r.reporting, r.flags) for r in rows}

    reader = ClusterReader(PrometheusClient(cluster["url"], env={}))
    t0 = time.time() - 2.0  # (a scrape's samples stored by then)
    for k in range(4):
        if k:
            time.sleep(max(0.0, t0 + 2 * k + 2.0 - time.time()))
        got = shown(reader.snapshot(t0 + 2 * k))
        whole = shown(ClusterReader(PrometheusClient(cluster["url"], env={})).snapshot(t0 + 2 * k))
        assert got == whole, k
        assert {node for node, *_ in got.values()} == set(EXPORTERS) | set(DCGM_NODES)
