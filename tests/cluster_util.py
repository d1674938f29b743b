"""Helpers for the cluster tests that run a real Prometheus over real exporters: a steady stretch of a recorded trace
held for an hour (a job that runs on), dcgm-exporter's text served in-process, a Prometheus started on a scrape
configuration and waited for, and the CLI's cluster document read and checked against its schema."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import jsonschema

from export_util import free_port, get, stop, wait_for

ROOT = Path(__file__).resolve().parents[1]
DCGM = ROOT / "tests" / "data" / "dcgm"
TRACES = ROOT / "tests" / "data" / "traces"
PROMETHEUS = shutil.which("prometheus")
HOLD_S, HOLD_EVERY = 3600.0, 5  # an hour of the stretch (longer than any module runs), every 5th tick (2 Hz)


def node_uuid(seed: str, index: int) -> str:
    """A GPU UUID of its own for ``seed`` (the shipped recordings were made on a few machines: they share theirs)."""
    h = hashlib.sha1(f"{seed}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def held_trace(src: Path, dest: Path, hostname: str | None, stretch: tuple[float, float],
               uuid_seed: str | None = None, every: int = HOLD_EVERY) -> Path:
    """A trace of ``src``'s recorded ticks within ``stretch`` (every ``every``-th), played again and again for
    ``HOLD_S`` seconds (times shifted on), under a header that names ``hostname`` as the recording machine (the
    exporter's Hostname label; None: the recording's own) and, with ``uuid_seed``, gives its GPUs UUIDs of their own
    (as another machine's)."""
    with gzip.open(src, "rt") as f:
        rows = [json.loads(line) for line in f]
    lo, hi = stretch
    ticks = [r for r in rows[1:] if r.get("type") == "tick" and lo <= r["t"] < hi][::every]
    header = dict(rows[0])
    if hostname is not None:
        header["hostname"] = hostname
    if uuid_seed is not None:
        header["devices"] = [dict(d, uuid=node_uuid(uuid_seed, d.get("index", i)))
                             for i, d in enumerate(header["devices"])]
    with gzip.open(dest, "wt") as f:
        f.write(json.dumps(header) + "\n")
        for k in range(int(HOLD_S // (hi - lo)) + 1):
            for r in ticks:
                t = r["t"] - lo + k * (hi - lo)
                f.write(json.dumps(dict(r, t=t, gpus=[dict(g, t=t) for g in r["gpus"]])) + "\n")
    return dest


def dcgm_text(name: str, node: str, extra: str = "", uuid: str | None = "", drop: tuple[str, ...] = ()) -> bytes:
    """dcgm-exporter's text (tests/data/dcgm) as ``node``'s, with ``extra`` labels; ``uuid``: "" keeps the
    recorded UUID, a value replaces it, None removes the label; ``drop``: other labels removed."""
    text = (DCGM / name).read_text().replace('Hostname="vm"', f'Hostname="{node}"' + (f",{extra}" if extra else ""))
    if uuid is None:
        drop = drop + ("UUID",)
    elif uuid:
        text = re.sub(r'UUID="[^"]*"', f'UUID="{uuid}"', text)
    for label in drop:
        text = re.sub(rf',?\b{label}="[^"]*"', "", text).replace("{,", "{")
    return text.encode()


class DcgmServer:
    """dcgm-exporter's text for several nodes, one path each (``/NODE/metrics``), served in-process."""

    def __init__(self, texts: dict[str, bytes]):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = texts.get(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def scrape_jobs(self, nodes) -> str:
        """Prometheus scrape jobs, one per node, named as the node."""
        return "".join(f"""  - job_name: {node}
    metrics_path: /{node}/metrics
    static_configs: [{{targets: ["127.0.0.1:{self.port}"]}}]
""" for node in nodes)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def query(port: int, promql: str) -> list[dict]:
    body = json.loads(get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert body["status"] == "success", body
    return body["data"]["result"]


class Prometheus:
    """A real Prometheus (scrapes and rules every second) on ``scrape`` (the scrape_configs' entries, YAML), its
    data under ``tmp``; ``stop()`` ends it."""

    def __init__(self, tmp: Path, scrape: str, rules: Path | None = None):
        config = tmp / "prometheus.yml"
        config.write_text("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
                          + (f'rule_files: ["{rules}"]\n' if rules else "") + "scrape_configs:\n" + scrape)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "prometheus.log"
        self.log = open(self.log_path, "w")
        self.argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log)

    def alive(self) -> None:
        assert self.proc.poll() is None, self.log_path.read_text()[-2000:]

    def wait_up(self, targets: int, procs=(), timeout: float = 60.0) -> None:
        """Until every one of ``targets`` scrape targets answers (each exporter process in ``procs`` alive)."""
        def up():
            self.alive()
            for p in procs:
                assert p.poll() is None, p.stderr.read()
            return len(query(self.port, "up == 1")) == targets
        wait_for(up, timeout, f"Prometheus to scrape its {targets} targets", step=0.3)

    def stop(self) -> None:
        stop(self.proc)
        self.log.close()


def gputop(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=e, timeout=60)


def cluster_json(url: str, *extra: str) -> dict:
    r = gputop("--source", f"prometheus={url}", "--once", "--json", *extra)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, json.loads((ROOT / "gputop/schema/cluster.schema.json").read_text()))
    return doc


def served_gpus(port: int) -> dict[tuple[str, str], dict]:
    """What an exporter serves now, by (UUID, gpu): its labels, its DCGM values and its class (gputop's)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, str], dict] = {}
    for fam in text_string_to_metric_families(get(f"http://127.0.0.1:{port}/metrics")):
        for s in fam.samples:
            if "gpu" not in s.labels or "UUID" not in s.labels:
                continue
            g = out.setdefault((s.labels["UUID"], s.labels["gpu"]), {"labels": s.labels, "values": {}, "class": None})
            if s.name.startswith("DCGM_"):
                g["values"][s.name] = s.value
            if s.name == "gputop_bottleneck" and s.value == 1:
                g["class"] = (s.labels["class"], s.labels.get("subclass") or None)
    return out
