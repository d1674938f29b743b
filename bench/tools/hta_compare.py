"""gputop's idle time breakdown of a torch.profiler chrome trace next to HolisticTraceAnalysis' own (issue 27).

    python bench/tools/hta_compare.py TRACE.json[.gz] [--document RUN.json] [--json]

    # a window's own trace and its run document, on a GPU machine:
    GPUTOP_PROFILE_KEEP_TRACE=$OUT gputop --json -o $OUT/run.json --run --profile -- python train.py
    python bench/tools/hta_compare.py $OUT/trace-1-PID.json --document $OUT/run.json

TRACE is a chrome trace written by torch.profiler (``prof.export_chrome_trace(path)`` or
``tensorboard_trace_handler``), e.g. one recorded by hand in the program gputop profiled. gputop's side is what
``gputop --run --profile`` computes from a window: the kernel timeline read as the profile loader reads it
(gputop/runner/profile_loader/kernel_spans.py) and the breakdown of gputop/analysis/idle.py. HTA's side
(``TraceAnalysis.get_idle_time_breakdown``, rank 0, all streams, its default consecutive_kernel_delay) runs only
where HTA is installed (``pip install HolisticTraceAnalysis``); without it the script prints gputop's side and
says so. The rows are microseconds of idle time per stream and reason, then the streams summed and each reason's
share. ``--document``: a third column, the breakdown gputop put in that run document for the window the trace
is of (``trace-SEQ-PID.json``, kept by the loader with ``GPUTOP_PROFILE_KEEP_TRACE=DIR``: it read the kernels
from torch.profiler's events in memory, not from this file). Expected differences: HTA rounds starts up and ends down to whole microseconds, and counts an overlap of
two kernels on one stream as negative idle time (gputop: none).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.analysis.idle import KERNEL_WAIT_US, REASONS, idle_breakdown  # noqa: E402
from gputop.runner.profile_loader.kernel_spans import spans_from_file  # noqa: E402


def ours(path: str) -> dict:
    spans, truncated = spans_from_file(path)
    b = idle_breakdown(spans)
    return {"truncated": truncated, "by_stream": {s["stream"]: {r: s[f"{r}_us"] for r in REASONS}
                                                  for s in b["by_stream"]},
            "totals": {r: b[f"{r}_us"] for r in REASONS}, "kernels": b["kernels"],
            "launch_matched_share": b["launch_matched_share"]}


def htas(path: str) -> dict | str:
    """HTA's breakdown of the trace, or why there is none."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError as exc:
        return f"HolisticTraceAnalysis is not installed ({exc}): pip install HolisticTraceAnalysis"
    folder = tempfile.mkdtemp(prefix="hta-compare-")
    try:
        name = "rank0.json.gz" if path.endswith(".gz") else "rank0.json"
        shutil.copy(path, os.path.join(folder, name))  # HTA reads every trace of a folder
        df, _stats = TraceAnalysis(trace_dir=folder).get_idle_time_breakdown(
            visualize=False, consecutive_kernel_delay=int(KERNEL_WAIT_US))
    except Exception as exc:  # noqa: BLE001 - HTA's own failure is one line beside ours (it raises on a window
        return f"HolisticTraceAnalysis failed on this trace: {exc.__class__.__name__}: {exc}"  # with no kernel)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_stream: dict[str, dict[str, float]] = {}
    for row in df.to_dict("records"):
        by_stream.setdefault(str(row["stream"]), dict.fromkeys(REASONS, 0.0))[row["idle_category"]] = \
            float(row["idle_time"])
    return {"by_stream": by_stream,
            "totals": {r: round(sum(s[r] for s in by_stream.values()), 3) for r in REASONS}}


def from_document(path: str, trace: str) -> dict | str:
    """The idle breakdown a run document holds for the window ``trace`` is of (trace-SEQ-PID.json), or why none."""
    with open(path) as f:
        doc = json.load(f)
    m = re.search(r"trace-(\d+)-(\d+)\.json", os.path.basename(trace))
    windows = (doc.get("attribution") or {}).get("windows") or []
    w = next((w for w in windows if m and w.get("seq") == int(m[1]) and w.get("pid") == int(m[2])), None)
    if w is None:
        return f"{path} has no window {m[1]} of pid {m[2]}" if m else f"{trace} is not named trace-SEQ-PID.json"
    idle = w.get("idle") or {}
    if idle.get("why_none") or not idle:
        return f"window {w['seq']}: no idle breakdown ({idle.get('why_none')})"
    by_stream = {s["stream"]: {r: s[f"{r}_us"] for r in REASONS} for s in idle["by_stream"]}
    return {"by_stream": by_stream, "totals": {r: idle[f"{r}_us"] for r in REASONS}}


def table(a: dict, b: dict | str, c: dict | str | None = None) -> list[str]:
    cols = [("HTA", b)] + ([("window", c)] if c is not None else [])
    shown = [(who, d) for who, d in cols if isinstance(d, dict)]
    head = f"{'stream':>8} {'reason':<12} {'gputop us':>12}" + "".join(f" {who + ' us':>12} {'diff':>8}"
                                                                     for who, _d in shown)
    out = [head]
    streams = sorted(set(a["by_stream"]).union(*(d["by_stream"] for _w, d in shown)), key=str)
    for s in streams + ["all"]:
        mine = a["totals"] if s == "all" else a["by_stream"].get(s, dict.fromkeys(REASONS, 0.0))
        for r in REASONS:
            line = f"{s:>8} {r:<12} {mine[r]:>12.1f}"
            for _who, d in shown:
                theirs = d["totals"] if s == "all" else d["by_stream"].get(s, dict.fromkeys(REASONS, 0.0))
                line += f" {theirs[r]:>12.1f} {mine[r] - theirs[r]:>+8.1f}"
            out.append(line)
    for who, d in [("gputop", a)] + shown:
        if isinstance(d, dict):
            idle = sum(d["totals"].values())
            out.append(f"{who} shares of idle: " + ", ".join(
                f"{r} {100 * d['totals'][r] / idle:.1f}%" if idle else f"{r} -" for r in REASONS))
    out += [f"{who}: {d}" for who, d in cols if isinstance(d, str)]
    out.append(f"gputop: {a['kernels']} kernels, {100 * a['launch_matched_share']:.0f}% with their launch found"
               + ("; truncated" if a["truncated"] else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a torch.profiler chrome trace (.json or .json.gz)")
    ap.add_argument("--document", metavar="RUN.json", help="a run document of gputop --run --profile: the "
                    "breakdown it holds for the window the trace is of (trace-SEQ-PID.json)")
    ap.add_argument("--json", action="store_true", help="the breakdowns as one JSON object")
    args = ap.parse_args(argv)
    a, b = ours(args.trace), htas(args.trace)
    c = from_document(args.document, args.trace) if args.document else None
    if args.json:
        print(json.dumps({"gputop": a, "hta": b if isinstance(b, dict) else None,
                          "hta_why_none": None if isinstance(b, dict) else b,
                          "window": c if isinstance(c, dict) else None,
                          "window_why_none": c if isinstance(c, str) else None}, indent=1))
    else:
        print("\n".join(table(a, b, c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
