"""Consumer mode: gputop reads a dcgm-exporter's /metrics (``--source dcgm-exporter=URL``).

The texts in tests/data/dcgm/ are in dcgm-exporter's exposition format with the values of one tick of
gputop's recorded H200 trace (see the README there). They are served by a real HTTP server on localhost;
``gputop --once --json`` runs as a real subprocess against it.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import jsonschema
import pytest

from export_util import free_port
from gputop.analysis.classify import classify
from gputop.analysis.peaks import compute_peaks
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import DcgmExporterSource, parse, to_sample
from gputop.telemetry.errors import BadSource
from gputop.telemetry.sample import SAMPLE_FIELDS

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "dcgm"
ONCE_SCHEMA = json.loads((ROOT / "gputop" / "schema" / "once.schema.json").read_text())
NOT_DCGM = {
    "/html": "<html><body>Welcome to nginx!</body></html>\n",
    "/node": "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.21\n",
}


_H200 = (DATA / "h200_matmul_bf16.prom").read_text()
VARIANTS = {  # the same scrape as other dcgm-exporters give it
    "/no_driver_label.prom": re.sub(r',DCGM_FI_DRIVER_VERSION="[^"]*"', "", _H200),  # older exporters
    "/unknown_model.prom": _H200.replace('modelName="NVIDIA H200"', 'modelName="NVIDIA Z9000"'),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        path = DATA / self.path.lstrip("/")
        if self.path in NOT_DCGM or self.path in VARIANTS:
            body = (NOT_DCGM.get(self.path) or VARIANTS[self.path]).encode()
        elif self.path.endswith(".prom") and path.is_file():
            body = path.read_bytes()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    """A localhost HTTP server: ``exporter(name)`` is the URL that serves tests/data/dcgm/name."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield lambda name: f"http://127.0.0.1:{server.server_address[1]}/{name}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def gputop_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60)


def text_values(name: str) -> tuple[dict[str, float], dict[str, str]]:
    """The file's values and labels, read with a regular expression (not the parser under test)."""
    values, labels = {}, {}
    for line in (DATA / name).read_text().splitlines():
        m = re.fullmatch(r"(DCGM_FI_\w+)\{(.*)\} (\S+)", line)
        if m:
            values[m.group(1)] = float(m.group(3))
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
    return values, labels


def expected_sample(values: dict[str, float]) -> dict:
    out = {field: values[name] * scale for name, field, scale, kind in F.FIELDS if name in values}
    out["mem_total_bytes"] = (values["DCGM_FI_DEV_FB_USED"] + values["DCGM_FI_DEV_FB_FREE"]) * F.MIB
    return out


@pytest.mark.parametrize("name", ["h200_matmul_bf16.prom", "h200_device_copy.prom"])
def test_once_json_from_a_dcgm_exporter_has_the_texts_values(exporter, name):
    r = gputop_cli("--source", f"dcgm-exporter={exporter(name)}", "--once", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, ONCE_SCHEMA)
    assert doc["source"] == {"kind": "dcgm-exporter", "path": exporter(name)}
    assert doc["host"]["hostname"] == "vm"
    values, labels = text_values(name)
    (gpu,) = doc["gpus"]
    sample, static = gpu["sample"], gpu["static"]
    want = expected_sample(values)
    assert set(want) >= {"sm_active_pct", "tensor_pct", "dram_bw_pct", "pcie_tx_bps", "mem_used_bytes", "power_w"}
    for field, v in want.items():
        assert sample[field] == pytest.approx(v, rel=1e-9, abs=1e-9), field
    assert sample["tensor_pct"] == pytest.approx(100 * values["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"])  # 0-1 -> %
    assert sample["mem_used_bytes"] == values["DCGM_FI_DEV_FB_USED"] * 1024 * 1024  # MiB -> bytes
    for field in set(SAMPLE_FIELDS) - set(want):  # not exported: n/a, with the reason
        assert sample[field] is None, field
        assert doc["na_reasons"][field] == "not exported by dcgm-exporter"
    assert static["index"] == int(labels["gpu"]) == 0
    assert (static["name"], static["uuid"], static["pci_bus_id"], static["driver_version"]) == (
        labels["modelName"], labels["UUID"], labels["pci_bus_id"], labels["DCGM_FI_DRIVER_VERSION"])
    assert static["gpm_supported"] is True and static["sm_count"] is None and static["compute_capability"] is None


