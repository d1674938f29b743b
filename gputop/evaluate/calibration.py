"""Calibration of gputop's confidence, and gputop vs KempnerPulse's and nvsonar's rules, on the labelled traces.

    python -m gputop.evaluate.calibration                 # print the tables (markdown)
    python -m gputop.evaluate.calibration --write         # also put them into docs/diagnosis.md (between markers)
    python -m gputop.evaluate.calibration --traces DIR    # other labelled traces (bench/gpu/corpus_gpu.sh's, say)

The labelled cases are the recorded traces in tests/data/traces (and any --traces DIR): a trace named
``<case>.<class>.jsonl.gz`` (or ``expect=<class>`` in its header note) is labelled over its steady part (from
one second after its command showed up on the GPU to one second before it exited); a mark labelled
``expect=<class>`` labels its phase (one second trimmed at each end); the demo trace's phases are labelled
by what scripts/record_demo.py ran. A window labelled with a class of work (not idle, not memory capacity)
spans its first to its last half second of GPU work (the CPU set-up before it is not the labelled work); a trace
labelled by an out-of-memory error at its end is a run-level label only. Three kinds of verdict are scored
against the labels:

  window  gputop's classifier over each labelled window as a whole
  run     the run's overall verdict (gputop --run's), for traces labelled as a whole
  live    the live verdict (the TUI panel's code path, gputop.analysis.live) once a second inside each
          labelled window, from 1.5 s after its start (the time it is allowed to follow a change)

The same windows are also judged by clean-room re-implementations of two other tools' published rules:
KempnerPulse's 12 ordered rules (KempnerInstitute/kempnerpulse, docs/classification.md) and nvsonar's
(btursunbayev/nvsonar, src/nvsonar/analysis/bottleneck.py), with their classes mapped to gputop's.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

from gputop.analysis import thresholds as T
from gputop.analysis.classify import classify
from gputop.analysis.evidence import is_busy, measure
from gputop.analysis.live import LiveVerdict
from gputop.analysis.peaks import compute_peaks
from gputop.evaluate import multi_truth
from gputop.evaluate.labelled import diagnose_trace, trace_expectations
from gputop.telemetry.trace import demo_trace_path, read_trace

ROOT = Path(__file__).resolve().parents[2]  # the checkout: its tests/data/traces and docs/diagnosis.md

DEMO_PHASES = {"idle": "idle", "matmul bf16": "compute-bound", "device copy": "memory-bound",
               "tiny kernels": "latency-bound", "pageable host-to-device": "pcie-bound"}
EDGE_S = 1.0
FOLLOW_S = 1.5
MIN_TICKS = 10
BINS = [(0.0, 0.5), (0.5, 0.8), (0.8, 0.9), (0.9, 1.01)]
BEGIN, END = "<!-- calibration:begin (python -m gputop.evaluate.calibration --write) -->", "<!-- calibration:end -->"


def labelled_windows(path: str):
    """(name, expected class, ticks of the window, static, peaks, pid) of each labelled window of a trace."""
    header, rows = read_trace(path)
    ticks = [r for r in rows if r["type"] == "tick"]
    if not ticks:
        return
    static = header["devices"][0]
    peaks = compute_peaks(static)
    pids = {k for t in ticks for k in ((t.get("host") or {}).get("procs") or {})}
    pid = next(iter(pids)) if len(pids) == 1 else None
    marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
    want = trace_expectations(path, header, rows)
    spans = []
    if os.path.basename(path).startswith("demo."):
        for i, (t, label) in enumerate(marks):
            cls = next((c for k, c in DEMO_PHASES.items() if label.startswith(k)), None)
            end = marks[i + 1][0] if i + 1 < len(marks) else ticks[-1]["t"]
            if cls:
                spans.append((label, cls, t, end))
    for label, cls, t0, t1 in want["phases"]:
        spans.append((label, cls, t0, t1))
    if want["overall"] and not want["phases"]:
        on = next((t for t, label in marks if label.startswith("on GPU")), ticks[0]["t"])
        out = next((t for t, label in marks if label.startswith(("exited", "oom"))), ticks[-1]["t"])
        spans.append(("steady part", want["overall"], on, out))
    name = os.path.basename(path).split(".")[0]
    oom = any(label.startswith("oom") for _, label in marks)
    for label, cls, t0, t1 in spans:
        if oom and label == "steady part":
            continue  # labelled by an event at its end (the OOM), not by its steady part: a run-level label
        if cls not in ("idle", "memory-capacity"):  # the labelled work begins with its first kernel
            t0, t1 = first_work(ticks, t0, t1), last_work(ticks, t0, t1)
        win = [t for t in ticks if t0 + EDGE_S <= t["t"] <= t1 - EDGE_S]
        if len(win) >= MIN_TICKS:
            yield f"{name}: {label.split(' expect=')[0][:28]}", cls, win, static, peaks, pid, ticks


def first_work(ticks, t0: float, t1: float, run: int = 5) -> float:
    """The start of the first run of ``run`` samples in a row with GPU work in [t0, t1) (else t0)."""
    span = [t for t in ticks if t0 <= t["t"] < t1]
    for i in range(len(span) - run + 1):
        if all(is_busy(t["gpus"][0]) for t in span[i:i + run]):
            return span[i]["t"]
    return t0


def last_work(ticks, t0: float, t1: float, run: int = 5) -> float:
    """The end of the last run of ``run`` samples in a row with GPU work in [t0, t1) (else t1)."""
    span = [t for t in ticks if t0 <= t["t"] < t1]
    for i in range(len(span) - run, -1, -1):
        if all(is_busy(t["gpus"][0]) for t in span[i:i + run]):
            return span[i + run - 1]["t"] + 0.1
    return t1


def live_frames(win, ticks, static, peaks, pid):
    """(class, confidence) of the live verdict once a second inside ``win`` (fed from the trace's start)."""
    lv = LiveVerdict()
    start, end = win[0]["t"] - EDGE_S, win[-1]["t"]
    out, last = [], None
    lo = 0
    for i, t in enumerate(ticks):
        if t["t"] > end:
            break
        while ticks[lo]["t"] < t["t"] - T.LIVE_MAX_S:
            lo += 1
        v = lv.update(ticks[lo:i + 1], static, peaks, 0, pid)
        if t["t"] >= start + FOLLOW_S and (last is None or t["t"] - last >= 1.0) and v is not None:
            out.append((v.cls, v.confidence))
            last = t["t"]
    return out


# -- other tools' published rules, on the window's means ------------------------------------------------------
def kempnerpulse(ev: dict) -> tuple[str, str]:
    """KempnerPulse's 12 ordered rules (docs/classification.md), on fractions 0..100; -> (their name, ours)."""
    sm, tensor, dram = ev.get("sm_active_pct") or 0, ev.get("tensor_pct") or 0, ev.get("dram_bw_pct") or 0
    gr = ev.get("util_gpu_pct") or 0  # GR_ENGINE_ACTIVE; falls back to GPU_UTIL in KempnerPulse too
    fp64 = max(ev.get("fp64_pct") or 0, ev.get("dfma_pct") or 0)
    pcie = max(ev.get("pcie_rx_bps") or 0, ev.get("pcie_tx_bps") or 0)
    memcpy = 0.0  # DCGM's copy-engine activity: no NVML/GPM equivalent in the traces
    real = max(0.0, min(100.0, 0.35 * sm + 0.35 * tensor + 0.20 * dram + 0.10 * gr))
    rules = [
        (real < 5 and gr < 5 and dram < 5 and pcie < 1e9, "idle", "idle"),
        (tensor >= 50 and sm >= 60, "tensor-heavy compute", "compute-bound"),
        (tensor >= 15 and sm >= 40, "tensor compute", "compute-bound"),
        (fp64 >= 20 and sm >= 50, "FP64 / HPC compute", "compute-bound"),
        ((memcpy >= 40 or pcie >= 1e9) and sm < 30, "I/O or data-loading", "pcie-bound"),
        (dram >= 50 and sm < 50, "memory-bound", "memory-bound"),
        (sm >= 80, "compute-heavy", "compute-bound"),
        (sm >= 50, "compute-active", "compute-bound"),
        (dram >= 40, "memory-active", "memory-bound"),
        (gr >= 40 and sm < 25, "busy, low SM use", "latency-bound"),
        (gr < 15 and sm < 15 and dram < 15, "low utilization", "-"),
    ]
    for hit, theirs, ours in rules:
        if hit:
            return theirs, ours
    return "mixed / moderate", "-"


def nvsonar(ev: dict) -> tuple[str, str]:
    """nvsonar's ordered rules (src/nvsonar/analysis/bottleneck.py) on NVML's numbers; -> (theirs, ours)."""
    gu, mu = ev.get("util_gpu_pct") or 0, ev.get("util_mem_pct") or 0
    mem = 100 * (ev.get("mem_used_fraction") or 0)
    power = 100 * (ev.get("power_fraction") or 0)
    cap = (ev.get("power_cap_sample_fraction") or 0) >= 0.5
    thermal = (ev.get("thermal_sample_fraction") or 0) >= 0.5
    if gu < 5 and mu < 5:
        return "idle", "idle"
    if thermal:
        return "thermal_throttled", "throttled"
    if cap and power > 90 or power > 95:
        return "power_limited", "throttled"
    if mem > 95:
        return "memory_capacity_bound", "memory-capacity"
    if gu > 85 and mu < 50:
        return "compute_bound", "compute-bound"
    if mu > 80 and gu < 85:
        return "memory_bandwidth_bound", "memory-bound"
    if gu < 40 and mem > 50:
        return "data_starved", "input-starved"
    return "balanced", "-"


def collect(paths: list[str], multi_dirs: list[str] = ()) -> dict:
    windows, runs, live = [], [], []
    for path in paths:
        for name, want, win, static, peaks, pid, ticks in labelled_windows(path):
            v = classify(win, static, peaks, watched_pid=pid)
            ev = measure([t["gpus"][0] for t in win], static, peaks, [t.get("host") or {} for t in win], pid)
            windows.append({"name": name, "want": want, "got": v.cls, "conf": v.confidence, "gpu": static.get("name"),
                            "kp": kempnerpulse(ev), "nvs": nvsonar(ev)})
            live += [{"want": want, "got": c, "conf": conf, "name": name}
                     for c, conf in live_frames(win, ticks, static, peaks, pid)]
        want = trace_expectations(path)
        if want["overall"]:
            a = diagnose_trace(path)
            runs.append({"name": os.path.basename(path).split(".")[0], "want": want["overall"],
                         "got": a["verdict"]["class"], "conf": a["verdict"]["confidence"]})
    multi = []
    for directory in multi_dirs:  # each GPU of a multi-GPU job, judged against its case's truth (multi_truth.py)
        for g in multi_truth.confusion(directory)[1]:
            multi.append({"name": g["name"], "want": "right", "got": "right" if g["right"] else "wrong", "conf": g["conf"]})
    return {"window": windows, "run": runs, "live": live, "multi": multi}


MULTI_DIRS = sorted(glob.glob(str(ROOT / "tests" / "data" / "traces" / "corpus_multi_*"))  # bench/gpu/corpus_multi_gpu.sh
                    + glob.glob(str(ROOT / "tests" / "data" / "traces" / "heldout_multi_*")))  # its held-out cases


def calibration_table(cases: dict) -> list[str]:
    lines = ["| verdicts | confidence | n | right | fraction right |", "|---|---|---|---|---|"]
    for kind in ("window", "run", "live", "multi"):
        for lo, hi in BINS:
            sel = [c for c in cases[kind] if c["conf"] is not None and lo <= c["conf"] < hi]
            if not sel:
                lines.append(f"| {kind} | {lo:.1f}-{min(hi, 1.0):.1f} | 0 | - | - |")
                continue
            right = sum(c["got"] == c["want"] for c in sel)
            lines.append(f"| {kind} | {lo:.1f}-{min(hi, 1.0):.1f} | {len(sel)} | {right} | {right / len(sel):.0%} |")
    hi_conf = [c for k in cases for c in cases[k] if c["conf"] is not None and c["conf"] >= 0.8]
    right = sum(c["got"] == c["want"] for c in hi_conf)
    lines.append(f"| all | >= 0.8 | {len(hi_conf)} | {right} | "
                 f"{(right / len(hi_conf)) if hi_conf else 0:.1%} |")
    return lines


def comparison_table(cases: dict) -> list[str]:
    lines = ["| labelled window | label | gputop | KempnerPulse (-> ours) | nvsonar (-> ours) |",
             "|---|---|---|---|---|"]
    agree = {"gputop": 0, "kp": 0, "nvs": 0}
    for c in cases["window"]:
        agree["gputop"] += c["got"] == c["want"]
        agree["kp"] += c["kp"][1] == c["want"]
        agree["nvs"] += c["nvs"][1] == c["want"]
        lines.append(f"| {c['name']} | {c['want']} | {c['got']} {c['conf']:.2f} | {c['kp'][0]} ({c['kp'][1]}) | "
                     f"{c['nvs'][0]} ({c['nvs'][1]}) |")
    n = len(cases["window"]) or 1
    lines.append(f"| **right** | | **{agree['gputop']}/{n}** | **{agree['kp']}/{n}** | **{agree['nvs']}/{n}** |")
    return lines


CORPUS_GPUS = {"corpus_h100_": "NVIDIA H100 80GB HBM3", "corpus_h200_": "NVIDIA H200"}  # bench/gpu/corpus_gpu.sh traces


def corpus_confusion(cases: dict) -> list[str]:
    """Per GPU, the third-party corpus's labelled windows (traces named corpus_h100_*, corpus_h200_*): label vs gputop."""
    lines = []
    for prefix, gpu in CORPUS_GPUS.items():
        sel = [c for c in cases["window"] if c["name"].startswith(prefix)]
        lines += [f"**{gpu}** (`tests/data/traces/{prefix}*`): "
                  + (f"{sum(c['got'] == c['want'] for c in sel)} of {len(sel)} right" if sel else
                     "not run yet (`bash bench/gpu/corpus_gpu.sh` on that GPU)"), ""]
        if not sel:
            continue
        labels = sorted({c["want"] for c in sel} | {c["got"] for c in sel})
        lines += ["| label \\ gputop | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for want in sorted({c["want"] for c in sel}):
            row = [sum(1 for c in sel if c["want"] == want and c["got"] == g) for g in labels]
            lines.append(f"| **{want}** | " + " | ".join(str(n) if n else "." for n in row) + " |")
        lines.append("")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", action="append", default=[], help="another folder of labelled traces")
    ap.add_argument("--write", action="store_true", help="put the tables into docs/diagnosis.md")
    args = ap.parse_args(argv)
    paths = [demo_trace_path()] + sorted(glob.glob(str(ROOT / "tests" / "data" / "traces" / "*.jsonl*")))
    for d in args.traces:
        paths += sorted(glob.glob(os.path.join(d, "*.jsonl*")))
    cases = collect(paths, MULTI_DIRS)
    n_multi = sum(len(multi_truth.cases(d)) for d in MULTI_DIRS)
    out = ["### Calibration", "",
           f"From {len(paths)} recorded single-GPU traces and {n_multi} multi-GPU ones: {len(cases['window'])} "
           f"labelled windows, {len(cases['run'])} labelled runs, {len(cases['live'])} live verdicts (one a second), "
           f"{len(cases['multi'])} GPUs of multi-GPU jobs (each GPU's run verdict against its case's truth: "
           "`multi`). Generated by `python -m gputop.evaluate.calibration --write`.", ""]
    out += calibration_table(cases)
    for d in MULTI_DIRS:
        out += ["", f"### The multi-GPU corpus on `{os.path.basename(d)}` (bench/gpu/corpus_multi_gpu.sh: truth from "
                "torch.profiler or construction, rules in gputop/evaluate/multi_truth.py)", ""]
        out += multi_truth.before_after(d)
        out += ["", "Each GPU:", ""] + multi_truth.confusion(d)[0]
    out += ["", "### The third-party corpus per GPU (bench/gpu/corpus_gpu.sh: label from torch.profiler or construction)",
            ""]
    out += corpus_confusion(cases)
    out += ["### gputop, KempnerPulse and nvsonar on the same windows", ""]
    out += comparison_table(cases)
    text = "\n".join(out)
    print(text)
    if args.write:
        doc = ROOT / "docs" / "diagnosis.md"
        s = doc.read_text()
        if BEGIN in s and END in s:
            s = s[: s.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + s[s.index(END):]
        else:
            s = s.rstrip("\n") + "\n\n" + BEGIN + "\n" + text + "\n" + END + "\n"
        doc.write_text(s)
    wrong = [c for k in cases for c in cases[k] if c["conf"] is not None and c["conf"] >= 0.8 and c["got"] != c["want"]]
    for c in wrong:
        print(f"WRONG at confidence {c['conf']:.2f}: {c['name']}: {c['got']} (label {c['want']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
