"""gputop's idle time breakdown of a torch.profiler chrome trace next to HolisticTraceAnalysis' own (issue 27).

    python bench/tools/hta_compare.py TRACE.json[.gz] [--json]

TRACE is a chrome trace written by torch.profiler (``prof.export_chrome_trace(path)`` or
``tensorboard_trace_handler``), e.g. one recorded by hand in the program gputop profiled. gputop's side is what
``gputop --run --profile`` computes from a window: the kernel timeline read as the profile loader reads it
(gputop/runner/profile_loader/kernel_spans.py) and the breakdown of gputop/analysis/idle.py. HTA's side
(``TraceAnalysis.get_idle_time_breakdown``, rank 0, all streams, its default consecutive_kernel_delay) runs only
where HTA is installed (``pip install HolisticTraceAnalysis``); without it the script prints gputop's side and
says so. The rows are microseconds of idle time per stream and reason, then the streams summed and each reason's
share. Expected differences: HTA rounds starts up and ends down to whole microseconds, and counts an overlap of
two kernels on one stream as negative idle time (gputop: none).
"""

from __future__ import annotations

import argparse
import json
import os
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
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_stream: dict[str, dict[str, float]] = {}
    for row in df.to_dict("records"):
        by_stream.setdefault(str(row["stream"]), dict.fromkeys(REASONS, 0.0))[row["idle_category"]] = \
            float(row["idle_time"])
    return {"by_stream": by_stream,
            "totals": {r: round(sum(s[r] for s in by_stream.values()), 3) for r in REASONS}}


def table(a: dict, b: dict | str) -> list[str]:
    hta_ok = isinstance(b, dict)
    head = f"{'stream':>8} {'reason':<12} {'gputop us':>12}" + (f" {'HTA us':>12} {'diff':>8}" if hta_ok else "")
    out = [head]
    streams = sorted(set(a["by_stream"]) | set(b["by_stream"] if hta_ok else ()), key=str)
    for s in streams + ["all"]:
        mine = a["totals"] if s == "all" else a["by_stream"].get(s, dict.fromkeys(REASONS, 0.0))
        theirs = (b["totals"] if s == "all" else b["by_stream"].get(s, dict.fromkeys(REASONS, 0.0))) if hta_ok else None
        for r in REASONS:
            line = f"{s:>8} {r:<12} {mine[r]:>12.1f}"
            if theirs is not None:
                line += f" {theirs[r]:>12.1f} {mine[r] - theirs[r]:>+8.1f}"
            out.append(line)
    for who, d in (("gputop", a), ("HTA", b)):
        if isinstance(d, dict):
            idle = sum(d["totals"].values())
            out.append(f"{who} shares of idle: " + ", ".join(
                f"{r} {100 * d['totals'][r] / idle:.1f}%" if idle else f"{r} -" for r in REASONS))
    if not hta_ok:
        out.append(f"HTA: {b}")
    out.append(f"gputop: {a['kernels']} kernels, {100 * a['launch_matched_share']:.0f}% with their launch found"
               + ("; truncated" if a["truncated"] else ""))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a torch.profiler chrome trace (.json or .json.gz)")
    ap.add_argument("--json", action="store_true", help="both breakdowns as one JSON object")
    args = ap.parse_args(argv)
    a, b = ours(args.trace), htas(args.trace)
    if args.json:
        print(json.dumps({"gputop": a, "hta": b if isinstance(b, dict) else None,
                          "hta_why_none": None if isinstance(b, dict) else b}, indent=1))
    else:
        print("\n".join(table(a, b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
