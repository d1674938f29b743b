"""docs/grafana/gputop.json: valid JSON, a PromQL target in every panel, and only metric names that DCGM
(gputop/telemetry/dcgm_fields.py) or gputop's exporter define."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gputop.telemetry import dcgm_fields

DASHBOARD = Path(__file__).resolve().parents[1] / "docs" / "grafana" / "gputop.json"

# What gputop's exporter publishes besides the DCGM names (issue #14).
GPUTOP_METRICS = {
    "gputop_bottleneck", "gputop_verdict_confidence", "gputop_peak_dram_bytes_per_second",
    "gputop_peak_fp32_flops", "gputop_process_gpu_memory_bytes",
}
KNOWN = {row[0] for row in dcgm_fields.FIELDS} | set(dcgm_fields.MEM_TOTAL_PARTS) | GPUTOP_METRICS
PROMQL_WORDS = {  # functions, aggregations, operators and modifiers this dashboard may use
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "avg_over_time", "max_over_time",
    "label_values", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset",
}


def panels(doc: dict) -> list[dict]:
    out = []
    for p in doc.get("panels", []):
        out += [p] if p.get("type") != "row" else panels(p)
    return out


def metric_names(expr: str) -> set[str]:
    """The metric names in a PromQL expression: what is left after label matchers, label lists of
    by/on/group_left(...), template variables and PromQL's own words are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\$\w+|\$\{[^}]*\}", " ", expr)
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr))
    return words - PROMQL_WORDS


def test_the_dashboard_is_valid_json_with_variables():
    doc = json.loads(DASHBOARD.read_text())
    names = {v["name"]: v for v in doc["templating"]["list"]}
    assert names["DS_PROMETHEUS"]["type"] == "datasource" and names["DS_PROMETHEUS"]["query"] == "prometheus"
    assert {"Hostname", "gpu"} <= set(names)
    for p in panels(doc):
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]


def test_every_panel_has_a_promql_target_with_known_metric_names():
    doc = json.loads(DASHBOARD.read_text())
    used: set[str] = set()
    assert len(panels(doc)) >= 6
    for p in panels(doc):
        exprs = [t.get("expr", "").strip() for t in p.get("targets", [])]
        assert exprs and all(exprs), f"panel {p['title']!r} has no PromQL target"
        for e in exprs:
            assert e.count("(") == e.count(")") and e.count("{") == e.count("}"), e
            names = metric_names(e)
            assert names, e
            assert names <= KNOWN, f"{p['title']!r}: unknown metric {sorted(names - KNOWN)} in {e}"
            used |= names
    for v in doc["templating"]["list"]:
        if v["type"] == "query":
            q = re.sub(r",\s*\w+\s*\)\s*$", ")", v["query"]["query"])  # label_values(METRIC, LABEL)
            assert metric_names(q) and metric_names(q) <= KNOWN, v["name"]
    # the GPM series against their peaks, and the class over time
    assert {"DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
            "gputop_bottleneck", "gputop_peak_dram_bytes_per_second"} <= used
    timeline = [p for p in panels(doc) if p["type"] == "state-timeline"]
    assert timeline and "gputop_bottleneck" in timeline[0]["targets"][0]["expr"]
    assert "== 1" in timeline[0]["targets"][0]["expr"] and "{{class}}" in timeline[0]["targets"][0]["legendFormat"]


def test_the_check_catches_an_unknown_name():
    assert metric_names('sum by (gpu) (DCGM_FI_PROF_SM_ACTIVE{gpu=~"$gpu"}) * nvidia_smi_power') == {
        "DCGM_FI_PROF_SM_ACTIVE", "nvidia_smi_power"}
