"""gputop's windows on each program shape of bench/gpu/attribution_anywhere_gpu.sh (issue 37) against the program's
own torch.profiler: per case, whether a window came (how it started: at a step or on time; whose host ops; how many
processes answered), the kernel-time share of each category in gputop's window and in the program's own profile
(bench/tools/attribution_check.py's rule: memcpy/memset left out of both), the largest difference, and how long after
the loader read the request the window started.

    python bench/tools/anywhere_check.py DIR        # DIR/shape_CASE.json (gputop's document), .truth.json beside
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("attribution_check", Path(__file__).with_name("attribution_check.py"))
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def row(d: Path, case: str) -> str:
    doc = check.load(d / f"{case}.json")
    truth = check.load(d / f"{case}.truth.json") or {}
    att = (doc or {}).get("attribution") or {}
    wins = att.get("windows") or []
    if not wins:
        return f"| {case} | no window: {att.get('why_none') or 'no document'} | | | |"
    w = wins[0]
    if w.get("status") != "ok":
        return f"| {case} | unavailable: {w.get('why_none')} | | | |"
    how = f"{w.get('profiler', 'torch')} {w.get('started_by') or ''}, ops {w.get('ops_threads') or '?'}, " \
          f"{w.get('processes', 1)} process(es), {w['wall_s']:.1f} s"
    mine = {c["category"]: c["share"] for c in w.get("categories") or [] if c["category"] != "memcpy/memset"}
    tot = sum(mine.values())
    mine = {c: s / tot for c, s in mine.items()} if tot else {}
    hand = check.shares((k["name"], k["device_us"]) for k in truth.get("kernels") or [])
    cats = sorted(set(mine) | set(hand), key=lambda c: -(hand.get(c, 0) + mine.get(c, 0)))
    top = ", ".join(f"{c} {100 * mine.get(c, 0):.0f}/{100 * hand.get(c, 0):.0f}" for c in cats[:4])
    diff = max((abs(mine.get(c, 0) - hand.get(c, 0)) for c in cats), default=None) if hand else None
    first = (w["started_at"] - w["request_read_at"]) if w.get("started_at") and w.get("request_read_at") else None
    return (f"| {case} | {how} | {top or 'no kernels'} | "
            f"{f'{100 * diff:.1f} pt' if diff is not None else truth.get('why') or 'no profile'} | "
            f"{f'{first:.2f} s' if first is not None else 'n/a'} |")


def main(argv: list[str]) -> int:
    d = Path(argv[1] if len(argv) > 1 else ".")
    cases = sorted(p.stem for p in d.glob("shape_*.json") if not p.stem.endswith(".truth"))
    print("| case | window | categories, gputop / program's own torch.profiler (% of kernel time) | largest "
          "difference | request read to window start |")
    print("|---|---|---|---|---|")
    for case in cases:
        print(row(d, case))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
