"""Bad input to the cluster (issue 38): a Prometheus that answers partial data, a query that times out, series with
missing labels, exporters whose clocks are behind. Each is one line (``notes``, a flag) and the rows that are known,
never a silently smaller cluster.

A real Prometheus scrapes ``gputop --export`` replaying the demo (node ``good``) and an in-process exporter serving
dcgm-exporter's text (tests/data/dcgm) for four more GPUs, each a case: ``skew-far`` and ``skew-near`` stamp their
samples with a clock 10 min and 3 min behind (Prometheus keeps exporters' timestamps), ``no-host`` has no host label
(its scrape target names it), and ``no-gpu`` has no ``gpu`` label (not a GPU's series: skipped, counted). The CLI
reads it through an in-process proxy that passes every request on to the real Prometheus, and, as a test asks, adds
Prometheus' "partial answer" warnings or answers some queries as a Prometheus whose query timed out (HTTP 503,
``errorType`` ``timeout``).
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from cluster_util import PROMETHEUS, TRACES, DcgmServer, Prometheus, cluster_json, dcgm_text, gputop, held_trace, \
    node_uuid
from export_util import free_port, start_exporter, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH "
                                                                                "(apt-get install prometheus)")]
DEMO = TRACES.parent.parent.parent / "gputop" / "data" / "demo.jsonl.gz"
SKEW_S = {"skew-far": 600.0, "skew-near": 180.0}


class Skewed(DcgmServer):
    """dcgm-exporter's text, each sample stamped with its node's clock (``SKEW_S`` behind; the others now)."""

    def __init__(self, texts: dict[str, bytes]):
        class Texts(dict):
            def get(self, path, default=None):
                body = texts.get(path)
                if body is None:
                    return default
                node = path.strip("/").split("/")[0]
                ms = int(1000 * (time.time() - SKEW_S.get(node, 0.0)))
                lines = [ln if ln.startswith("#") or not ln.strip() else f"{ln} {ms}"
                         for ln in body.decode().splitlines()]
                return ("\n".join(lines) + "\n").encode()
        super().__init__(Texts())


class Proxy:
    """Passes requests on to ``target``; ``warn``: adds a warning to each answer; ``fail``: a regex of PromQL that is
    answered as a query that timed out."""

    warn: str | None = None
    fail: str | None = None

    def __init__(self, target: str):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _pass(self, body: bytes | None):
                url = target + self.path
                form = body.decode() if body else self.path.partition("?")[2]
                if proxy.fail and re.search(proxy.fail, urllib.parse.unquote_plus(form)):
                    out = json.dumps({"status": "error", "errorType": "timeout",
                                      "error": "query timed out in expression evaluation"}).encode()
                    self.send_response(503)
                else:
                    req = urllib.request.Request(url, data=body, headers={
                        "Content-Type": self.headers.get("Content-Type") or "application/x-www-form-urlencoded"})
                    try:
                        with urllib.request.urlopen(req, timeout=30) as r:
                            status, answer = r.status, json.loads(r.read())
                    except urllib.error.HTTPError as exc:  # Prometheus' own refusal, passed on as it is
                        status, answer = exc.code, json.loads(exc.read())
                    if proxy.warn and status == 200:
                        answer["warnings"] = [proxy.warn]
                    out = json.dumps(answer).encode()
                    self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self):
                self._pass(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def do_GET(self):
                self._pass(None)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    texts = {f"/{node}/metrics": dcgm_text("h200_matmul_bf16.prom", node, uuid=node_uuid(node, 0))
             for node in ("skew-far", "skew-near")}
    texts["/no-host/metrics"] = dcgm_text("h200_matmul_bf16.prom", "x", uuid=node_uuid("no-host", 0),
                                          drop=("Hostname",))
    texts["/no-gpu/metrics"] = dcgm_text("h200_matmul_bf16.prom", "no-gpu", uuid=node_uuid("no-gpu", 0),
                                         drop=("gpu",))
    dcgm = Skewed(texts)
    port = free_port()
    exporter = start_exporter(f"127.0.0.1:{port}", "--replay",
                              str(held_trace(DEMO, tmp / "good.jsonl.gz", "good", (28.8, 35.6), uuid_seed="good")))
    prom = proxy = None
    try:
        prom = Prometheus(tmp, f"  - job_name: gputop\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
                          + dcgm.scrape_jobs(["skew-far", "skew-near", "no-host", "no-gpu"]))
        prom.wait_up(5, [exporter])
        proxy = Proxy(prom.url)

        def ready():  # every case in Prometheus: the far one's samples within the last 15 min, the good verdict
            doc = cluster_json(proxy.url, "--range", "2m")
            nodes = {g["node"] for g in doc["gpus"]}
            return doc if {"good", "skew-far", "skew-near"} <= nodes and any(
                g["class"] for g in doc["gpus"] if g["node"] == "good") else None
        wait_for(ready, 60, "every case in Prometheus", step=1.0)
        yield {"proxy": proxy, "port": port, "dcgm_port": dcgm.port}
    finally:
        if proxy is not None:
            proxy.close()
        if prom is not None:
            prom.stop()
        stop(exporter)
        dcgm.close()


def test_exporters_behind_in_time_are_rows_flagged_with_their_age_and_bad_labels_are_said(bad):
    Proxy.warn = Proxy.fail = None
    doc = cluster_json(bad["proxy"].url, "--range", "2m")
    rows = {g["node"]: g for g in doc["gpus"]}
    target = f"127.0.0.1:{bad['dcgm_port']}"
    assert set(rows) == {"good", "skew-far", "skew-near", target}  # no-host: its target names it
    far, near = rows["skew-far"], rows["skew-near"]
    assert not far["reporting"] and 540 < far["age_s"] < 720 and "not reporting" in far["flags"][0]
    assert near["reporting"] and 150 < near["age_s"] < 260 and "clock is behind" in near["flags"][0]
    assert rows[target]["scrape_job"] == "no-host" and rows[target]["reporting"]
    assert doc["summary"]["gpus_in_cluster"] == 4 and doc["summary"]["gpus_reporting"] == 3
    assert any(re.match(r"\d+ series without a gpu label skipped", n) for n in doc["notes"]), doc["notes"]
    r = gputop("--source", f"prometheus={bad['proxy'].url}", "--once", "--range", "2m")
    assert r.returncode == 0 and "not reporting: its newest sample is" in r.stdout and "skew-far" in r.stdout


def test_a_partial_answer_is_said_and_its_rows_kept(bad):
    Proxy.warn, Proxy.fail = "remote store at 10.0.0.9:10901 did not answer: partial data", None
    try:
        doc = cluster_json(bad["proxy"].url, "--range", "2m")
    finally:
        Proxy.warn = None
    assert "Prometheus said its answer is partial: remote store at 10.0.0.9:10901 did not answer: partial data" in \
        doc["notes"]
    assert {g["node"] for g in doc["gpus"]} >= {"good", "skew-near"} and doc["exit_code"] == 0


def test_a_query_that_times_out_costs_its_part_only(bad):
    Proxy.fail = r"^query=gputop_verdict_confidence&"  # the verdicts now: every GPU judged here instead
    try:
        doc = cluster_json(bad["proxy"].url, "--range", "2m")
        Proxy.fail = r"count_over_time\(gputop_verdict_confidence"  # the accounting's slices
        acc = cluster_json(bad["proxy"].url, "--range", "2m")
        Proxy.fail = r"^query=(gputop_verdict_confidence&|max by \(__name__)"  # the rows and the verdicts: nothing known
        r = gputop("--source", f"prometheus={bad['proxy'].url}", "--once")
    finally:
        Proxy.fail = None
    good = next(g for g in doc["gpus"] if g["node"] == "good")
    assert good["judged_by"] == "gputop" and good["class"] is not None  # judged here from its series
    assert any(n.startswith("the exported verdicts not read:") and "timeout" in n for n in doc["notes"]), doc["notes"]
    assert len(doc["gpus"]) == 4
    assert any(n.startswith("accounting incomplete: the part of the exported verdicts' GPU-hours") for n in
               acc["notes"]), acc["notes"]
    assert r.returncode == 3 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "timeout" in r.stderr
