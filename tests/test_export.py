"""``gputop --export``: the collector's text (parsed with prometheus_client's parser, no server), the names
checked against dcgm-exporter's own CSVs, and the command as a user meets it (real processes: the
default bind, bad addresses, a port in use, stopping on signals). The scrape by a real Prometheus is in
test_export_prometheus.py."""

from __future__ import annotations

import csv
import json
import platform
import signal
import socket
from pathlib import Path

import psutil
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from export_util import free_port, get, start_exporter, stop, wait_for, wait_for_metrics
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.vocabulary import CLASSES
from gputop.cli import AddressError, build_parser, parse_address
from gputop.export.collector import ExportedGpu, ExportOptions, GputopCollector, gpu_labels, read_job_map
from gputop.export.dcgm_names import GPU_LABELS, JOB_LABEL, MIB, SERIES
from gputop.export.server import visible_positions
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.trace import ReplaySource, demo_trace_path

DCGM_CSVS = Path(__file__).parent / "data" / "dcgm"
MATMUL_TICK = 105  # the demo's bf16 matmul: tensor ~93%, DRAM ~17% (processes listed on ticks 100 and 110)


def dcgm_csv_rows() -> dict[str, list[tuple[str, str]]]:
    """name -> [(type, help)] of every DCGM line in dcgm-exporter's CSVs, commented out or not."""
    rows: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(DCGM_CSVS.glob("*.csv")):
        for line in path.read_text().splitlines():
            line = line.lstrip("# ").strip()
            if not line.startswith("DCGM_"):
                continue
            name, kind, help_text = next(csv.reader([line], skipinitialspace=True))[:3]
            rows.setdefault(name.strip(), []).append((kind.strip(), help_text.strip()))
    return rows


def demo_collector(ticks: int = MATMUL_TICK + 1, options: ExportOptions | None = None):
    src = ReplaySource(demo_trace_path())
    static = src.static()
    sampler = Sampler(src)
    gpus = [ExportedGpu(0, static[0], compute_peaks(static[0]), gpu_labels(static[0], "testhost"))]
    collector = GputopCollector(sampler, gpus, options or ExportOptions(live=False))
    for _ in range(ticks):
        sampler.step()
    return collector, sampler


