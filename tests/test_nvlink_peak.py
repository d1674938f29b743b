"""The NVLink peak, always (issue 25): NVML's common speed field reads NotSupported on the 4-H100 node the multi-GPU
corpus was recorded on (driver 580); each link's own speed field (scope = the link) and the links' NVLink version
still answer. The fake NVML here answers exactly what that machine answered (its nvml_links.json); the peak is
then the active links times a link's speed from the first source that has one, and says which gave it.
``--once``, the allreduce workload's link peak (busbw as % of it), the classifier's peaks and ``--export`` read
the same figure.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.analysis.links import link_peak
from gputop.analysis.links import nvlink_peak
from gputop.analysis.peaks import compute_peaks
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import read_link, read_nvlink, read_static
from gputop.telemetry.trace import read_trace
from tests import fault_util
from tests.fake_nvml import LinksNvml

CORPUS = Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x4"
LINKS_JSON = CORPUS / "nvml_links.json"
LINKS = json.loads(LINKS_JSON.read_text())
STATIC = json.loads((Path(__file__).parent / "data" / "static" / "h200_recorded.json").read_text())["static"]
PER_LINK_MBPS = LINKS["gpus"][0]["links"][0]["get_speed"]  # what each link's speed field read on that node


def nvml(links: dict = LINKS) -> Nvml:
    return Nvml(LinksNvml(STATIC, links))


def test_the_recorded_node_says_not_supported_for_the_common_speed_and_answers_per_link():
    g = LINKS["gpus"][0]
    assert g["speed_common"] == "ret 3"  # NVML_ERROR_NOT_SUPPORTED
    assert {lk["version"] for lk in g["links"]} == {6} and len(g["links"]) == g["link_count"] == 18


def test_where_the_common_speed_is_not_supported_each_links_speed_field_gives_the_peak():
    n = nvml()
    facts = read_nvlink(n, 0)
    assert facts["nvlink_speed_mbps"] is None and n.na_reasons["nvlink_fields"] == "NotSupported"
    assert facts["nvlink_links_active"] == 18 and facts["nvlink_link_speed_mbps"] == PER_LINK_MBPS
    assert facts["nvlink_version"] == 6
    peaks = compute_peaks(read_static(n, 2))
    assert peaks["nvlink_bytes_per_s_per_dir"] == pytest.approx(18 * PER_LINK_MBPS * 1e6)
    assert "per-link speed" in peaks["nvlink_peak_source"] and "18 NVLinks" in peaks["nvlink_peak_source"]


def test_without_any_speed_field_the_nvlink_version_gives_the_generations_payload_rate():
    links = copy.deepcopy(LINKS)
    for g in links["gpus"]:
        for lk in g["links"]:
            lk["get_speed"] = "ret 3"
    facts = read_nvlink(nvml(links), 1)
    assert facts["nvlink_link_speed_mbps"] is None and facts["nvlink_version"] == 6
    peak, source = nvlink_peak(facts)
    assert peak == pytest.approx(18 * 25e9) and "NVLink 4" in source and "version" in source
    assert nvlink_peak(dict(facts, nvlink_version=7))[0] == pytest.approx(18 * 50e9)  # NVLink 5: 50 GB/s a link
    assert nvlink_peak(dict(facts, nvlink_version=4, nvlink_links_active=12))[0] == pytest.approx(12 * 25e9)  # A100


def test_a_trace_recorded_without_any_link_speed_gets_its_architectures_generation():
    header, _ = read_trace(str(CORPUS / "comms_mlp.jsonl.gz"))
    static = header["devices"][0]
    assert static["nvlink_speed_mbps"] is None and static["nvlink_links_active"] == 18
    peaks = compute_peaks(static)
    assert peaks["nvlink_bytes_per_s_per_dir"] == pytest.approx(18 * 25e9)
    assert "Hopper" in peaks["nvlink_peak_source"]
    assert nvlink_peak({"nvlink_links_active": 0, "architecture": "Hopper"}) == (None, None)  # no link up: n/a


def test_the_allreduce_workloads_link_peak_is_the_same_figure_with_its_source():
    link = read_link(nvml(), 0, 3)
    assert link["kind"] == "nvlink"
    peak = link_peak(link)
    assert peak["peak_gbps"] == pytest.approx(18 * PER_LINK_MBPS / 1000) and "per-link" in peak["source"]
    assert peak["peak_gbps"] * 1e9 == pytest.approx(compute_peaks(read_static(nvml(), 0))["nvlink_bytes_per_s_per_dir"])


@pytest.mark.slow
def test_once_and_its_json_carry_the_nvlink_peak_and_where_it_came_from(tmp_path):
    e = fault_util.env(fake_nvml=True, GPUTOP_FAKE_NVML_LINKS=str(LINKS_JSON))
    out = subprocess.run([sys.executable, "-m", "gputop", "--once", "--json"], capture_output=True, text=True,
                         env=e, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["gpus"]) == 4
    for g in doc["gpus"]:
        assert g["peaks"]["nvlink_bytes_per_s_per_dir"] == pytest.approx(18 * PER_LINK_MBPS * 1e6)
        assert "per-link speed" in g["peaks"]["nvlink_peak_source"]
    text = subprocess.run([sys.executable, "-m", "gputop", "--once"], capture_output=True, text=True, env=e,
                          timeout=60).stdout
    assert "NVLink rx" in text and "per-link speed" in text


def test_export_has_the_nvlink_peak_series():
    from tests.export_util import replay_collector
    from tests.test_export import scrape

    collector, sampler, _ = replay_collector(CORPUS / "comms_mlp.jsonl.gz")
    sampler.step()
    fam = scrape(collector)["gputop_peak_nvlink_bytes_per_second"]
    assert [s.value for s in fam.samples] == pytest.approx([18 * 25e9] * 4)