def test_default_counters_leave_sm_activity_na(exporter):
    """dcgm-exporter's default CSV ships SM_ACTIVE/OCCUPANCY and the FP pipes commented out."""
    r = gputop_cli("--source", f"dcgm-exporter={exporter('h200_matmul_bf16_default_counters.prom')}", "--once")
    assert r.returncode == 0, r.stderr
    assert "SM activity n/a" in r.stdout and "tensor 93%" in r.stdout
    assert "sm_active_pct (not exported by dcgm-exporter)" in r.stdout


@pytest.mark.parametrize(("name", "cls", "subclass"), [
    ("h200_matmul_bf16.prom", "compute-bound", "tensor"),  # tensor 0.93 busy, DRAM 0.18
    ("h200_device_copy.prom", "memory-bound", None),  # DRAM 0.88 busy, tensor 0
])
def test_the_classifier_on_ticks_from_the_source(exporter, name, cls, subclass):
    src = DcgmExporterSource(exporter(name), fetch_period=0.0)
    try:
        ticks = [src.read() for _ in range(20)]  # each read fetches the text again
    finally:
        src.close()
    static = src.static()[0]
    v = classify(ticks, static, compute_peaks(static))
    assert (v.cls, v.subclass) == (cls, subclass), v.evidence_text


def test_the_source_keeps_the_source_protocol(exporter):
    """The attributes every source sets (gputop/telemetry/source.py): no NVML, the exporter's host, what it lacks."""
    from gputop.telemetry.source import Source

    url = exporter("h200_matmul_bf16.prom")
    src = DcgmExporterSource(url)
    assert isinstance(src, Source)
    assert (src.kind, src.path, src.label, src.nvml, src.loop, src.finished) == ("dcgm-exporter", url, url, None,
                                                                                  False, False)
    assert src.hostname == "vm" and src.header["hostname"] == "vm" and src.indices == [0]
    assert src.na_reasons["processes"] == "not exported by dcgm-exporter" and src.header["na_reasons"] is src.na_reasons
    src.watch(1)
    src.unwatch(1)
    src.close()


def test_an_exporter_that_does_not_answer_is_unreachable():
    from gputop.telemetry.errors import SourceUnreachable

    port = free_port()  # a port nothing listens on
    with pytest.raises(SourceUnreachable, match="cannot reach dcgm-exporter"):  # exit 3 (gputop.exitcodes.code_for)
        DcgmExporterSource(f"http://127.0.0.1:{port}/metrics")


def test_the_exporter_going_away_makes_samples_lost_not_an_error(exporter):
    server_url = exporter("h200_matmul_bf16.prom")
    src = DcgmExporterSource(server_url, fetch_period=0.0)
    assert src.read()["gpus"][0]["tensor_pct"] is not None
    src.url = server_url.replace("h200_matmul_bf16.prom", "gone.prom")  # now 404
    s = src.read()["gpus"][0]
    assert s["lost"] is True and s["tensor_pct"] is None and "HTTP 404" in src.error
    src.url = server_url
    assert src.read()["gpus"][0]["lost"] is False and src.error is None


@pytest.mark.parametrize("spec", ["dcgm=http://127.0.0.1:9400/metrics", "dcgm-exporter", "dcgm-exporter=",
                                  "dcgm-exporter=127.0.0.1:9400/metrics", "dcgm-exporter=ftp://h/metrics",
                                  "dcgm-exporter=http://h:port/metrics"])
def test_a_misspelt_source_is_a_usage_error(spec):
    r = gputop_cli("--source", spec, "--once")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--source" in r.stderr


