"""gputop's profiler windows against the program's own torch.profiler (issue 27), from bench/gpu/attribution_gpu.sh's
folder: per case, the kernel-time share of each category in gputop's first window and in the hand-run profile
(the program's last steps, every kernel's time), the largest difference, and the throughput (steps a second) of
the profiled run inside its windows (each from its start to the end of its summary), outside them, and of the
plain run.

    python bench/tools/attribution_check.py DIR          # a markdown table on stdout

Both breakdowns put kernels in categories by the same rule (gputop.analysis.attribution.category); the times come
from two profilers run at different moments of the same program, so they differ by the program's own variation.
Memcpy/memset rows are left out of both (the hand-run profile drops them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gputop.analysis.attribution import category  # noqa: E402

MARGIN_S = 0.5  # steps this close to a window's edges count as neither in nor out


def shares(rows) -> dict[str, float]:
    """{category: share of kernel time} of [(name, us), ...], memcpy/memset left out."""
    by: dict[str, float] = {}
    for name, us in rows:
        c = category(name)
        if c != "memcpy/memset":
            by[c] = by.get(c, 0.0) + us
    total = sum(by.values())
    return {c: us / total for c, us in by.items()} if total else {}


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def windows(doc: dict) -> list[dict]:
    att = (doc or {}).get("attribution") or {}
    return [w for w in att.get("windows") or [] if w.get("categories")]


def gaps(ends: list[float]) -> list[tuple[float, float]]:
    """(end time, seconds) of each step after the first (one timed loop: _corpus.loop resets ``step_ends``)."""
    return [(b, b - a) for a, b in zip(ends, ends[1:])]


def near(t: float, g: float, spans, margin: float) -> bool:
    """Does the step that ended at ``t`` (lasting ``g``) overlap a span widened by ``margin``?"""
    return any(t - g <= e + margin and t >= s - margin for s, e in spans)


def rate(ends: list[float], spans: list[tuple[float, float]], inside: bool) -> float | None:
    """Steps a second over the steps that overlap the spans (``inside``) or end well away from them."""
    gs = [g for t, g in gaps(ends) if near(t, g, spans, 0.0) == inside and (inside or not near(t, g, spans, MARGIN_S))]
    return len(gs) / sum(gs) if gs and sum(gs) > 0 else None


def lost_s(ends: list[float], spans: list[tuple[float, float]]) -> float | None:
    """Seconds the program lost to the windows: the steps that overlap one, less as many steps at the outside pace."""
    out = rate(ends, spans, False)
    hit = [g for t, g in gaps(ends) if near(t, g, spans, 0.0)]
    return sum(hit) - len(hit) / out if out and hit else None


def case_row(d: Path, case: str) -> str:
    prof = load(d / f"{case}.profiled.json")
    truth, truth0 = load(d / f"{case}.profiled.truth.json") or {}, load(d / f"{case}.plain.truth.json") or {}
    ws = windows(prof)
    att = (prof or {}).get("attribution") or {}
    if not ws:
        why = att.get("why_none") or [w.get("error") or w.get("reason") for w in att.get("windows") or []]
        return f"| {case} | no window: {why} | | | | | |"
    w = ws[0]
    mine = {c["category"]: c["share"] for c in w["categories"] if c["category"] != "memcpy/memset"}
    tot = sum(mine.values())
    mine = {c: s / tot for c, s in mine.items()} if tot else {}
    hand = shares((k["name"], k["device_us"]) for k in truth.get("kernels") or [])
    cats = sorted(set(mine) | set(hand), key=lambda c: -(hand.get(c, 0) + mine.get(c, 0)))
    diff = max((abs(mine.get(c, 0) - hand.get(c, 0)) for c in cats), default=None)
    top = ", ".join(f"{c} {100 * mine.get(c, 0):.0f}/{100 * hand.get(c, 0):.0f}" for c in cats[:4])
    # a window's span is what it held the program for: its recording, the profiler's stop on the program's thread,
    # and the summary on the loader's thread (which takes the GIL from the program meanwhile)
    spans = [(x["started_at"], x["started_at"] + x["wall_s"] + (x.get("stop_s") or 0) + (x.get("summary_s") or 0))
             for x in ws if x.get("started_at")]
    ends = truth.get("step_ends") or []
    r_in, r_out, r_plain = rate(ends, spans, True), rate(ends, spans, False), rate(truth0.get("step_ends") or [], [], False)
    f = lambda r: f"{r:.1f}" if r else "n/a"  # noqa: E731
    cost_out = f"{100 * (r_out / r_plain - 1):+.1f}%" if r_out and r_plain else "n/a"
    cost_in = f"{100 * (r_in / r_out - 1):+.1f}%" if r_in and r_out else "n/a"
    lost = lost_s(ends, spans)
    cost_in += f", {lost:.1f} s lost to {len(spans)} window(s)" if lost is not None else ""
    return (f"| {case} | {w.get('profiler', 'torch')} {len(ws)} window(s), {w['wall_s']:.1f} s | {top} | "
            f"{100 * diff:.1f} pt | {f(r_plain)} / {f(r_out)} / {f(r_in)} | {cost_out} | {cost_in} |"
            if diff is not None else f"| {case} | window without kernels | | | | | |")


def main(argv: list[str]) -> int:
    d = Path(argv[1] if len(argv) > 1 else ".")
    cases = sorted({p.name.split(".")[0] for p in d.glob("*.profiled.json")})
    print("| case | window | categories, gputop's window / hand-run torch.profiler (% of kernel time) | largest "
          "difference | steps/s plain / profiled run outside / inside windows | outside vs plain | inside vs outside, time lost |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        print(case_row(d, case))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