def scrape(collector) -> dict[str, list]:
    """family name -> its samples, from the text a scrape returns."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_every_dcgm_series_is_named_in_dcgm_exporters_csvs_with_its_type_and_help():
    rows = dcgm_csv_rows()
    assert "DCGM_FI_DEV_SM_CLOCK" in rows and "DCGM_FI_PROF_SM_ACTIVE" in rows  # the CSVs were read
    for s in SERIES:
        assert s.name in rows, f"{s.name} is not in dcgm-exporter's CSVs"
        assert (s.kind, s.help) in rows[s.name], (s.name, s.kind, s.help, rows[s.name])
    families = scrape(demo_collector()[0])
    exported = {n for n in families if n.startswith("DCGM_")}
    assert exported == {s.name for s in SERIES}
    assert exported <= set(rows)


def test_the_collector_text_holds_the_latest_tick_converted_to_dcgm_units():
    collector, sampler = demo_collector()
    sample = sampler.latest()["gpus"][0]
    static = ReplaySource(demo_trace_path()).static()[0]
    fam = scrape(collector)
    one = lambda name: fam[name].samples[0]  # noqa: E731
    labels = one("DCGM_FI_PROF_SM_ACTIVE").labels
    assert labels == {"gpu": "0", "UUID": static["uuid"], "pci_bus_id": static["pci_bus_id"], "device": "nvidia0",
                      "modelName": "NVIDIA H200", "Hostname": "testhost"}
    assert one("DCGM_FI_PROF_SM_ACTIVE").value == pytest.approx(sample["sm_active_pct"] / 100)
    assert one("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE").value == pytest.approx(sample["tensor_pct"] / 100)
    assert one("DCGM_FI_PROF_DRAM_ACTIVE").value == pytest.approx(sample["dram_bw_pct"] / 100)
    assert one("DCGM_FI_PROF_PCIE_RX_BYTES").value == pytest.approx(sample["pcie_rx_bps"])
    assert one("DCGM_FI_DEV_SM_CLOCK").value == sample["sm_clock_mhz"]
    assert one("DCGM_FI_DEV_POWER_USAGE").value == pytest.approx(sample["power_w"])
    assert one("DCGM_FI_DEV_FB_USED").value == sample["mem_used_bytes"] // MIB
    assert one("DCGM_FI_DEV_FB_FREE").value == (sample["mem_total_bytes"] - sample["mem_used_bytes"]) // MIB
    assert one("DCGM_FI_DEV_GPU_UTIL").value == sample["util_gpu_pct"]
    for f in fam.values():
        assert f.type == "gauge", f.name
    # the verdict: one class at 1, the rest of the vocabulary at 0; the matmul is compute-bound on tensor cores
    bott = fam["gputop_bottleneck"].samples
    assert sorted(s.labels["class"] for s in bott) == sorted(CLASSES)
    current = [s for s in bott if s.value == 1]
    assert len(current) == 1 and {s.value for s in bott} == {0.0, 1.0}
    assert (current[0].labels["class"], current[0].labels["subclass"]) == ("compute-bound", "tensor")
    conf = fam["gputop_verdict_confidence"].samples
    assert len(conf) == 1 and conf[0].labels["class"] == "compute-bound" and 0 < conf[0].value <= 1
    # the peaks, from analysis/peaks.py
    peaks = compute_peaks(static)
    assert one("gputop_peak_dram_bytes_per_second").value == pytest.approx(peaks["dram_bytes_per_s"])
    assert one("gputop_peak_fp32_flops").value == pytest.approx(peaks["fp32_flops"])
    tensor = {s.labels["dtype"]: s.value for s in fam["gputop_peak_tensor_flops"].samples}
    assert tensor["bf16"] == pytest.approx(peaks["tensor_dense_flops"]["bf16"])
    # processes: the last list a tick carried (ticks in between hold None); no command line unless asked
    procs = fam["gputop_process_gpu_memory_bytes"].samples
    listed = [g["processes"] for g in (t["gpus"][0] for t in sampler.window()) if g["processes"] is not None][-1]
    assert [(p.labels["pid"], p.labels["user"], p.value) for p in procs] == [
        (str(p["pid"]), p["user"], float(p["gpu_memory_bytes"])) for p in listed]
    assert sampler.latest()["gpus"][0]["processes"] is None and listed
    assert "cmdline" not in procs[0].labels


def test_a_scrape_judges_nothing_and_a_steady_regime_is_judged_once_a_second(monkeypatch):
    """The verdicts are judged on the sampler's ticks (gputop.analysis.live.LiveNode), never by a scrape: scrapes
    between two ticks read the same verdict; a steady regime is judged again once a second of ticks, no sooner."""
    from gputop.analysis import live, thresholds as T

    collector, sampler = demo_collector()
    judged = []
    real = live.classify
    monkeypatch.setattr(live, "classify", lambda *a, **k: judged.append(1) or real(*a, **k))
    first = collector.verdicts()[0]
    for _ in range(5):
        scrape(collector)
    assert collector.verdicts()[0] is first and not judged  # the same verdict: nothing judged by a scrape
    ends = [first.t_end]
    for _ in range(30):
        sampler.step()
        v = collector.verdicts()[0]
        if v.t_end != ends[-1]:
            ends.append(v.t_end)
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    assert len(judged) == len(gaps) >= 2 and min(gaps) >= T.LIVE_EVERY_S - 0.11, (len(judged), gaps)


def test_the_command_line_label_only_with_export_cmdline():
    collector, _ = demo_collector(options=ExportOptions(cmdline=True, live=False))
    procs = scrape(collector)["gputop_process_gpu_memory_bytes"].samples
    assert procs[0].labels["cmdline"] == "python3"  # a replay: the recorded name (its pid is another machine's)


def test_jobs_from_slurm_and_from_a_dcgm_exporter_job_map(tmp_path):
    collector, _ = demo_collector(options=ExportOptions(live=False, slurm_job="4242"))
    sm = scrape(collector)["DCGM_FI_DEV_SM_CLOCK"].samples
    assert [s.labels[JOB_LABEL] for s in sm] == ["4242"]
    (tmp_path / "0").write_text("job-a\njob-b\n")
    (tmp_path / "7").write_text("other\n")
    (tmp_path / "notes.txt").write_text("ignored\n")
    assert read_job_map(str(tmp_path)) == {"0": ["job-a", "job-b"], "7": ["other"]}
    collector, _ = demo_collector(options=ExportOptions(live=False, job_map=str(tmp_path), slurm_job="4242"))
    fam = scrape(collector)
    # one series per job, as dcgm-exporter does; the mapping file wins over SLURM_JOB_ID
    assert sorted(s.labels[JOB_LABEL] for s in fam["DCGM_FI_DEV_SM_CLOCK"].samples) == ["job-a", "job-b"]
    assert len(fam["gputop_bottleneck"].samples) == 2 * len(CLASSES)
    collector, _ = demo_collector()
    assert JOB_LABEL not in scrape(collector)["DCGM_FI_DEV_SM_CLOCK"].samples[0].labels
    assert set(scrape(collector)["DCGM_FI_DEV_SM_CLOCK"].samples[0].labels) == set(GPU_LABELS)


def test_cuda_visible_devices_picks_the_exported_gpus():
    static = [{"index": i, "uuid": f"GPU-{i}aaa-{i}"} for i in range(3)]
    assert visible_positions(static, {}) == [0, 1, 2]
    assert visible_positions(static, {"CUDA_VISIBLE_DEVICES": "2,0"}) == [0, 2]
    assert visible_positions(static, {"CUDA_VISIBLE_DEVICES": "GPU-1aaa"}) == [1]
    assert visible_positions(static, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_positions(static[1:], {"CUDA_VISIBLE_DEVICES": "1"}) == [0]  # --gpu 1 2: positions shift


@pytest.mark.parametrize("text, want", [("9400", ("127.0.0.1", 9400)), ("0.0.0.0:9500", ("0.0.0.0", 9500)),
                                        ("localhost:80", ("localhost", 80)), ("[::1]:9400", ("::1", 9400))])
def test_addresses(text, want):
    assert parse_address(text) == want


def test_the_default_address_is_localhost_9400():
    args = build_parser().parse_args(["--export"])
    assert parse_address(args.export) == ("127.0.0.1", 9400)


@pytest.mark.parametrize("text", ["", "abc", "127.0.0.1:0", "127.0.0.1:70000", "host:", ":9400", "::1:9400",
                                  "[nope]:9400", "127.0.0.1:94x0"])
def test_bad_addresses_are_refused(text):
    with pytest.raises(AddressError):
        parse_address(text)


def one_line_exit_2(proc, needle: str) -> None:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (proc.returncode, err)
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert out == ""


@pytest.mark.parametrize("args, needle", [
    (["abc", "--demo"], "port must be a number"),
    (["10.1.2.3.4:9400", "--demo"], "cannot listen on"),
    (["9400", "--demo", "--once"], "--export is a mode of its own"),
    (["9400", "--demo", "--job-map", "/nonexistent/dir"], "not a directory"),
])
def test_bad_usage_is_one_line_and_exit_2(args, needle):
    proc = start_exporter(*args)
    try:
        one_line_exit_2(proc, needle)
    finally:
        stop(proc)


def test_a_port_in_use_is_one_line_and_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = start_exporter(f"127.0.0.1:{port}", "--demo")
        try:
            one_line_exit_2(proc, f"cannot listen on 127.0.0.1:{port}")
        finally:
            stop(proc)


def test_cuda_visible_devices_is_for_live_gpus_and_leaves_a_replay_alone():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--demo", CUDA_VISIBLE_DEVICES="3")
    try:
        assert "DCGM_FI_DEV_GPU_TEMP{" in wait_for_metrics(proc, port)  # the recorded H200 is not this machine's
    finally:
        stop(proc)


@pytest.mark.slow
def test_live_gpus_hidden_by_cuda_visible_devices_are_not_exported():
    """Live NVML (tests/fake_pynvml: one recorded H200, NVML index 0): named by its UUID's prefix it is
    exported with this machine's hostname; with CUDA_VISIBLE_DEVICES=1 nothing is left: exit 2."""
    uuid = json.loads((Path(__file__).parent / "data" / "static" / "h200_recorded.json").read_text())["static"]["uuid"]
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", fake_nvml=True, CUDA_VISIBLE_DEVICES=uuid[:12])
    try:
        text = wait_for_metrics(proc, port)
        fam = {f.name: f for f in text_string_to_metric_families(text)}
        labels = fam["DCGM_FI_DEV_SM_CLOCK"].samples[0].labels
        assert (labels["UUID"], labels["gpu"], labels["Hostname"]) == (uuid, "0", platform.node())
    finally:
        stop(proc)
    proc = start_exporter(f"127.0.0.1:{port}", fake_nvml=True, CUDA_VISIBLE_DEVICES="1")
    try:
        one_line_exit_2(proc, "no GPU to export")
    finally:
        stop(proc)


