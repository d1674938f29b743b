"""deploy/, checked by the tools that own each format (issue 38): the systemd unit by ``systemd-analyze verify`` (where
systemd's tools are present; skipped cleanly elsewhere), the Kubernetes manifests against Kubernetes' OpenAPI schemas
by kubernetes-validate (a maintained, pip-installable validator that ships the schemas of each Kubernetes release;
strict: an unknown field fails) on the oldest and newest releases it ships, the ServiceMonitor (a custom resource:
not in Kubernetes' schemas) against the fields Prometheus Operator documents, with its metadata and selector
against Kubernetes' own definitions, the scrape configs by ``promtool check config``, and every command line they
give gputop by gputop's own parser."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "gputop-exporter.service"
MANIFESTS = DEPLOY / "kubernetes" / "gputop-exporter.yaml"
SERVICE_MONITOR = DEPLOY / "kubernetes" / "servicemonitor.yaml"
SCRAPE = DEPLOY / "prometheus" / "scrape.yml"
SCRAPE_K8S = DEPLOY / "prometheus" / "scrape-kubernetes.yml"


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def exec_start() -> list[str]:
    line = next(ln for ln in UNIT.read_text().splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line.split("=", 1)[1])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd here (systemd-analyze not on PATH)")
def test_the_systemd_unit_verifies(tmp_path):
    """As shipped, but its ExecStart's gputop at this machine's (a script that runs this checkout's): verify checks
    that the command exists and is executable."""
    program = tmp_path / "bin" / "gputop"
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\nexec {sys.executable} -m gputop \"$@\"\n")
    program.chmod(0o755)
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(f"ExecStart={exec_start()[0]} ", f"ExecStart={program} "))
    assert unit.read_text() != UNIT.read_text()
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [ln for ln in (r.stdout + r.stderr).splitlines() if UNIT.name in ln or "gputop" in ln]
    assert r.returncode == 0 and problems == [], r.stdout + r.stderr


def test_the_command_lines_given_to_gputop_parse():
    from gputop.cli import parse

    daemonset = next(d for d in docs(MANIFESTS) if d["kind"] == "DaemonSet")
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    for argv in (exec_start()[1:], container["args"]):
        args, _ = parse(argv)
        assert args.export_address == ("0.0.0.0", 9401), argv  # beside dcgm-exporter's 9400
    assert container["ports"][0]["containerPort"] == 9401


@pytest.mark.parametrize("version", ["oldest", "newest"])
def test_the_kubernetes_manifests_follow_kubernetes_openapi_schemas_strictly(version):
    kv = pytest.importorskip("kubernetes_validate.utils", reason="kubernetes-validate not installed (pip install "
                                                                 "-e .[test])")
    versions = kv.all_versions()
    want = versions[0] if version == "oldest" else versions[-1]
    kinds = []
    for d in docs(MANIFESTS):
        kv.validate(d, want, strict=True)  # raises ValidationError on any schema violation
        kinds.append(d["kind"])
    assert kinds == ["Namespace", "ServiceAccount", "DaemonSet", "Service"]
    bad = next(d for d in docs(MANIFESTS) if d["kind"] == "DaemonSet")
    bad["spec"]["template"]["spec"]["containers"][0]["portz"] = []  # the validator is strict: a misspelt field fails
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, want, strict=True)


@pytest.mark.slow
def test_the_service_monitor_follows_prometheus_operators_fields_and_kubernetes_metadata():
    kv = pytest.importorskip("kubernetes_validate.utils", reason="kubernetes-validate not installed")
    (monitor,) = docs(SERVICE_MONITOR)
    jsonschema.validate(monitor, json.loads((ROOT / "tests/data/deploy/servicemonitor-v1.schema.json").read_text()))
    version = kv.all_versions()[-1]
    defs = kv.schema_contents(f"kubernetes-json-schema/v{kv.major_minor(version)}.0-local-strict/_definitions.json",
                              version)
    for value, name in ((monitor["metadata"], "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
                        (monitor["spec"]["selector"], "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")):
        jsonschema.validate(value, {**defs, "$ref": f"#/$defs/{name}"})
    # it selects the Service of the manifests, on its port's name
    service = next(d for d in docs(MANIFESTS) if d["kind"] == "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (apt-get install prometheus)")
def test_the_scrape_configs_pass_promtool():
    r = subprocess.run(["promtool", "check", "config", str(SCRAPE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {c["job_name"] for c in yaml.safe_load(SCRAPE.read_text())["scrape_configs"]} == {"gputop", "dcgm-exporter"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (apt-get install prometheus)")
def test_the_kubernetes_scrape_configs_pass_promtool():
    r = subprocess.run(["promtool", "check", "config", str(SCRAPE_K8S)], capture_output=True, text=True, timeout=60)
    if "field kubernetes_sd_configs not found" in r.stdout + r.stderr:
        pytest.skip("this promtool is built without Kubernetes service discovery (Debian's): "
                    f"{SCRAPE_K8S.relative_to(ROOT)} not checked")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_readme_shows_what_deploy_holds():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### A fleet: deploy beside dcgm-exporter"):]
    for path in (UNIT, MANIFESTS, SERVICE_MONITOR, SCRAPE, SCRAPE_K8S, DEPLOY / "container" / "Containerfile"):
        assert str(path.relative_to(ROOT)) in section, path
    assert re.search(r"9401", section) and "hostPID" in section and "NODE_NAME" in section
    assert os.path.exists(DEPLOY / "container" / "Containerfile")
