"""Results a workshop will misread (issue 35), on real run documents: the shipped H200 recordings and runs of this
machine's CPU (tests/data/runs/README.md).

- a bar's "% of best" compares the runs of one model (cudagraphs: each MLP's eager and graph runs apart);
- units for people, never a field's name (``step_ms``, ``busbw_gbps``, ``kernel_us``), in the TUI's bars and in the
  text report's tables and results;
- the advice follows the measurement (allreduce on the CPU: DDP's overlap measured slower than none);
- a copy that fits the last-level cache is not DRAM's speed (transfer's host memcpy on the CPU);
- a results dict of dicts is a table, not nested key/value lists (fusion's text report).
"""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest

from gputop.headless.workload import render_text
from gputop.lessons import lesson
from gputop.lessons.report_lines import label, result_lines
from gputop.runner.recording import shipped
from gputop.tui.results.view import bars_view, results_lines
from test_text_reports import recorded

RUNS = Path(__file__).parent / "data" / "runs"
RAW = re.compile(r"\b[a-z0-9]+_(?:ms|us|s|gbps|gb_per_s|pct|bytes|per_s|per_kernel)\b")


def run_doc(name: str) -> dict:
    doc = json.loads((RUNS / name).read_text())
    lesson(doc["workload"]).analyze(doc)  # (in place)
    return doc


DOCS = [p.name for p in shipped()] + ["cpu_allreduce.json", "cpu_transfer.json", "cpu_transfer_256mb.json"]


def any_doc(name: str) -> dict:
    """A shipped recording's document (by its file's name) or one of tests/data/runs, analysed as today."""
    if name.endswith(".json"):
        return run_doc(name)
    workload = name.split("-")[0]
    doc = recorded(workload)
    lesson(workload).analyze(doc)
    return doc


# -- % of best: one model's runs ------------------------------------------------------------------------------------
def test_cudagraphs_bars_compare_each_mlps_graph_run_with_its_own_eager_run():
    """(the larger MLP's graph run, 7.1x its eager run, read "21% of best": measured against the smaller MLP)"""
    doc = recorded("cudagraphs")
    lines = {re.match(r"(.*?)\s+[█▏▎▍▌▋▊▉]", ln.plain).group(1): ln.plain for ln in bars_view(doc, 120, 40)}
    mlp = {p["phase"]: p for p in doc["points"] if p.get("part") == "mlp"}
    for layers in (2, 16):
        eager, graph = mlp[f"mlp X={layers} eager"]["step_ms"], mlp[f"mlp X={layers} graph"]["step_ms"]
        assert "(100% of best" in lines[f"mlp X={layers} graph"], lines
        assert f"({graph / eager:.0%} of best" in lines[f"mlp X={layers} eager"], lines
    assert "21% of best" not in "".join(lines.values())


# -- units for people ------------------------------------------------------------------------------------------------
def test_labels_say_units_for_people():
    assert [label(k) for k in ("busbw_gbps", "step_ms", "kernel_us", "first_call_s", "samples_per_s",
                                 "speedup_vs_eager", "us_per_kernel", "size_bytes", "rms_pct", "n")] == \
        ["busbw (GB/s)", "step (ms)", "kernel (us)", "first call (s)", "samples/s", "speedup vs eager",
         "us per kernel", "size (bytes)", "rms (%)", "n"]


@pytest.mark.parametrize("name", DOCS)
def test_no_field_name_stands_for_a_unit(name):
    doc = any_doc(name)
    shown = "\n".join(ln.plain for ln in results_lines(doc, 120, 40))  # the TUI's results: bars or a lesson's view
    assert not RAW.search(shown), shown
    text = render_text(copy.deepcopy(doc), stream=io.StringIO())
    head = text.split("\npoints (", 1)[1].splitlines()[1] if "\npoints (" in text else ""
    assert "_" not in head, head  # the points table's header
    results = text.split("\nresults:\n", 1)[1].split("\ntelemetry:", 1)[0] if "\nresults:\n" in text else ""
    keys = [ln.split(":")[0] for ln in results.splitlines() if ":" in ln]
    assert not [k for k in keys if "_" in k], keys


# -- the advice follows the measurement ----------------------------------------------------------------------------
def test_allreduce_on_the_cpu_does_not_advise_an_overlap_that_measured_slower():
    doc = run_doc("cpu_allreduce.json")
    steps = {p["mode"]: p["step_ms"] for p in doc["points"] if p.get("phase") == "ddp step"}
    assert steps["overlap"] > steps["no overlap"]  # as measured on this machine: overlap did not help
    v = doc["verdict"]
    assert "keep DDP's bucketed overlap" not in v["advice"]
    assert f"{steps['overlap']:.2f} ms" in v["evidence_text"] and "slower" in v["evidence_text"]
    assert "overlap" in v["advice"] and "communicate less" in v["advice"]


def test_an_overlap_that_helped_is_advised_to_be_kept():
    doc = json.loads((RUNS / "cpu_allreduce.json").read_text())
    steps = {p["mode"]: p for p in doc["points"] if p.get("phase") == "ddp step"}
    # the same run, had the overlap hidden half the exposed time (as NCCL's does on GPUs)
    steps["overlap"]["step_ms"] = steps["no overlap"]["step_ms"] - steps["no overlap"]["exposed_comm_ms"] / 2
    v = lesson("allreduce").analyze(doc)["verdict"]
    assert "keep DDP's bucketed overlap" in v["advice"] and "slower" not in v["evidence_text"]


# -- the last-level cache is not DRAM ---------------------------------------------------------------------------------
def test_a_host_memcpy_inside_the_last_level_cache_is_not_called_drams_speed():
    doc = run_doc("cpu_transfer.json")
    llc = doc["results"]["llc_bytes"]
    assert all(2 * p["bytes"] <= llc for p in doc["points"] if p.get("kind") == "host memcpy")
    v = doc["verdict"]
    assert (v["class"], v["subclass"]) == ("memory-bound", "cache")
    assert "last-level cache" in v["evidence_text"] and "not DRAM" in v["evidence_text"]


def test_a_host_memcpy_past_the_last_level_cache_is_judged_on_the_copies_past_it():
    doc = run_doc("cpu_transfer_256mb.json")
    past = [p for p in doc["points"] if p.get("kind") == "host memcpy" and 2 * p["bytes"] > doc["results"]["llc_bytes"]]
    assert [p["bytes"] for p in past] == [1 << 28]
    v = doc["verdict"]
    assert (v["class"], v["subclass"]) == ("memory-bound", "host memcpy")
    assert f"{past[0]['gb_per_s']:.1f} GB/s" in v["evidence_text"] and "past the" in v["evidence_text"]


# -- tables, not nested lists ----------------------------------------------------------------------------------------
def test_fusions_results_are_one_table_before_its_figure():
    doc = any_doc("fusion-H200.jsonl.gz")
    lines = result_lines(doc["results"])
    header = next(ln for ln in lines if "speedup vs eager" in ln)
    assert "kernels per call" in header and "first call (s)" in header
    row = next(ln for ln in lines if ln.split() and ln.split()[:2] == ["gelu", "compile"])
    assert row.split()[2:5] == ["2.671", "1", "0.0609"], row
    assert not any(ln.strip() in ("speedup vs eager:", "kernels per call:", "first call (s):") for ln in lines)
