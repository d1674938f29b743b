"""One of a thing is said in the singular (issue 35: "1 GPUs", "1 nodes"): ``gputop.format.count`` is the one
home of a count with its noun, and what people read says "1 GPU", "1 kernel per call", never "1 GPUs" nor
"GPU(s)": the cluster's text with one GPU of the stored real Prometheus page, the export banner of a real
exporter, and the text reports and results of every shipped recorded run."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest

from export_util import free_port, start_exporter, stop, wait_for_metrics
from gputop.format import count
from gputop.headless.cluster import render_text as cluster_text
from gputop.headless.workload import render_text
from gputop.lessons import lesson
from gputop.runner.recording import shipped
from test_text_reports import recorded

STORED = Path(__file__).parent / "data" / "cluster" / "page.json"
NOUNS = ("GPU", "node", "job", "kernel", "point", "stream", "segment", "core", "rank", "step", "window", "class",
         "phase", "run", "sample", "process")
# "1 GPUs", "1 nodes", ...: a one followed by a plural (not "0.1 GPUs" nor "11 GPUs"), and the hedge "GPU(s)"
ONE_PLURAL = re.compile(r"(?<![\d.=])1 (?:%s)(?:s|es)\b" % "|".join(NOUNS))  # (not "warmup=1 runs=3")
HEDGE = re.compile(r"\b(?:%s)\(e?s\)" % "|".join(NOUNS))


def bad_plurals(text: str) -> list[str]:
    return ONE_PLURAL.findall(text) + HEDGE.findall(text)


def test_count_says_one_in_the_singular():
    assert [count(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert count(1, "process", "processes") == "1 process" and count(3, "process", "processes") == "3 processes"


def test_the_clusters_text_with_one_gpu_of_the_stored_page():
    doc = json.loads(STORED.read_text())
    one = copy.deepcopy(doc)
    one["gpus"] = [g for g in doc["gpus"] if g["node"] == "dcgm-a"]
    one["filters"]["node"] = "dcgm-a"
    one["summary"].update(gpus=1, nodes=1, jobs=1)
    one["accounting"]["jobs"] = [j for j in doc["accounting"]["jobs"] if j["job"] == "7001"]
    text = cluster_text(one)
    assert "1 GPU on 1 node, 1 job (--node dcgm-a; 7 GPUs in all)" in text.splitlines()[0]
    assert bad_plurals(text) == []


@pytest.mark.slow
def test_the_export_banner_counts_its_gpu():
    port = free_port()
    proc = start_exporter(f"127.0.0.1:{port}", "--demo")
    try:
        wait_for_metrics(proc, port)
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert f"exporting 1 GPU (replay) at http://127.0.0.1:{port}/metrics" in err, err
    assert bad_plurals(err) == []


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.name)
def test_the_text_report_of_every_shipped_recording_says_one_in_the_singular(path):
    name = path.name.split("-")[0]
    doc = recorded(name)
    lesson(name).analyze(doc)  # its verdicts in today's words (the recording keeps those of the day it was made)
    text = render_text(doc, stream=io.StringIO())
    assert bad_plurals(text) == [], [ln for ln in text.splitlines() if bad_plurals(ln)]
