"""A real Prometheus scrapes a real ``gputop --export --demo``: the target comes up, and its HTTP API returns
dcgm-exporter's series with their labels and values that the demo trace holds (within conversion), and
exactly one ``gputop_bottleneck`` class at 1.

scripts/test installs Prometheus from Debian's packages where it can; without the binary this test skips.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
import subprocess
import urllib.parse

import pytest

from export_util import free_port, get, start_exporter, stop, wait_for, wait_for_metrics
from gputop.analysis.vocabulary import CLASSES
from gputop.export.dcgm_names import MIB, SERIES
from gputop.telemetry.trace import read_trace, demo_trace_path

PROMETHEUS = shutil.which("prometheus")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH (scripts/test installs "
                                 "Debian's `prometheus` package; apt-get install prometheus)")]


def query(port: int, promql: str) -> list[dict]:
    body = json.loads(get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert body["status"] == "success", body
    return body["data"]["result"]


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of the Grafana dashboard, its variables set to match all."""
    dash = json.loads((Path(__file__).resolve().parents[1] / "docs" / "grafana" / "gputop.json").read_text())
    out = []

    def walk(panels):
        for p in panels:
            out.extend((p.get("title"), t["expr"].replace("$Hostname", ".*").replace("$gpu", ".*"))
                       for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(dash["panels"])
    return out


def trace_values() -> dict[str, set[float]]:
    """Every value each DCGM series can take on the demo trace, converted as the exporter converts."""
    header, rows = read_trace(demo_trace_path())
    out: dict[str, set[float]] = {s.name: set() for s in SERIES}
    for row in rows:
        if row["type"] != "tick":
            continue
        sample = row["gpus"][0]
        for s in SERIES:
            args = [sample.get(f) for f in s.fields]
            if None not in args:
                out[s.name].add(s.convert(*args))
    return out


def near_one_of(v: float, values: set[float]) -> bool:
    return any(abs(v - w) <= 1e-9 * max(1.0, abs(w)) for w in values)


def test_prometheus_scrapes_the_demo_with_dcgm_names_labels_and_trace_values(tmp_path):
    exp_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gputop
    static_configs:
      - targets: ["127.0.0.1:{exp_port}"]
""")
    exporter = start_exporter(f"127.0.0.1:{exp_port}", "--demo")
    prom = None
    try:
        wait_for_metrics(exporter, exp_port)
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                                     f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                                    stdout=subprocess.DEVNULL, stderr=log)

        def target_up():
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            up = query(prom_port, 'up{job="gputop"}')
            return up and up[0]["value"][1] == "1"
        wait_for(target_up, 60, "Prometheus to scrape gputop (up == 1)", step=0.2)

        def all_series():
            got = {s.name: query(prom_port, s.name) for s in SERIES}
            return got if all(got.values()) else None
        got = wait_for(all_series, 30, "every DCGM series in Prometheus", step=0.2)
        header, _ = read_trace(demo_trace_path())
        static = header["devices"][0]
        possible = trace_values()
        for name, result in got.items():
            assert len(result) == 1, (name, result)
            labels, value = result[0]["metric"], float(result[0]["value"][1])
            assert {k: labels[k] for k in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")} == {
                "gpu": "0", "UUID": static["uuid"], "pci_bus_id": static["pci_bus_id"], "device": "nvidia0",
                "modelName": static["name"], "Hostname": header["hostname"]}, name
            assert labels["job"] == "gputop" and labels["instance"] == f"127.0.0.1:{exp_port}"
            assert near_one_of(value, possible[name]), (name, value)
        fb_total = float(got["DCGM_FI_DEV_FB_USED"][0]["value"][1]) + float(got["DCGM_FI_DEV_FB_FREE"][0]["value"][1])
        assert abs(fb_total - static["memory_total_bytes"] // MIB) <= 1

        def verdict():
            rows = query(prom_port, "gputop_bottleneck")
            return rows if len(rows) >= len(CLASSES) else None
        rows = wait_for(verdict, 30, "gputop_bottleneck in Prometheus", step=0.2)
        assert {r["metric"]["class"] for r in rows} == set(CLASSES)
        at_one = [r for r in rows if r["value"][1] == "1"]
        assert len(at_one) == 1 and all(r["value"][1] == "0" for r in rows if r not in at_one), rows
        conf = query(prom_port, "gputop_verdict_confidence")
        assert len(conf) == 1 and conf[0]["metric"]["class"] == at_one[0]["metric"]["class"]
        assert 0 < float(conf[0]["value"][1]) <= 1
        peak = query(prom_port, 'gputop_peak_tensor_flops{dtype="bf16"}')
        assert len(peak) == 1 and float(peak[0]["value"][1]) > 1e14
        # every query of the Grafana dashboard (docs/grafana/gputop.json) returns data, variables at "All"
        for title, expr in dashboard_queries():
            if "gputop_process_gpu_memory_bytes" in expr and not query(prom_port, "gputop_process_gpu_memory_bytes"):
                continue  # no GPU process at this tick of the demo: that panel is empty by rights
            assert query(prom_port, expr), (title, expr)
    finally:
        if prom is not None:
            stop(prom)
        stop(exporter)
