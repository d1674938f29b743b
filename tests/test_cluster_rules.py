"""docs/prometheus/gputop-rules.yml is valid (``promtool check rules``) and does what its comments say
(``promtool test rules`` on docs/prometheus/gputop-rules.test.yml: every alert fires after its ``for:`` and not
before, on gputop's nodes and on dcgm-exporter's; the GPU-hours come out right). A live Prometheus sees the alerts
fire in test_cluster_prometheus.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[1] / "docs" / "prometheus"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="no promtool on PATH (Debian's `prometheus` package has it)")


def test_promtool_checks_the_rules():
    r = subprocess.run([PROMTOOL, "check", "rules", str(RULES / "gputop-rules.yml")], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_promtool_unit_tests_every_alert_and_the_gpu_hours():
    alerts = set(re.findall(r"^\s*- alert: (\w+)$", (RULES / "gputop-rules.yml").read_text(), re.M))
    assert alerts == {"GpuIdleHeldByJob", "GpuInputStarved", "GpuMemoryNearCapacity", "GpuCollectiveStalled",
                      "GpuJobHeldUpByRank"}
    tested = (RULES / "gputop-rules.test.yml").read_text()
    fired = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", tested))
    assert fired == alerts  # every alert has a case where it fires
    r = subprocess.run([PROMTOOL, "test", "rules", "gputop-rules.test.yml"], cwd=RULES, capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_the_accounting_rules_record_what_the_reader_would_otherwise_join_itself():
    """The group the cluster reader's accounting sums (fleet/accounting.PARTS) holds each part's expression
    verbatim, under the name the reader asks for: a rule that drifted from the raw query would count another thing."""
    import yaml

    from gputop.fleet.accounting import PARTS, RULES_FILE, RULES_GROUP, rule_expr

    groups = {g["name"]: g for g in yaml.safe_load((RULES.parents[1] / RULES_FILE).read_text())["groups"]}
    rules = {r["record"]: r["expr"].strip() for r in groups[RULES_GROUP]["rules"]}
    assert rules == {part[4]: rule_expr(part) for part in PARTS}
