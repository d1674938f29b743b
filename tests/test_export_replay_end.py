"""``gputop --export --replay FILE`` when the trace ends: the GPU series go away (stale in Prometheus, as a stopped
exporter's do), never the last verdict beside the last tick's numbers; ``gputop_replay{trace,loop}`` says what is
played (1 while it plays, 0 once it ended), and the demo, which loops, says so in its ``loop`` label.

Real exporter processes scraped over HTTP; the slow test has a real Prometheus scrape one (skips without the binary).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from export_util import free_port, get, start_exporter, stop, wait_for, wait_for_metrics

TRACES = Path(__file__).parent / "data" / "traces"
# the bf16 matmul at full tilt (tensor ~90%) and then, for its last second, an idle GPU: SM 0% at its last tick
MATMUL = TRACES / "matmul_bf16.compute-bound.jsonl.gz"
PROMETHEUS = shutil.which("prometheus")


def families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def gpu_series(fams: dict[str, list]) -> dict[str, list]:
    """The families that hold a GPU's samples (every series labelled with a ``gpu``)."""
    return {name: samples for name, samples in fams.items() if any("gpu" in s.labels for s in samples)}


@pytest.mark.slow
def test_a_replay_that_ends_stops_exporting_its_gpus_and_says_it_ended():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--replay", str(MATMUL), "--speed", "10")
    try:
        seen_playing = []

        def ended():
            fams = families(get(f"http://127.0.0.1:{port}/metrics"))
            replay = fams.get("gputop_replay", [])
            assert [s.labels for s in replay] == [{"trace": MATMUL.name, "loop": "false"}], replay
            if replay[0].value == 1:  # still playing: its GPU series are there
                assert "DCGM_FI_PROF_SM_ACTIVE" in gpu_series(fams), sorted(fams)
                seen_playing.append(True)
                return None
            return fams
        wait_for_metrics(proc, port)
        fams = wait_for(ended, 30, "gputop_replay 0 (the trace ended)")
        assert seen_playing, "never scraped while the replay played"
        assert gpu_series(fams) == {}, sorted(gpu_series(fams))  # no SM 0% beside a compute-bound verdict: nothing
        # it stays so: a second scrape after the end is the same
        assert gpu_series(families(get(f"http://127.0.0.1:{port}/metrics"))) == {}
    finally:
        stop(proc)


@pytest.mark.slow
def test_the_end_of_a_replay_is_one_line_on_stderr_and_the_exporter_keeps_answering():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--replay", str(MATMUL), "--speed", "20")
    try:
        wait_for_metrics(proc, port, series="gputop_replay{")
        wait_for(lambda: [s.value for s in families(get(f"http://127.0.0.1:{port}/metrics"))["gputop_replay"]] == [0],
                 30, "the replay to end")
        proc.terminate()
        out, err = proc.communicate(timeout=15)
    finally:
        stop(proc)
    lines = [ln for ln in err.splitlines() if "replay" in ln and "ended" in ln]
    assert len(lines) == 1 and MATMUL.name in lines[0] and "no longer exported" in lines[0], err
    assert proc.returncode == 0 and "Traceback" not in err


def test_the_demo_loops_and_says_so_in_its_label():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--demo")
    try:
        fams = families(wait_for_metrics(proc, port, series="gputop_replay{"))
        assert [(s.labels, s.value) for s in fams["gputop_replay"]] == [({"trace": "demo.jsonl.gz", "loop": "true"}, 1)]
    finally:
        stop(proc)


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH (apt-get install prometheus)")
def test_prometheus_sees_the_verdict_of_an_ended_replay_go_stale(tmp_path):
    """A real Prometheus scrapes a replay through its end: while it plays, the matmul's compute-bound; after it, an instant
    query for ``gputop_bottleneck`` or the SM activity returns nothing (stale), the target is still up and
    ``gputop_replay`` reads 0."""
    from test_export_prometheus import query

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
    exporter = start_exporter(f"127.0.0.1:{exp_port}", "--replay", str(MATMUL), "--speed", "0.5")  # 24 s
    prom = None
    try:
        wait_for_metrics(exporter, exp_port)
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=subprocess.DEVNULL, stderr=log)

        def playing_verdict():
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert not query(prom_port, "gputop_replay == 0"), "the replay ended before Prometheus saw it play"
            return query(prom_port, 'gputop_bottleneck{class="compute-bound"} == 1')
        wait_for(playing_verdict, 60, "the matmul's verdict in Prometheus while the replay plays", step=0.2)
        wait_for(lambda: query(prom_port, "gputop_replay == 0"), 60, "Prometheus to see the replay end", step=0.2)
        # the scrape that said 0 had no GPU series: Prometheus marked them stale
        assert query(prom_port, "gputop_bottleneck") == []
        assert query(prom_port, "gputop_verdict_confidence") == []
        assert query(prom_port, "DCGM_FI_PROF_SM_ACTIVE") == []
        assert query(prom_port, 'up{job="gputop"}')[0]["value"][1] == "1"
    finally:
        if prom is not None:
            stop(prom)
        stop(exporter)