def test_gpu_choice_of_a_replay_that_has_no_such_gpu_is_exit_2():
    proc = start_exporter("9400", "--demo", "--gpu", "3")
    try:
        one_line_exit_2(proc, "--gpu 3: no such GPU")
    finally:
        stop(proc)


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM,  # quick: TERM
                                 pytest.param(signal.SIGHUP, marks=pytest.mark.slow)], ids=lambda s: s.name)
def test_a_port_alone_binds_localhost_and_a_stop_signal_ends_it_with_0(sig):
    port = free_port()
    proc = start_exporter(str(port), "--demo")
    try:
        text = wait_for_metrics(proc, port, series="gputop_bottleneck{")
        assert "DCGM_FI_DEV_SM_CLOCK{" in text
        conns = psutil.Process(proc.pid).net_connections(kind="inet")
        listening = [c.laddr for c in conns if c.status == psutil.CONN_LISTEN]
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)]
        assert get(f"http://127.0.0.1:{port}/metrics")  # still answering
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        assert f"stopped by {sig.name}" in err and "Traceback" not in err
        wait_for(lambda: proc.poll() is not None, 5, "the exporter to be gone")
    finally:
        stop(proc)


@pytest.mark.slow
def test_a_real_exporter_labels_its_series_with_the_job_map_and_slurm_job(tmp_path):
    (tmp_path / "0").write_text("train-17\n")
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--demo", "--job-map", str(tmp_path), SLURM_JOB_ID="99")
    try:
        text = wait_for_metrics(proc, port)
        fam = {f.name: f for f in text_string_to_metric_families(text)}
        assert [s.labels[JOB_LABEL] for s in fam["DCGM_FI_DEV_GPU_TEMP"].samples] == ["train-17"]
        (tmp_path / "0").unlink()  # read at each scrape: now the Slurm job
        text = get(f"http://127.0.0.1:{port}/metrics")
        fam = {f.name: f for f in text_string_to_metric_families(text)}
        assert [s.labels[JOB_LABEL] for s in fam["DCGM_FI_DEV_GPU_TEMP"].samples] == ["99"]
    finally:
        stop(proc)



