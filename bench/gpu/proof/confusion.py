"""Confusion table of the classifier over labelled traces (CPU only).

    python bench/gpu/proof/confusion.py [DIR ...]        # default: tests/data/traces
    python bench/gpu/proof/confusion.py --json

A trace is labelled by its file name ``<case>.<class>.jsonl.gz`` or ``expect=<class>`` in its header
note (the whole run: gputop's overall verdict is compared), and by marks whose label holds
``expect=<class>`` (that phase, its first and last second left out, classified as one window).
The markdown goes into docs/diagnosis.md ("Confusion table").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the checkout's gputop: gputop.evaluate is not installed with the package

from gputop.analysis.classify import classify  # noqa: E402
from gputop.analysis.peaks import compute_peaks  # noqa: E402
from gputop.analysis.vocabulary import CLASSES  # noqa: E402
from gputop.evaluate.labelled import diagnose_trace, trace_expectations  # noqa: E402
from gputop.telemetry.trace import read_trace  # noqa: E402

EDGE_S = 1.0
MIN_PHASE_TICKS = 10


def trace_files(dirs: list[Path]) -> list[Path]:
    out = []
    for d in dirs:
        out += sorted(d.glob("*.jsonl.gz")) + sorted(d.glob("*.jsonl"))
    return out


def cases(paths: list[Path]) -> list[dict]:
    """One row per labelled run or phase: name, kind, expected, got, subclass, confidence, evidence."""
    rows = []
    for path in paths:
        header, body = read_trace(str(path))
        want = trace_expectations(str(path), header, body)
        if not want["overall"] and not want["phases"]:
            continue
        a = diagnose_trace(str(path))
        if want["overall"]:
            v = a["verdict"]
            rows.append({"name": path.name.split(".")[0], "kind": "run", "expected": want["overall"],
                         "got": v["class"], "subclass": v.get("subclass"), "confidence": v["confidence"],
                         "mixed": v.get("mixed", []), "evidence": v["evidence_text"]})
        ticks = [r for r in body if r["type"] == "tick"]
        pos = 0
        if a["gpus"]:
            used = [i for i, g in enumerate(a["gpus"]) if g["used"]]
            pos = used[0] if used else 0
        static = header["devices"][pos]
        for label, cls, t0, t1 in want["phases"]:
            win = [t for t in ticks if t0 + EDGE_S <= t["t"] <= t1 - EDGE_S]
            if len(win) < MIN_PHASE_TICKS:
                continue
            v = classify(win, static, compute_peaks(static), watched_pid=a.get("pid"), gpu=pos)
            rows.append({"name": f"{path.name.split('.')[0]}: {label.split(' expect=')[0]}", "kind": "phase",
                         "expected": cls, "got": v.cls, "subclass": v.subclass, "confidence": v.confidence,
                         "mixed": v.mixed, "evidence": v.evidence_text})
    return rows


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "_No labelled traces yet: run bench/gpu/proof/record_all.py on a GPU machine._\n"
    labels = [c for c in CLASSES if any(r["expected"] == c or r["got"] == c for r in rows)]
    lines = ["| expected \\ got | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for e in labels:
        if not any(r["expected"] == e for r in rows):
            continue
        counts = [sum(1 for r in rows if r["expected"] == e and r["got"] == g) for g in labels]
        lines.append(f"| **{e}** | " + " | ".join(str(c) if c else "." for c in counts) + " |")
    right = sum(1 for r in rows if r["expected"] == r["got"])
    lines.append("")
    lines.append(f"{right} of {len(rows)} labelled cases get their class.")
    lines.append("")
    lines.append("| case | kind | expected | got | confidence | evidence |")
    lines.append("|---|---|---|---|---|---|")
    for r in rows:
        got = r["got"] + (f" ({r['subclass']})" if r.get("subclass") else "")
        mark = "" if r["got"] == r["expected"] else " **x**"
        ev = r["evidence"].replace("|", "/")
        lines.append(f"| {r['name']} | {r['kind']} | {r['expected']} | {got}{mark} | {r['confidence']:.2f} | {ev} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path, default=[ROOT / "tests" / "data" / "traces"])
    ap.add_argument("--json", action="store_true", help="the rows as JSON instead of markdown")
    args = ap.parse_args()
    rows = cases(trace_files(args.dirs))
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