def test_source_does_not_go_with_replay_or_a_run():
    for extra in (["--demo"], ["--record", "x.jsonl"], ["--run", "roofline"]):
        r = gputop_cli("--source", "dcgm-exporter=http://127.0.0.1:9400/metrics", *extra)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, extra


def test_an_unreachable_exporter_exits_3_with_one_line():
    port = free_port()  # a port nothing listens on
    r = gputop_cli("--source", f"dcgm-exporter=http://127.0.0.1:{port}/metrics", "--once", "--json")
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "cannot reach dcgm-exporter" in r.stderr
    doc = json.loads(r.stdout)  # --json: one document, the error document
    jsonschema.validate(doc, ONCE_SCHEMA)
    assert doc["exit_code"] == 3 and doc["errors"][0]["kind"] == "unreachable"
    assert doc["source"] == {"kind": "dcgm-exporter", "path": f"http://127.0.0.1:{port}/metrics"}


@pytest.mark.parametrize("path", ["html", "node", "missing.prom"])
def test_not_a_dcgm_exporter(exporter, path):
    r = gputop_cli("--source", f"dcgm-exporter={exporter(path)}", "--once")
    assert r.stderr.count("\n") == 1, r.stderr
    if path == "missing.prom":  # the server is there, the metrics are not: no data source
        assert r.returncode == 3 and "HTTP 404" in r.stderr
    else:  # it answered, with something that is not dcgm-exporter's text: bad input
        assert r.returncode == 2 and ("not Prometheus text" in r.stderr or "no DCGM_FI_" in r.stderr)


def test_parse_skips_blanks_mig_instances_and_links():
    blank = 'DCGM_FI_DEV_MEMORY_TEMP{gpu="0",UUID="GPU-a"} 9223372036854775794\n'  # dcgm-exporter's README
    mig = 'DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",GPU_I_PROFILE="1g.10gb",GPU_I_ID="7"} 0.5\n'
    link = 'DCGM_FI_DEV_NVLINK_BANDWIDTH_L0{nvlink="0",gpu="0",gpu_uuid="GPU-a"} 5\n'
    whole = 'DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a"} 0.25\nDCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 40\n'
    gpus = parse(blank + mig + link + whole)
    assert gpus[0]["values"] == {"DCGM_FI_DEV_MEMORY_TEMP": None, "DCGM_FI_PROF_SM_ACTIVE": 0.25,
                                 "DCGM_FI_DEV_GPU_TEMP": 40.0}
    s = to_sample(0, 1.0, gpus[0]["values"])
    assert s["sm_active_pct"] == 25.0 and s["temp_c"] == 40 and isinstance(s["temp_c"], int)
    with pytest.raises(BadSource):  # exit 2 (gputop.exitcodes.code_for)
        parse(mig)


