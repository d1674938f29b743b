"""How right the cluster's "what a fix would win back" is (``analysis/cluster_winback.py``): its estimate from the
telemetry of a slow run against the time the fix measurably recovered, on recorded runs. The table in
docs/diagnosis.md ("What a fix would win back") is this module's output, and tests/test_winback_validation.py holds
the two equal.

    python -m gputop.evaluate.winback            # the markdown table

The cases, each a slow run whose recording gputop reads and a fix whose time the workload itself measured (its own
timer, the construction, or torch.profiler: never gputop):

* the teaching workloads' full runs on an H200 (2026-11-21: tests/data/traces/wl_NAME_h200.jsonl.gz, their
  telemetry and phase marks; docs/results/h200-2026-11-21/workloads_summary.md, the times each measured), and the
  data-loader lesson's quick run (gputop/data/runs/dataloader-H200.jsonl.gz: telemetry and the workload's events in
  one file): the starved loader against the lesson's fix and against its own compute time per step; strict FP32
  against mixed precision (AMP: bf16, fp16; TF32 too, which the estimate does not price); eager launches against
  CUDA graphs;
* the multi-GPU corpus (tests/data/traces/corpus_multi_h100x{2,4}): a straggler's waiting peers against the
  construction (their own compute time per step), an all-reduce loop's GPUs against torch.profiler's NCCL share of
  the step.

The slow run's telemetry is that of its measured loop (the last seconds of its phase, as long as the workload
timed: its ``seconds``, or steps x step time; a corpus case's truth file says its loop). Its class is the run's
own verdict where the lesson judged the phase (the workload's summary), else the classifier's over the loop (each
GPU of a multi-GPU case with its job's GPUs: ``analysis/comms.group_comms``). The estimate is the class's share
(``cluster_winback.window_share``); the measured recovered share is ``1 - fixed time / slow time``. The error is
relative: ``(estimate - measured) / measured``; the target is within 25%.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from gputop.analysis.classify import classify
from gputop.analysis.cluster_winback import window_share
from gputop.analysis.comms import group_comms
from gputop.analysis.peaks import compute_peaks
from gputop.evaluate.multi_truth import clean_shares, truths

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "data" / "traces"
SUMMARY = ROOT / "docs" / "results" / "h200-2026-11-21" / "workloads_summary.md"
QUICK_RUNS = ROOT / "gputop" / "data" / "runs"
TARGET = 0.25  # the estimate within 25% of the measured recovered share


@dataclass
class Row:
    case: str
    recording: str
    cls: str  # the slow run's class (and subclass)
    estimate: float  # the recovered share the rule gives
    measured: float  # 1 - fixed / slow, as the workload (or truth) measured them
    truth: str  # what the measured share comes from
    priced: bool = True  # False: a fix the estimate does not price (shown, not held to the target)

    @property
    def error(self) -> float:
        return (self.estimate - self.measured) / self.measured

    @property
    def within(self) -> bool:
        return abs(self.error) <= TARGET


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def summary_tables(path: Path = SUMMARY) -> dict[str, list[dict]]:
    """The workloads' summary tables: {section: [{column: cell}, ...]} (every table of a section, one after the
    other)."""
    out: dict[str, list[dict]] = {}
    section, head = None, None
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            section, head = line[3:].strip(), None
        elif line.startswith("|") and section:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if head is None:
                head = cells
            elif not set("".join(cells)) <= set("-: "):
                out.setdefault(section, []).append(dict(zip(head, cells)))
        else:
            head = None
    return out


def _cell(table: list[dict], first: str, column: str) -> float:
    row = next(r for r in table if next(iter(r.values())) == first)
    return float(row[column])


def phase_window(path: Path, phase: str, seconds: float, gpu: int = 0) -> tuple[list[dict], dict]:
    """The samples of GPU ``gpu`` over the last ``seconds`` of a phase of a trace (its marks: a phase ends where
    the next begins), and the GPU's static facts."""
    rows = _rows(path)
    marks = [r for r in rows if r.get("type") == "mark"]
    names = [m["label"].split(" expect=")[0] for m in marks]
    i = names.index(phase)
    ticks = [r for r in rows if r.get("type") == "tick"]
    end = marks[i + 1]["t"] if i + 1 < len(marks) else ticks[-1]["t"]
    start = max(marks[i]["t"], end - seconds)
    return [t["gpus"][gpu] for t in ticks if start <= t["t"] <= end], rows[0]["devices"][gpu]