def test_the_exported_verdict_is_the_tui_live_verdict_with_its_window():
    """--export judges the current regime (the TUI's live verdict: its model's LiveNode), not a fixed last 3 s:
    fed the same ticks, both give the same class, confidence and window at every tick."""
    from gputop.tui.config import TuiConfig
    from gputop.tui.model import TuiModel

    collector, sampler = demo_collector(ticks=0)
    tui = TuiModel(TuiConfig(ReplaySource(demo_trace_path()), start_sampler=False, hostname="testhost", specs=[],
                             device="cpu", fps=0))
    for i in range(MATMUL_TICK + 30):  # to 2 s into the bf16 matmul phase (8.2-15.2 s), then a second on
        sampler.step()
        tui.sampler.step()
        got, want = collector.verdicts()[0], tui.live.snapshot().gpus[0].verdict
        assert (got is None) == (want is None), i
        if got is not None:
            assert (got.cls, got.confidence, got.t_start, got.t_end, got.evidence_text) == \
                (want.cls, want.confidence, want.t_start, want.t_end, want.evidence_text), i
    fixed_s = 3.0  # the fixed window a live verdict judged before it followed the work
    assert got.cls == "compute-bound" and got.t_end - got.t_start > fixed_s  # the whole phase so far
    span = scrape(collector)["gputop_verdict_window_seconds"].samples
    assert len(span) == 1 and span[0].labels["class"] == "compute-bound" and span[0].value > fixed_s
