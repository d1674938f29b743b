"""Attribution for any Python GPU program however it is launched (issue 37), scored: every window gputop took of each
program shape of ``bench/gpu/attribution_anywhere_gpu.sh`` against the program's own torch.profiler. The table in
docs/diagnosis.md ("Every launcher and loop shape, measured") is this module's output on the compact documents of
``tests/data/attribution_anywhere/``, and tests/test_attribution_anywhere_table.py holds the two equal.

    python -m gputop.evaluate.anywhere [FILE]                # the table from a compact file (default: the H100 run)
    python bench/tools/anywhere_check.py DIR [--compact OUT]  # the same from the bench's folder (and its compact copy)

What is compared, for each window (not only the first: the first may come before the program has any GPU work):

* the process compared: the one whose own profile is the truth. The truth is written by one process (rank 0 of a
  job, the first Python of a shell script): the truth file's ``pid`` where it has one, else the job's lowest pid
  (the launchers start rank 0 first). A window of one process is that process's;
* kernel time by category, memcpy/memset left out of both sides (the program's profile drops them), the window's as
  gputop wrote it, the truth's put in categories by the same rule (``gputop.analysis.attribution.category``) from
  its kernels by name; the largest difference in points;
* a window without kernels is said, not compared (the process had not initialised CUDA, or ran no kernel in it);
* how the window started (``started_by``: at a step or on time), how many processes answered and how far apart the
  ranks' windows started, and how long after the loader read the request the window started.

The truth is the program's own torch.profiler pass over its last steps (bench/gpu/corpus/_corpus.py
``profile_truth``), never gputop; two profilers at two moments of one program differ by the program's own variation.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from gputop.analysis.attribution import category

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "attribution_anywhere" / "h100x2_2026-11-27.json"
ORDER = ("tp_spawn", "torchrun_plain", "accelerate", "shell_two", "infer", "server", "graphs", "decode", "cupy")
TARGET_PT = 5.0  # categories within 5 points of the program's own profile (issue 37)
COPY = "memcpy/memset"

_WINDOW_KEYS = ("seq", "asked_because", "asked_at_s", "status", "why_none", "pid", "processes", "profiler",
                "started_by", "ops_threads", "wall_s", "kernel_count", "basis", "steps", "step_kind", "started_at",
                "request_read_at")
_PROCESS_KEYS = ("pid", "started_by", "wall_s", "kernel_count", "basis", "steps", "step_kind", "started_at",
                 "request_read_at")


# -- the compact documents ------------------------------------------------------------------------------------
def _cats(rows) -> dict[str, float]:
    return {c["category"]: c["us"] for c in rows or []}


def _process(p: dict) -> dict:
    out = {k: p.get(k) for k in _PROCESS_KEYS}
    out["categories_us"] = _cats(p.get("categories"))
    out["no_kernels_why"] = (p.get("idle") or {}).get("why_none")
    return out


def _truth(truth: dict) -> dict:
    return {"by": truth.get("by"), "steps": truth.get("steps"), "pid": truth.get("pid"), "why": truth.get("why"),
            "loop": truth.get("loop"), "kernels_us": {k["name"]: k["device_us"] for k in truth.get("kernels") or []}}


def compact_case(case: str, doc: dict | None, truth: dict | None, rank_truths: list[dict] | None = None) -> dict:
    """What the table needs of one shape's run document and its truth: the run's end, each window (each process's
    part of it) with its categories in microseconds, the truth's kernels by name (``rank_truths``: the other ranks'
    of a job, each its own profile of the same steps)."""
    doc, truth = doc or {}, truth or {}
    att = doc.get("attribution") or {}
    windows = []
    for w in att.get("windows") or []:
        out = {k: w.get(k) for k in _WINDOW_KEYS}
        out["categories_us"] = _cats(w.get("categories"))
        out["no_kernels_why"] = (w.get("idle") or {}).get("why_none")
        out["per_process"] = [_process(p) for p in w.get("per_process") or []]
        windows.append(out)
    return {
        "case": case, "document": bool(doc), "status": doc.get("status"), "exit_code": doc.get("exit_code"),
        "command_exit_code": doc.get("command_exit_code"), "ended": doc.get("ended"), "wall_s": doc.get("wall_s"),
        "gpus_used": doc.get("gpus_used"),
        "gpus_first_seen_s": [g.get("first_seen_s") for g in doc.get("gpus") or [] if g.get("used")],
        "why_none": att.get("why_none"), "windows": windows,
        "truth": {**_truth(truth), "ranks": [_truth(t) for t in rank_truths or []]},
    }


def compact_dir(d: Path, meta: dict | None = None) -> dict:
    """The bench's folder (``shape_CASE.json`` and ``shape_CASE.truth.json``) as one compact document."""
    def load(p: Path):
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None
    found = sorted(p.name[len("shape_"):-len(".json")] for p in d.glob("shape_*.json") if ".truth" not in p.name)
    cases = [c for c in ORDER if c in found] + [c for c in found if c not in ORDER]
    return {"meta": meta or {}, "cases": [
        compact_case(c, load(d / f"shape_{c}.json"), load(d / f"shape_{c}.truth.json"),
                     [t for t in (load(p) for p in sorted(d.glob(f"shape_{c}.truth.rank*.json"))) if t])
        for c in cases]}


# -- the comparison ---------------------------------------------------------------------------------------------
def shares(us_by_category: dict[str, float]) -> dict[str, float]:
    """Each category's share of kernel time, memcpy/memset left out."""
    kept = {c: us for c, us in us_by_category.items() if c != COPY}
    total = sum(kept.values())
    return {c: us / total for c, us in kept.items()} if total > 0 else {}


