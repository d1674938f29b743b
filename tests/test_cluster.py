"""The cluster's parts without a Prometheus: its rows, order, filters and accounting (analysis/cluster.py), the
client's access and errors against a small HTTP server that answers as Prometheus does (or does not), and the
command line's checks. A real Prometheus reads the real thing in test_cluster_prometheus.py.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest

from export_util import free_port
from gputop import exitcodes
from gputop.analysis import cluster as C
from gputop.analysis import cluster_accounting as A
from gputop.analysis.cluster_identity import gpu_id, resolve
from gputop.analysis.cluster_text import hours_text, job_line
from gputop.cli import parse, parse_duration
from gputop.headless.cluster import cluster_document
from gputop.fleet.accounting import RULES_FILE, RULES_GROUP, range_step, slices
from gputop.fleet.reader import ClusterReader
from gputop.fleet.series import values_regex
from gputop.telemetry.errors import BadSource, NoGpu, QueryFailed, SourceUnreachable
from gputop.telemetry.prometheus import PrometheusClient, auth_header, url_of

ROOT = Path(__file__).resolve().parents[1]
EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


# -- rows, order, filters, accounting ---------------------------------------------------------------------------
def test_a_gpus_job_is_hpc_job_else_namespace_and_pod():
    assert C.job_of({"hpc_job": "1234", "pod": "p", "namespace": "ns"}) == "1234"
    assert C.job_of({"pod": "trainer-0", "namespace": "ml"}) == "ml/trainer-0"
    assert C.job_of({"pod": "trainer-0"}) == "trainer-0"
    assert C.job_of({"hpc_job": "", "gpu": "0"}) is None
    # a GPU is its UUID through its scrape target; without a UUID, its target's GPU of that index
    assert gpu_id({"Hostname": "a", "gpu": "3", "UUID": "GPU-1", "instance": "x:1", "job": "j"}) == (
        "uuid", "GPU-1", "x:1", "j")
    assert gpu_id({"hostname": "b", "gpu": "1", "uuid": "GPU-2"}) == ("uuid", "GPU-2", "", "")  # old names
    assert gpu_id({"Hostname": "a", "gpu": "3", "instance": "x:1"}) == ("index", "x:1", "", "3")
    assert gpu_id({"hostname": "b", "gpu": "1"}) == ("index", "b", "", "1")  # dcgm-exporter after #655
    assert gpu_id({"instance": "10.0.0.5:9400", "gpu": "0"}) == ("index", "10.0.0.5:9400", "", "0")
    assert not C.whole_gpu({"gpu": "0", "GPU_I_ID": "1"}) and not C.whole_gpu({"nvlink": "0"})


def test_resolve_pairs_a_dcgm_exporter_with_the_gputop_on_its_machine_only():
    """The rule alone: one UUID claimed by a gputop and a dcgm-exporter of the same machine is one GPU; by two
    gputops, or by a dcgm-exporter of another machine, it is claimed twice."""
    def labels(instance, host, job):
        return {"UUID": "GPU-1", "gpu": "0", "instance": instance, "Hostname": host, "job": job}
    g1, d1 = labels("10.0.0.1:9401", "n1", "gputop"), labels("10.0.0.1:9400", "n1", "dcgm")
    g2, d2 = labels("10.0.0.2:9401", "n1", "gputop"), labels("10.0.0.9:9400", "n9", "dcgm")
    ids = {gpu_id(x): x for x in (g1, d1)}
    assert resolve(ids, {gpu_id(g1)}) == ({gpu_id(d1): gpu_id(g1)}, {})
    ids = {gpu_id(x): x for x in (g1, d1, g2)}  # two gputops on machines named alike: which one? neither
    merged, dups = resolve(ids, {gpu_id(g1), gpu_id(g2)})
    assert merged == {} and set(dups) == set(ids)
    ids = {gpu_id(x): x for x in (g1, d2)}
    merged, dups = resolve(ids, {gpu_id(g1)})
    assert merged == {} and set(dups) == set(ids) and dups[gpu_id(d2)] == [g1]


def test_rows_come_most_wasted_first_and_filter_by_job_node_and_class():
    rows = [C.ClusterGpu("n1", "0", cls="compute-bound", sm_pct=95.0, jobs=["1"]),
            C.ClusterGpu("n1", "1", cls="idle", sm_pct=0.0),
            C.ClusterGpu("n2", "0", cls="input-starved", sm_pct=30.0, jobs=["2"]),
            C.ClusterGpu("n2", "1", cls="idle", sm_pct=0.0, jobs=["2"]),
            C.ClusterGpu("n3", "0", cls="host-bound"),  # no SM activity exported: a waiting class wastes it all
            C.ClusterGpu("n3", "1")]  # nothing to judge: last
    ordered = C.order(rows)
    assert [(r.node, r.gpu) for r in ordered] == [("n2", "1"), ("n1", "1"), ("n3", "0"), ("n2", "0"), ("n1", "0"),
                                                  ("n3", "1")]
    assert ordered[0].waste == 1.0 and ordered[3].waste == pytest.approx(0.7) and ordered[-1].waste is None
    assert [(r.node, r.gpu) for r in C.select(rows, job="2")] == [("n2", "0"), ("n2", "1")]
    assert [(r.node, r.gpu) for r in C.select(rows, node="n1", cls="idle")] == [("n1", "1")]
    d = rows[2].to_dict()
    assert d["class"] == "input-starved" and d["job"] == "2" and d["waste"] == 0.7 and "cls" not in d


def test_accounting_sums_gpu_hours_by_class_and_orders_jobs_by_what_a_fix_would_win_back():
    entries = [("1234", "input-starved", None, 39.0), ("1234", "compute-bound", "tensor", 12.8),
               ("1234", "idle", "", 12.2), ("99", "compute-bound", "tensor", 100.0),
               ("1234", "input-starved", None, 0.0), ("55", "throttled", "power", 80.0), ("55", "stalled", None, 2.0)]
    recovered = [("1234", "input-starved", 30.0), ("1234", "memory-capacity", 5.0), ("55", "throttled", 90.0),
                 ("55", "stalled", 0.5), ("gone", "idle", 3.0), ("99", "compute-bound", 10.0)]
    jobs = A.account(entries, recovered)
    assert [j.job for j in jobs] == ["55", "1234", "99"]  # 82 GPU-h won back, 42.2, 10 (its FP32 pipe's part)
    j = jobs[1]
    assert j.gpu_hours == pytest.approx(64.0) and j.wasted_gpu_hours == pytest.approx(51.2)
    # stalled and idle: all of it, whatever was summed; a working class: nothing; the others as summed, never more
    # than the class's hours
    assert jobs[0].recoverable == {"throttled": 80.0, "stalled": 2.0}
    assert j.recoverable == {"input-starved": 30.0, "idle": 12.2}
    doc = j.to_dict()
    assert [(c["class"], c["subclass"]) for c in doc["classes"]] == [("input-starved", None),
                                                                     ("compute-bound", "tensor"), ("idle", None)]
    assert [w["class"] for w in doc["win_back"]] == ["input-starved", "idle"]
    assert doc["win_back"][0]["method"].startswith("the GPU's idle share")
    assert job_line(doc) == ("job 1234: 64 GPU-h, 61% input-starved, 20% compute-bound (tensor), 19% idle; a fix "
                             "would win back 42 GPU-h (66%)")
    assert job_line(jobs[2].to_dict()) == ("job 99: 100 GPU-h, 100% compute-bound (tensor); a fix would win back 10 "
                                          "GPU-h (10%)")
    assert hours_text(3.46) == "3.5" and hours_text(0.00417) == "0.0042"


def test_a_dcgm_exporter_gpu_is_judged_window_by_window():
    from gputop.telemetry.dcgm import to_sample

    busy = {"DCGM_FI_PROF_SM_ACTIVE": 0.97, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.9, "DCGM_FI_PROF_DRAM_ACTIVE": 0.2,
            "DCGM_FI_DEV_GPU_UTIL": 100.0, "DCGM_FI_DEV_FB_USED": 20000.0, "DCGM_FI_DEV_FB_FREE": 100000.0}
    idle = {**busy, "DCGM_FI_PROF_SM_ACTIVE": 0.0, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.0,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.0, "DCGM_FI_DEV_GPU_UTIL": 0.0}
    samples = [to_sample(0, float(t), busy if t < 60 else idle) for t in range(0, 120, 2)]
    got = list(A.judged_hours(samples, {"index": 0, "gpm_supported": True}, 2.0, 60.0))
    assert [(c, s) for c, s, _, _ in got] == [("compute-bound", "tensor"), ("idle", None)]
    assert [h for _, _, h, _ in got] == pytest.approx([60 / 3600, 60 / 3600])
    assert [back for _, _, _, back in got] == pytest.approx([0.0, 60 / 3600])  # working: nothing; idle: all of it
    verdict, missing = C.judge(samples[:30], {"index": 0}, set(busy))
    assert verdict.cls == "compute-bound" and "DCGM_FI_PROF_PIPE_FP32_ACTIVE (not exported)" in missing
    assert "DCGM_FI_PROF_SM_ACTIVE (not exported)" not in missing


def test_exported_hours_sum_the_slices_and_take_the_subclasses_out_of_their_class():
    classes = [("7", "compute-bound", 300.0), ("7", "compute-bound", 420.0), ("7", "idle", 30.0), (None, "idle", 60)]
    subclasses = [("7", "compute-bound", "tensor", 600.0)]
    got = {(j, c, s): round(h, 6) for j, c, s, h in A.exported_hours(classes, subclasses, 120.0)}
    assert got == {("7", "compute-bound", "tensor"): 20.0, ("7", "compute-bound", None): 4.0, ("7", "idle", None): 1.0,
                   (None, "idle", None): 2.0}


def test_the_range_is_cut_in_slices_of_whole_steps_that_cover_it_once():
    for range_s, step in ((86400, 120), (120, 1), (100, 3), (3600, 5)):
        cut = slices(range_s, step)
        assert 1 < len(cut) <= 4 and cut[0][0] == 0 and sum(w for _, w in cut) == range_s
        assert all(o % step == 0 and b[0] == o + w for (o, w), b in zip(cut, cut[1:]))
    assert values_regex(["node-1", 'a.b"c']) == '"a\\\\.b\\"c|node\\\\-1"'


def test_the_accounting_step_keeps_a_range_to_about_288_points():
    assert range_step(120) == 1 and range_step(3600) == 12 and range_step(86400) == 300
    assert range_step(30 * 86400) == 300
    assert parse_duration("24h", "--range") == 86400 and parse_duration("90s", "--range") == 90
    assert parse_duration("7d", "--range") == 7 * 86400 and parse_duration("1.5h", "--range") == 5400
    for bad in ("24", "h", "0h", "-1h", "1y", "1000d"):
        with pytest.raises(ValueError):
            parse_duration(bad, "--range")


# -- access -----------------------------------------------------------------------------------------------------------
def test_secrets_come_from_the_environment_or_a_file_never_the_url(tmp_path):
    assert auth_header({}) is None
    assert auth_header({"GPUTOP_PROMETHEUS_TOKEN": "t0k"}) == "Bearer t0k"
    (tmp_path / "token").write_text("from-file\n")
    assert auth_header({"GPUTOP_PROMETHEUS_TOKEN_FILE": str(tmp_path / "token")}) == "Bearer from-file"
    basic = auth_header({"GPUTOP_PROMETHEUS_USER": "ops", "GPUTOP_PROMETHEUS_PASSWORD": "s3cret"})
    assert basic == "Basic " + base64.b64encode(b"ops:s3cret").decode()
    for env in ({"GPUTOP_PROMETHEUS_USER": "ops"}, {"GPUTOP_PROMETHEUS_TOKEN": "t", "GPUTOP_PROMETHEUS_USER": "u"},
                {"GPUTOP_PROMETHEUS_TOKEN_FILE": str(tmp_path / "missing")}):
        with pytest.raises(BadSource):
            auth_header(env)
    with pytest.raises(ValueError, match="no credentials in the URL"):
        url_of("prometheus=https://ops:s3cret@prom.example:9090")
    assert url_of("prometheus=https://prom.example:9090/prom/") == "https://prom.example:9090/prom"
    for bad in ("prometheus=prom:9090", "prometheus=ftp://x", "prom=http://x:9090", "prometheus=http://x:99999",
                "prometheus=http://x:9090/?q=1"):
        with pytest.raises(ValueError):
            url_of(bad)


class Stub(http.server.BaseHTTPRequestHandler):
    """Answers every POST with ``answer`` (status, content type, body) and remembers the Authorization header."""

    answer = (200, "application/json", json.dumps(EMPTY))
    token: str | None = None  # when set, anything but this bearer token is 401
    seen: list = []
    series: list = []  # /api/v1/series answers these label sets (while ``answer`` is the empty vector)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Stub.seen.append(self.headers.get("Authorization"))
        status, ctype, body = self.answer
        if self.path.endswith("/series") and body == json.dumps(EMPTY):
            body = json.dumps({"status": "success", "data": self.series})
        if self.token is not None and self.headers.get("Authorization") != f"Bearer {self.token}":
            status, ctype, body = 401, "text/plain", "Unauthorized"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    Stub.answer, Stub.token, Stub.seen, Stub.series = (200, "application/json", json.dumps(EMPTY)), None, [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_bearer_token_from_the_environment_is_sent_and_a_wrong_one_refused(stub):
    _, url = stub
    Stub.token = "right"
    assert PrometheusClient(url, env={"GPUTOP_PROMETHEUS_TOKEN": "right"}).query("up") == []
    assert Stub.seen == ["Bearer right"]
    with pytest.raises(SourceUnreachable, match="HTTP 401.*GPUTOP_PROMETHEUS_TOKEN"):
        PrometheusClient(url, env={"GPUTOP_PROMETHEUS_TOKEN": "wrong"}).query("up")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a certificate")
def test_tls_is_verified_unless_the_ca_is_given(tmp_path, stub):
    server, _ = stub
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    url = f"https://127.0.0.1:{server.server_address[1]}"
    with pytest.raises(SourceUnreachable, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        PrometheusClient(url, env={}).query("up")
    assert PrometheusClient(url, env={"GPUTOP_PROMETHEUS_CA_FILE": str(cert)}).query("up") == []


# -- bad input and faults: one line, a documented exit code -------------------------------------------------------
def gputop(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_PROMETHEUS")}
    e.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT, env=e,
                          timeout=60)


def one_line(r: subprocess.CompletedProcess) -> str:
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gputop: "), r.stderr
    return r.stderr


def schema() -> dict:
    return json.loads((ROOT / "gputop/schema/cluster.schema.json").read_text())


@pytest.mark.parametrize("answer, code, words", [  # the quick loop: the 503; the full suite: every answer
    pytest.param((200, "text/html", "<html>Grafana</html>"), exitcodes.USAGE, "not Prometheus' HTTP API",
                 marks=pytest.mark.slow),
    pytest.param((200, "application/json", '{"hello": "world"}'), exitcodes.USAGE, "not Prometheus' HTTP API",
                 marks=pytest.mark.slow),
    pytest.param((422, "application/json", '{"status": "error", "errorType": "execution", "error": "query processing '
                  'would load too many samples into memory"}'), exitcodes.NO_GPU, "too many samples",
                 marks=pytest.mark.slow),
    ((503, "text/plain", "Service Unavailable"), exitcodes.NO_GPU, "HTTP 503"),
    pytest.param((200, "application/json", json.dumps(EMPTY)), exitcodes.NO_GPU, "no GPU series",
                 marks=pytest.mark.slow),
])
def test_a_source_that_cannot_give_the_cluster_is_one_line_and_its_exit_code(stub, answer, code, words):
    _, url = stub
    Stub.answer = answer
    r = gputop("--source", f"prometheus={url}", "--once", "--json")
    assert r.returncode == code and words in one_line(r)
    doc = json.loads(r.stdout)  # --json: exactly one document on stdout, the error's
    jsonschema.validate(doc, schema())
    assert doc["exit_code"] == code and doc["gpus"] == [] and doc["errors"][0]["message"] in r.stderr
    r = gputop("--source", f"prometheus={url}", "--once")
    assert r.returncode == code and r.stdout == "" and words in one_line(r)
    r = gputop("--source", f"prometheus={url}")  # the cluster page: the same line before it starts
    assert r.returncode == code and r.stdout == "" and words in one_line(r)


def test_nothing_answering_is_exit_3_and_bad_flags_exit_2():
    r = gputop("--source", f"prometheus=http://127.0.0.1:{free_port()}", "--once")
    assert r.returncode == exitcodes.NO_GPU and r.stdout == "" and "cannot reach Prometheus" in one_line(r)
    for args, words in ((["--source", "prometheus=http://127.0.0.1:9", "--once", "--range", "1y"], "--range 1y"),
                        (["--source", "prometheus=http://127.0.0.1:9", "--serve", "8000"], "opens the cluster page"),
                        (["--once", "--range", "1h"], "go with --source prometheus=URL"),
                        (["--source", "prometheus=http://u:p@127.0.0.1:9", "--once"], "no credentials in the URL")):
        r = gputop(*args)
        assert r.returncode == exitcodes.USAGE and r.stdout == "" and words in one_line(r), args


def test_the_spec_carries_the_source_and_the_range():
    args, _ = parse(["--source", "prometheus=http://prom:9090/", "--once", "--range", "24h", "--job", "7"])
    assert (args.spec.kind, args.spec.path, args.spec.range_s) == ("prometheus", "http://prom:9090", 86400.0)
    assert (args.job, args.node, args.cls) == ("7", None, None)
    args, _ = parse(["--source", "prometheus=http://prom:9090", "--once"])
    assert args.spec.range_s == 3600.0


def test_a_document_from_made_up_answers_follows_its_schema(stub):
    """The reader's queries answered by hand: a gputop node."""
    _, url = stub
    labels = {"Hostname": "n1", "gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA H100", "hpc_job": "1234"}

    class Client(PrometheusClient):
        def query(self, promql, at=None):
            if promql.startswith("gputop_bottleneck"):
                return [{"metric": {**labels, "class": "idle", "subclass": ""}, "value": [at, "1"]}]
            if promql.startswith("gputop_verdict_confidence"):
                return [{"metric": {**labels, "class": "idle"}, "value": [at, "0.9"]}]
            if "last_over_time" in promql or promql.startswith("max by (UUID") or " and on(" in promql:
                return []  # no GPU gone, none late; no class that reads the clocks or the links
            if " unless on(" in promql:
                return []  # no dcgm-exporter GPU for the accounting to judge (its marks asked one at a time)
            if promql.startswith("count(job_class:"):
                return []  # no recording rules: the accounting reads the raw series
            if promql.startswith("group by"):  # each GPU's model and jobs
                return [{"metric": labels, "value": [at, "1"]}]
            if promql.startswith("sum by") or (promql.startswith("max by") and "max_over_time" in promql):
                # the steps of each class: all 300 of the range (12 s each) in its newest slice; nothing else
                if "count_over_time(gputop_verdict_confidence" not in promql or at != 1.8e9:
                    return []
                return [{"metric": {"hpc_job": "1234", "class": "idle"}, "value": [at, "300"]}]
            return [{"metric": {"__name__": "DCGM_FI_PROF_SM_ACTIVE", **labels}, "value": [at, "0.0"]},
                    {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", **labels}, "value": [at, "1024"]},
                    {"metric": {"__name__": "DCGM_FI_DEV_FB_FREE", **labels}, "value": [at, "3072"]}]

        def query_range(self, promql, start, end, step):
            return []

        def label_values(self, label, *match, start=None, end=None):
            return []

    doc = cluster_document(ClusterReader(Client(url, env={})), 3600.0, now=1.8e9)
    jsonschema.validate(doc, schema())
    assert doc["exit_code"] == 0 and doc["errors"] == []
    (row,) = doc["gpus"]
    assert (row["class"], row["confidence"], row["job"], row["waste"]) == ("idle", 0.9, "1234", 1.0)
    assert row["mem_total_bytes"] == 4096 * 2**20 and row["mem_used_bytes"] == 1024 * 2**20
    assert doc["accounting"]["jobs"] == [{"job": "1234", "gpu_hours": 1.0, "wasted_gpu_hours": 1.0,
                                          "win_back_gpu_hours": 1.0, "win_back_share": 1.0, "classes": [
        {"class": "idle", "subclass": None, "gpu_hours": 1.0, "share": 1.0}], "win_back": [
        {"class": "idle", "gpu_hours": 1.0, "of_class_gpu_hours": 1.0, "method": "all of it"}]}]
    assert row["reporting"] and not row["duplicate"] and row["flags"] == []
    assert doc["notes"] == [f"accounting from the raw series: the recording rules of {RULES_FILE} (group "
                            f"{RULES_GROUP}) do not hold the range (with them loaded for that long, it reads a few "
                            "series a job)"]
    with pytest.raises(NoGpu, match="is it scraping the exporters"):
        ClusterReader(PrometheusClient(url, env={})).snapshot()
    Stub.series = [{"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": f"n{i}", "gpu": "0"} for i in range(3)]
    with pytest.raises(NoGpu, match=r"3 GPUs exported in the last hour, none since"):
        ClusterReader(PrometheusClient(url, env={})).snapshot()
    Stub.answer = (400, "application/json", '{"status":"error","errorType":"bad_data","error":"parse error"}')
    with pytest.raises(QueryFailed, match="bad_data: parse error"):
        PrometheusClient(url, env={}).query("up{")


@pytest.mark.parametrize("mode", [["--once"], ["--once", "--json"], []])
def test_an_unknown_class_is_a_usage_error_naming_the_classes(mode):
    """(issue 35: --class bogus gave exit 0 and an empty table.) Found with the flags, before Prometheus is asked."""
    from gputop.analysis.vocabulary import CLASSES

    r = gputop("--source", f"prometheus=http://127.0.0.1:{free_port()}", *mode, "--class", "bogus")
    assert r.returncode == exitcodes.USAGE, r.stderr
    line = one_line(r)
    assert "--class bogus: no such class" in line and all(str(c) in line for c in CLASSES)
    if "--json" in mode:
        assert json.loads(r.stdout)["exit_code"] == exitcodes.USAGE
    else:
        assert r.stdout == ""


def test_the_judged_gpus_window_rolls_on_and_judges_as_a_window_read_whole():
    """A dcgm-exporter GPU's judging window: the first read asks for the whole minute (``query_range``), the next
    ones on the grid only for its newest mark (an instant query), and what they judge is what a new reader that
    reads the same minute whole judges (the GPU busy, then idle from one mark on); judged ahead of a step's first
    snapshot, the same, and that snapshot asks for no series to judge."""
    from gputop.fleet import reader as R
    from gputop.fleet import series as S

    labels = {"Hostname": "d1", "gpu": "0", "UUID": "GPU-d1", "modelName": "NVIDIA H100", "instance": "d1:9400",
              "job": "dcgm"}
    busy = {"DCGM_FI_PROF_SM_ACTIVE": 0.97, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.9, "DCGM_FI_PROF_DRAM_ACTIVE": 0.2,
            "DCGM_FI_DEV_GPU_UTIL": 100.0, "DCGM_FI_DEV_FB_USED": 20000.0, "DCGM_FI_DEV_FB_FREE": 100000.0}
    idle = {**busy, "DCGM_FI_PROF_SM_ACTIVE": 0.0, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.0,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.0, "DCGM_FI_DEV_GPU_UTIL": 0.0}
    t0 = 1.8e9 + 7.0  # (off the wall clock's grid: the reader's grid starts at its first read)

    def values(t):
        return busy if t < t0 + 15 else idle

    class Client:
        url = "http://stub"

        def __init__(self):
            self.history = []  # (kind, start, end) of each history read

        def take_warnings(self):
            return []

        def label_values(self, label, *match, start=None, end=None):
            return ["d1"] if label == "Hostname" and match[0] == S.SELECTOR else []

        def _series(self, names, t):
            return [{"metric": {"__name__": n, **labels}, "value": [t, str(values(t)[n])]} for n in names
                    if n in values(t)]

        def query(self, promql, at=None):
            if 'Hostname=~"d1"' in promql:
                self.history.append(("instant", at, at))
                return self._series(S.JUDGE_NAMES, at)
            if promql.startswith("max by (__name__"):
                return [s for s in self._series(R.ROW_NAMES + S.NAMES, at) if s["metric"]["__name__"] in promql]
            if promql.startswith("group by (UUID") and "last_over_time" not in promql:
                return [{"metric": labels, "value": [at, "1"]}]
            return []  # no verdict exported, none late or gone

        def query_range(self, promql, start, end, step):
            self.history.append(("range", start, end))
            marks = [start + k * step for k in range(int((end - start) // step) + 1)]
            return [{"metric": {"__name__": n, **labels}, "values": [[t, str(values(t)[n])] for t in marks]}
                    for n in S.JUDGE_NAMES if n in busy]

    client = Client()
    reader = R.ClusterReader(client)
    got = [reader.snapshot(t)[0] for t in (t0, t0 + 12, t0 + 31, t0 + 64, t0 + 95)]
    assert client.history == [("range", t0 - 60, t0), ("instant", t0 + 30, t0 + 30), ("instant", t0 + 60, t0 + 60),
                              ("instant", t0 + 90, t0 + 90)]  # (t0 + 12: the same step, its verdict reused)
    assert got[0].cls == "compute-bound" and got[-1].cls == "idle"
    for t, row in zip((t0 + 30, t0 + 60, t0 + 90), got[2:]):
        whole = R.ClusterReader(Client()).snapshot(t)[0]  # a new reader: the minute to t read whole
        assert (row.cls, row.subclass, row.confidence, row.missing) == \
            (whole.cls, whole.subclass, whole.confidence, whole.missing), t
    reader.snapshot(t0 + 40)  # the clock set back: its minute read whole, no mark of the future kept
    assert client.history[-1] == ("range", t0 - 30, t0 + 30)

    # judged ahead (the cluster page's refresher, once a mark has passed): the step's first snapshot reads no series
    # to judge and shows what judging it on its way shows
    client = Client()
    ahead = R.ClusterReader(client)
    assert ahead.next_mark_in(t0) is None and not ahead.judge_ahead(t0 + 1)  # nothing read yet: nothing to judge
    ahead.snapshot(t0)
    assert ahead.next_mark_in(t0 + 12) == pytest.approx(18.0) and not ahead.judge_ahead(t0 + 12)  # (the same step)
    for t in (t0 + 31, t0 + 61):
        assert ahead.judge_ahead(t) and not ahead.judge_ahead(t + 2)  # once a step
        asked = len(client.history)
        row = ahead.snapshot(t + 5)[0]
        assert len(client.history) == asked  # the snapshot judged nothing itself
        whole = R.ClusterReader(Client()).snapshot(t - 1)[0]
        assert (row.cls, row.subclass, row.confidence, row.missing) == \
            (whole.cls, whole.subclass, whole.confidence, whole.missing), t
    assert client.history[1:] == [("instant", t0 + 30, t0 + 30), ("instant", t0 + 60, t0 + 60)]


def test_the_accounting_judges_dcgm_exporters_gpus_once_a_step_of_their_grid():
    """The accountings within one step of the judged GPUs' grid (24 h: 3 h) reuse the first one's verdicts; the
    next step reads and judges the day to its new mark."""
    from gputop.fleet import accounting as acc
    from gputop.fleet import series as S

    labels = {"Hostname": "d1", "gpu": "0", "UUID": "GPU-d1", "modelName": "NVIDIA H100", "hpc_job": "42"}
    busy = {"DCGM_FI_PROF_SM_ACTIVE": 0.97, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.9, "DCGM_FI_PROF_DRAM_ACTIVE": 0.2,
            "DCGM_FI_DEV_GPU_UTIL": 100.0, "DCGM_FI_DEV_FB_USED": 20000.0, "DCGM_FI_DEV_FB_FREE": 100000.0}

    class Client:
        def __init__(self):
            self.ranges = []

        def take_warnings(self):
            return []

        def label_values(self, label, *match, start=None, end=None):
            return ["d1"] if label == "Hostname" and match[0] == S.SELECTOR else []

        def query(self, promql, at=None):
            if 'Hostname=~"d1"' not in promql:
                return []  # no gputop verdict: no rules, nothing exported
            self.marks.append(at)  # the judged GPUs' series at one mark of their grid
            return [{"metric": {"__name__": n, **labels}, "value": [at, str(v)]} for n, v in busy.items()]

        def query_range(self, promql, start, end, step):
            raise AssertionError("the judged GPUs are read one mark at a time")

    client, cache, now = Client(), {}, 1.8e9 + 1234.0
    client.marks = []
    first, step, notes = acc.account(client, 86400.0, now, cache)
    again, _, _ = acc.account(client, 86400.0, now + 300, cache)
    assert notes == [] and client.marks == [now - 86400 + k * 10800.0 for k in range(9)]
    assert [(j.job, j.hours) for j in again] == [(j.job, j.hours) for j in first] == [
        ("42", {("compute-bound", "tensor"): pytest.approx(9 * 3.0)})]  # 9 marks of 3 h
    acc.account(client, 86400.0, now + 10800 + 1, cache)
    assert client.marks[9:] == [now + 10800 - 86400 + k * 10800.0 for k in range(9)]


def test_gone_and_memory_totals_are_asked_for_less_often_but_never_leave_a_gpu_out():
    """(issue 38: at 8,192 GPUs a read of which GPUs stopped reporting costs Prometheus 0.11 s, the memory totals
    0.21 s.) Which GPUs stopped reporting is asked for once a minute, and at once where a GPU the last read showed is
    not in this one: it is a row, not reporting, the read it went; the memory totals every TOTAL_S, and at once for a
    GPU new since."""
    from gputop.fleet import reader as R

    def labels(node):
        return {"Hostname": node, "gpu": "0", "UUID": f"GPU-{node}", "modelName": "NVIDIA H100",
                "instance": f"{node}:9400", "job": "dcgm"}
    present, ever = {"a", "b"}, {"a", "b"}  # (Prometheus holds within RECENT_S the GPUs it ever had)
    t0 = 1.8e9

    class Client:
        url = "http://stub"

        def __init__(self):
            self.asked = []

        def take_warnings(self):
            return []

        def label_values(self, label, *match, start=None, end=None):
            return []

        def query(self, promql, at=None):
            if "last_over_time" in promql:  # GONE
                self.asked.append(("gone", at))
                return [{"metric": labels(n), "value": [at, "1"]} for n in ever - present]
            if "max_over_time(timestamp" in promql:  # the gone GPUs' ages
                return [{"metric": labels(n), "value": [at, str(t0 - 200)]} for n in ever - present]
            if '__name__=~"DCGM_FI_DEV_FB_USED|' in promql:  # the memory totals
                self.asked.append(("totals", at))
                return [{"metric": {"__name__": name, **labels(n)}, "value": [at, "1000"]} for n in present
                        for name in ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")]
            if promql.startswith("max by (__name__") and "and on(" not in promql:  # a row's series
                name = next(n for n in R.ROW_NAMES if n in promql)
                return [{"metric": {"__name__": name, **labels(n)}, "value": [at, "5"]} for n in present]
            if promql.startswith("group by (UUID") and "unless" not in promql:  # meta
                return [{"metric": labels(n), "value": [at, "1"]} for n in present]
            return []  # no verdicts, none late, no extras

        def query_range(self, promql, start, end, step):
            return []

    client = Client()
    reader = R.ClusterReader(client)

    def read(t):  # the rows, and what this read asked of the two (the queries of a read go side by side)
        seen = len(client.asked)
        rows = {r.node: r for r in reader.snapshot(t)}
        return rows, sorted(what for what, _ in client.asked[seen:])
    rows, asked = read(t0)
    assert set(rows) == {"a", "b"} and asked == ["gone", "totals"]
    rows, asked = read(t0 + 20)
    assert set(rows) == {"a", "b"} and asked == []  # neither asked again within their time
    present.discard("b")
    rows, asked = read(t0 + 25)
    assert set(rows) == {"a", "b"} and not rows["b"].reporting and "not reporting" in rows["b"].flags[0]
    assert asked == ["gone"]  # b went: asked at once
    present.add("c")
    ever.add("c")
    rows, asked = read(t0 + 30)
    assert rows["c"].reporting and rows["c"].mem_total_bytes is not None and not rows["b"].reporting
    assert asked == ["totals"]  # c came: its total at once; b still gone, as kept
    assert read(t0 + 85)[1] == ["gone"]  # a minute since
    assert read(t0 + 30 + R.TOTAL_S)[1] == ["gone", "totals"]


def test_a_jobs_pcie_and_nvlink_traffic_is_asked_for_of_the_gpus_whose_class_reads_it_alone():
    """Once the verdicts are read: by UUID, by scrape target where a GPU has none; a GPU of another class, another
    GPU of that target, and another target's series of the same UUID (a dcgm-exporter beside it) are not kept."""
    from gputop.fleet import reader as R
    from gputop.fleet import series as S

    def verdict(cls, **labels):
        return {"metric": {"__name__": "gputop_verdict_confidence", "class": cls, "gpu": "0", "job": "gputop",
                           **labels}, "value": [0, "0.9"]}
    verdicts = [verdict("comms-bound", UUID="GPU-a", instance="a:9400"), verdict("pcie-bound", instance="b:9400"),
                verdict("compute-bound", UUID="GPU-c", instance="c:9400")]
    served = [dict(gpu="0", job="gputop", UUID="GPU-a", instance="a:9400"),
              dict(gpu="0", job="dcgm", UUID="GPU-a", instance="a:9401"),  # its node's dcgm-exporter
              dict(gpu="0", job="gputop", instance="b:9400"), dict(gpu="1", job="gputop", instance="b:9400")]
    asked = []

    def grouped(promql):
        asked.append(promql)
        answer = [{"metric": {"__name__": "DCGM_FI_PROF_PCIE_RX_BYTES", **labels}, "value": [0, "2.5e10"]}
                  for labels in served]
        return S.groups(answer), 0

    got, skipped = R.ClusterReader(None)._traffic(verdicts, grouped)
    assert len(asked) == 1 and f"UUID=~{values_regex({'GPU-a'})}" in asked[0]
    assert f'instance=~{values_regex({"b:9400"})},UUID="",uuid=""' in asked[0]
    assert "GPU-c" not in asked[0] and "c:9400" not in asked[0]
    assert set(got) == {gpu_id(served[0]), gpu_id(served[2])} and skipped == 0
    assert got[gpu_id(served[2])]["series"]["DCGM_FI_PROF_PCIE_RX_BYTES"] == [(0.0, 2.5e10)]
    assert R.ClusterReader(None)._traffic(verdicts[2:], grouped) == ({}, 0) and len(asked) == 1  # none: no query


def test_which_gpus_report_late_is_asked_of_every_gpu_once_a_minute_and_of_those_found_late_between():
    """Every GPU's newest sample time is asked for once a minute (GONE_S); between, only of the GPUs found late:
    still late, their age goes on; caught up, their flag goes at the next read."""
    from gputop.fleet import reader as R

    def labels(node):
        return {"Hostname": node, "gpu": "0", "UUID": f"GPU{node}", "instance": f"{node}:9400", "job": "gputop"}

    class Client:
        url = "http://stub"

        def __init__(self):
            self.asked, self.late = [], {"a": 1.8e9 - 200}  # node -> its newest sample time

        def take_warnings(self):
            return []

        def label_values(self, label, *match, start=None, end=None):
            return []

        def query(self, promql, at=None):
            if "timestamp(" in promql and "< time()" in promql:
                self.asked.append("every GPU" if promql == R.OLD else sorted(n for n in "ab" if f"GPU{n}" in promql))
                return [{"metric": labels(n), "value": [at, str(t)]} for n, t in self.late.items()
                        if promql == R.OLD or f"GPU{n}" in promql]
            if promql.startswith("max by (__name__"):
                return [{"metric": {"__name__": name, **labels(n)}, "value": [at, "0.5"]} for n in "ab"
                        for name in R.ROW_NAMES if name in promql]
            if promql == "gputop_verdict_confidence":  # each node's gputop judged its GPU
                return [{"metric": {"__name__": promql, "class": "idle", **labels(n)}, "value": [at, "0.9"]}
                        for n in "ab"]
            return []

    client, t0 = Client(), 1.8e9
    reader = R.ClusterReader(client)

    def flagged(t):
        return {row.node: row.age_s for row in reader.snapshot(t) if row.age_s is not None}
    assert flagged(t0) == {"a": 200.0} and client.asked == ["every GPU"]
    client.late["b"] = t0 - 150  # late since: not asked for until the next minute
    assert flagged(t0 + 25) == {"a": 225.0} and client.asked[1:] == [["a"]]
    del client.late["a"]  # caught up: its flag goes at once
    assert flagged(t0 + 50) == {} and client.asked[2:] == [["a"]]
    assert flagged(t0 + 55) == {} and len(client.asked) == 3  # none late: nothing asked
    assert flagged(t0 + 61) == {"b": 211.0} and client.asked[3:] == ["every GPU"]