def _estimate(cls: str, sub: str | None, samples: list[dict], static: dict) -> float:
    got = window_share(cls, samples, static, sub)
    return 0.0 if got is None else got


def single_gpu() -> list[Row]:
    """The teaching workloads' full runs on an H200 (see the module's text)."""
    t = summary_tables()
    out = []
    wl = lambda name: TRACES / f"wl_{name}_h200.jsonl.gz"  # noqa: E731
    loader = t["dataloader"]
    slow = _cell(loader, "workers=0", "step ms")
    samples, static = phase_window(wl("dataloader"), "workers=0", 6.0)  # its seconds per phase: 6
    est = _estimate("input-starved", None, samples, static)
    out.append(Row("data loader: workers=0 -> +persistent (the lesson's fix)", "wl_dataloader_h200", "input-starved",
                   est, 1 - _cell(loader, "+persistent", "step ms") / slow, "step time, the workload's timer"))
    out.append(Row("data loader: workers=0 -> its compute alone", "wl_dataloader_h200", "input-starved", est,
                   1 - _cell(loader, "workers=0", "compute ms") / slow, "compute time per step, CUDA events"))
    amp = t["amp"]
    slow = _cell(amp, "fp32-strict", "step ms")
    samples, static = phase_window(wl("amp"), "fp32-strict", 60 * slow / 1e3)  # its 60 timed steps
    est = _estimate("compute-bound", "fp32", samples, static)
    for mode, priced in (("bf16", True), ("fp16", True), ("tf32", False)):
        name = f"AMP: strict FP32 -> {mode}" + ("" if priced else " (not AMP: the estimate prices bf16)")
        out.append(Row(name, "wl_amp_h200", "compute-bound (fp32)", est, 1 - _cell(amp, mode, "step ms") / slow,
                       "step time, the workload's timer", priced))
    graphs = t["cudagraphs"]
    for slow_mode, fixed_mode, column in (("naive", "graph", "us per kernel"),
                                          ("mlp X=2 eager", "mlp X=2 graph", "step ms"),
                                          ("mlp X=8 eager", "mlp X=8 graph", "step ms"),
                                          ("mlp X=32 eager", "mlp X=32 graph", "step ms")):
        samples, static = phase_window(wl("cudagraphs"), slow_mode, 1.0)  # its 1 s a mode
        out.append(Row(f"CUDA graphs: {slow_mode} -> {fixed_mode}", "wl_cudagraphs_h200", "latency-bound",
                       _estimate("latency-bound", None, samples, static),
                       1 - _cell(graphs, fixed_mode, column) / _cell(graphs, slow_mode, column),
                       f"{column.replace('us', 'time')}, the workload's timer"))
    return out


def quick_loader() -> list[Row]:
    """The data-loader lesson's quick run shipped with gputop: telemetry and the workload's own points in one file."""
    rows = _rows(QUICK_RUNS / "dataloader-H200.jsonl.gz")
    ticks = [r for r in rows if r.get("type") == "tick"]
    points = {e["event"]["data"]["phase"]: (e["t"], e["event"]["data"]) for e in rows
              if e.get("type") == "event" and e["event"].get("event") == "point"}
    t1, slow = points["workers=0"]
    samples = [t["gpus"][0] for t in ticks if t1 - slow["wall_s"] <= t["t"] <= t1]
    est = _estimate("input-starved", None, samples, rows[0]["devices"][0])
    return [Row("data loader (quick run): workers=0 -> +persistent", "dataloader-H200 (gputop/data/runs)",
                "input-starved", est, 1 - points["+persistent"][1]["step_ms"] / slow["step_ms"],
                "step time, the workload's timer"),
            Row("data loader (quick run): workers=0 -> its compute alone", "dataloader-H200 (gputop/data/runs)",
                "input-starved", est, 1 - slow["compute_ms"] / slow["step_ms"], "compute time per step, CUDA events")]