def truth_shares(kernels_us: dict[str, float]) -> dict[str, float]:
    by: dict[str, float] = {}
    for name, us in kernels_us.items():
        c = category(name)
        by[c] = by.get(c, 0.0) + us
    return shares(by)


@dataclass
class Row:
    case: str
    seq: int | None
    asked: str  # why and when it was asked
    how: str  # how it started, processes, the ranks' start spread
    compared: str  # which process's window is compared, and its categories against the truth's
    diff_pt: float | None  # the largest difference in points (None: not compared)
    read_to_start_s: float | None  # from the loader's read of the request to the window's start
    run: str  # how the program's run ended


def _run(c: dict) -> str:
    if not c.get("document"):
        return "no document"
    if c.get("ended") == "exited":
        return f"exit {c.get('command_exit_code')}"
    return f"{c.get('ended')}: gputop {c.get('exit_code')}, command {c.get('command_exit_code')}"


def _compared(w: dict, truth_pid) -> dict:
    procs = w.get("per_process") or []
    if not procs:
        return w
    if truth_pid is not None:
        for p in procs:
            if p["pid"] == truth_pid:
                return p
    return min(procs, key=lambda p: p["pid"])


def _summed(dicts) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _top(mine: dict, hand: dict, n: int = 4) -> str:
    cats = sorted(set(mine) | set(hand), key=lambda c: -(hand.get(c, 0.0) + mine.get(c, 0.0)))
    return ", ".join(f"{c} {100 * mine.get(c, 0.0):.0f}/{100 * hand.get(c, 0.0):.0f}" for c in cats[:n])


def window_row(c: dict, w: dict) -> Row:
    truth = c.get("truth") or {}
    asked = f"{w.get('asked_because')}, at {w.get('asked_at_s'):.1f} s" if w.get("asked_at_s") is not None else \
        str(w.get("asked_because"))
    if w.get("status") != "ok":
        return Row(c["case"], w.get("seq"), asked, f"unavailable: {w.get('why_none')}", "", None, None, _run(c))
    procs = w.get("per_process") or []
    n = w.get("processes") or 1
    how = f"{w.get('started_by') or '?'}, {n} process{'es' if n > 1 else ''}"
    starts = [p["started_at"] for p in procs if p.get("started_at")]
    if len(starts) > 1:
        how += f" (started {1000 * (max(starts) - min(starts)):.0f} ms apart)"
    how += f", {w.get('wall_s'):.2f} s" if w.get("wall_s") is not None else ""
    p = _compared(w, truth.get("pid"))
    who = f"pid {p.get('pid')}" + (" (rank 0)" if procs else "")
    first = (p["started_at"] - p["request_read_at"]) if p.get("started_at") and p.get("request_read_at") else None
    mine = shares(p.get("categories_us") or {})
    if not p.get("kernel_count") or p.get("basis") == "ops" or not mine:
        why = p.get("no_kernels_why") or "no kernel ran in the window"
        return Row(c["case"], w.get("seq"), asked, how, f"{who}: no kernels ({why})", None, first, _run(c))
    hand = truth_shares(truth.get("kernels_us") or {})
    ranks = truth.get("ranks") or []
    if procs and ranks and len(ranks) + 1 == len(procs):  # every rank's own profile: the job's against the job's
        who, mine = f"the job's {len(procs)} ranks", shares(_summed(q.get("categories_us") or {} for q in procs))
        hand = truth_shares(_summed([truth.get("kernels_us") or {}] + [t.get("kernels_us") or {} for t in ranks]))
    if not hand:
        return Row(c["case"], w.get("seq"), asked, how, f"{who}: {_top(mine, {})}; no profile to compare "
                   f"({truth.get('why') or truth.get('by') or 'no truth'})", None, first, _run(c))
    diff = max(abs(mine.get(k, 0.0) - hand.get(k, 0.0)) for k in set(mine) | set(hand))
    return Row(c["case"], w.get("seq"), asked, how, f"{who}: {_top(mine, hand)}", 100 * diff, first, _run(c))


def rows(data: dict) -> list[Row]:
    out = []
    for c in data["cases"]:
        if not c["windows"]:
            out.append(Row(c["case"], None, "-", f"no window: {c.get('why_none') or 'no document'}", "", None, None,
                           _run(c)))
        out.extend(window_row(c, w) for w in c["windows"])
    return out


def markdown(rs: list[Row]) -> str:
    lines = ["| shape | window | asked | how it started | compared: gputop / own profile (% of kernel time) | "
             "largest difference | request read to start | run |", "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        diff = f"**{r.diff_pt:.1f} pt**" if r.diff_pt is not None and r.diff_pt > TARGET_PT else \
            (f"{r.diff_pt:.1f} pt" if r.diff_pt is not None else "-")
        first = f"{r.read_to_start_s:.2f} s" if r.read_to_start_s is not None else "-"
        lines.append(f"| {r.case} | {r.seq if r.seq is not None else '-'} | {r.asked} | {r.how} | {r.compared or '-'} "
                     f"| {diff} | {first} | {r.run} |")
    return "\n".join(lines) + "\n"


def summary(rs: list[Row]) -> str:
    compared = [r for r in rs if r.diff_pt is not None]
    within = [r for r in compared if r.diff_pt <= TARGET_PT]
    return (f"{len(within)} of {len(compared)} windows with kernels within {TARGET_PT:g} pt of the program's own "
            f"profile; {len(rs) - len(compared)} of {len(rs)} windows not compared (no kernels, unavailable, no "
            f"profile).\n")


def load(path: Path = DATA) -> dict:
    return json.loads(Path(path).read_text())


def main(argv: list[str]) -> int:
    data = load(Path(argv[1]) if len(argv) > 1 else DATA)
    rs = rows(data)
    sys.stdout.write(markdown(rs) + "\n" + summary(rs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