def test_clock_event_reasons_decode_like_nvml():
    s = to_sample(0, 0.0, {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS": float(0x1 | 0x4)})
    assert s["clock_reasons"] == ["idle", "software power cap"]


def test_the_tui_monitor_runs_on_the_source(exporter):
    """The monitor page on a dcgm-exporter source: the device, its counters and the verdict."""
    from gputop.telemetry.source import DCGM_EXPORTER, SourceSpec
    from gputop.tui.app import GputopApp
    from gputop.tui.config import open_config
    from pilot_util import step, sync, wait_screen

    config = open_config(SourceSpec(kind=DCGM_EXPORTER, path=exporter("h200_matmul_bf16.prom")))
    config.start_sampler, config.fps = False, 0

    @sync
    async def run():
        app = GputopApp(config)
        async with app.run_test(size=(120, 40)) as pilot:
            await step(app, pilot, 30)
            await wait_screen(pilot, ("H200", "DCGM-EXPORTER", "host vm", "SM activity", "Tensor active",
                                      "verdict: compute-bound (tensor cores)"))
            await pilot.press("q")

    run()


def test_once_names_the_model_and_takes_its_peaks_from_the_label(exporter):
    """The scrape's modelName="NVIDIA H200" is a model gputop knows: its published facts give the peaks (said so),
    and what the exporter does not say is one word, never "None" or "n/a" glued to a unit."""
    r = gputop_cli("--source", f"dcgm-exporter={exporter('h200_matmul_bf16.prom')}", "--once")
    assert r.returncode == 0, r.stderr
    gpu_line = next(line for line in r.stdout.splitlines() if line.startswith("GPU 0"))
    assert gpu_line == ("GPU 0  NVIDIA H200  (Hopper, cc 9.0, 132 SMs, 16896 CUDA cores; the model's published "
                        "figures)  driver 580.159.04  CUDA unknown")
    assert "(link unknown)" in r.stdout and "peaks: DRAM 4.8" in r.stdout
    assert "None" not in r.stdout and "genn/a" not in r.stdout and "xn/a" not in r.stdout
    r = gputop_cli("--source", f"dcgm-exporter={exporter('h200_matmul_bf16.prom')}", "--once", "--json")
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, ONCE_SCHEMA)
    peaks = doc["gpus"][0]["peaks"]
    assert peaks["dram_bytes_per_s"] == pytest.approx(4.8e12, rel=0.02)
    assert peaks["tensor_dense_flops"]["bf16"] == pytest.approx(989.4e12, rel=0.01)
    assert any("published figures" in n for n in peaks["notes"])
    assert doc["gpus"][0]["static"]["sm_count"] is None  # the static facts stay what the exporter said


def test_an_exporter_without_the_driver_label_says_unknown(exporter):
    r = gputop_cli("--source", f"dcgm-exporter={exporter('no_driver_label.prom')}", "--once")
    assert r.returncode == 0, r.stderr
    assert "driver unknown  CUDA unknown" in r.stdout and "None" not in r.stdout


def test_an_unknown_model_has_no_invented_facts(exporter):
    r = gputop_cli("--source", f"dcgm-exporter={exporter('unknown_model.prom')}", "--once", "--json")
    assert r.returncode == 0, r.stderr
    peaks = json.loads(r.stdout)["gpus"][0]["peaks"]
    assert peaks["dram_bytes_per_s"] is None and peaks["fp32_flops"] is None
    r = gputop_cli("--source", f"dcgm-exporter={exporter('unknown_model.prom')}", "--once")
    gpu_line = next(line for line in r.stdout.splitlines() if line.startswith("GPU 0"))
    assert gpu_line == "GPU 0  NVIDIA Z9000  driver 580.159.04  CUDA unknown"
    assert "None" not in r.stdout and "genn/a" not in r.stdout


def test_the_tui_and_once_give_one_answer_on_the_same_exporter(exporter):
    """(issue 35: --once said "cc 9.0, 132 SMs (the model's published figures)", the TUI on the same URL "cc n/a n/a
    SMs" and clocks "1500/n/a".) Both take the model's published figures where the exporter names the model alone,
    and say so; what neither knows (the power limit) is n/a in both."""
    from gputop.telemetry.source import DCGM_EXPORTER, SourceSpec
    from gputop.tui.app import GputopApp
    from gputop.tui.config import open_config
    from pilot_util import step, sync

    url = exporter("h200_matmul_bf16.prom")
    once = gputop_cli("--source", f"dcgm-exporter={url}", "--once").stdout
    assert "cc 9.0, 132 SMs" in once and "SM 1500/1980 MHz" in once and "memory 3201/3201 MHz" in once, once
    assert "power 692/n/a W" in once
    config = open_config(SourceSpec(kind=DCGM_EXPORTER, path=url))
    config.start_sampler, config.fps = False, 0

    @sync
    async def run():
        app = GputopApp(config)
        async with app.run_test(size=(160, 48)) as pilot:
            await step(app, pilot, 3)
            return app.screen_text(), app.monitor.verdict

    text, verdict = run()
    assert "GPU 0 NVIDIA H200  Hopper cc 9.0  132 SMs (published)" in text, text
    assert "n/a SMs" not in text and "cc n/a" not in text
    assert "1500 / 1980 MHz" in text and "3201 / 3201 MHz" in text
    assert "692 / n/a W" in text