def _judged_loop(directory: Path, case: str) -> tuple[list, list[list[dict]], list[dict], dict]:
    """Each GPU's verdict over a corpus case's loop (the job's GPUs together), their samples, statics, truths."""
    rows = _rows(directory / f"{case}.jsonl.gz")
    truth = truths(directory, case)
    lo, hi = truth[0]["loop"]
    ticks = [r for r in rows if r.get("type") == "tick" and lo <= r["t"] <= hi]
    statics = rows[0]["devices"]
    windows = [[t["gpus"][i] for t in ticks] for i in range(len(statics))]
    verdicts = group_comms([classify(ticks, s, compute_peaks(s), gpu=i) for i, s in enumerate(statics)])
    return verdicts, windows, statics, truth


def multi_gpu() -> list[Row]:
    out = []
    for size in (2, 4):
        directory = TRACES / f"corpus_multi_h100x{size}"
        verdicts, windows, statics, truth = _judged_loop(directory, "straggler")
        slow = truth[0]["slow_rank"]
        for rank, (v, w, s) in enumerate(zip(verdicts, windows, statics)):
            if rank == slow or rank not in truth or truth[rank].get("compute_ms_median") is None:
                continue
            waited = 1 - truth[rank]["compute_ms_median"] / (1e3 * truth[rank]["step_s"])
            out.append(Row(f"straggler ({size} H100s): rank {rank} waits for rank {slow}",
                           f"corpus_multi_h100x{size}/straggler", _words(v), _estimate(v.cls, v.subclass, w, s),
                           waited, "its compute time per step, the construction"))
        for case in ("comms_mlp", "comms_mlp_pcie"):
            if not (directory / f"{case}.jsonl.gz").exists():
                continue
            verdicts, windows, statics, truth = _judged_loop(directory, case)
            nccl, _ = clean_shares(truth[0])
            kernels = min(1.0, truth[0]["kernel_us_per_step"] / (1e6 * truth[0]["step_s"]))
            v, w, s = verdicts[0], windows[0], statics[0]
            link = "PCIe (no peer-to-peer)" if case.endswith("pcie") else "NVLink"
            out.append(Row(f"all-reduce loop over {link} ({size} H100s): rank 0", f"corpus_multi_h100x{size}/{case}",
                           _words(v), _estimate(v.cls, v.subclass, w, s), nccl * kernels,
                           "NCCL's share of the step, torch.profiler"))
    return out


def _words(v) -> str:
    return v.cls + (f" ({v.subclass})" if v.subclass else "")


def validation() -> list[Row]:
    return single_gpu() + quick_loader() + multi_gpu()


def markdown(rows: list[Row]) -> str:
    """The table (docs/diagnosis.md)."""
    lines = ["| case | recording | class | estimate | measured | error | speedup est. / measured | measured by |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speed = f"{1 / (1 - r.estimate):.2f}x / {1 / (1 - r.measured):.2f}x" if r.estimate < 1 and r.measured < 1 \
            else "n/a"
        mark = "" if r.priced else " (not priced)"
        lines.append(f"| {r.case} | {r.recording} | {r.cls} | {100 * r.estimate:.1f}% | {100 * r.measured:.1f}% | "
                     f"{100 * r.error:+.0f}%{mark} | {speed} | {r.truth} |")
    priced = [r for r in rows if r.priced]
    lines.append("")
    lines.append(f"{sum(r.within for r in priced)} of {len(priced)} priced fixes within ±{100 * TARGET:.0f}% "
                 f"(largest error {max(abs(r.error) for r in priced) * 100:.0f}%).")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    sys.stdout.write(markdown(validation()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
