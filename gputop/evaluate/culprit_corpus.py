"""The culprit corpus scored (issue 36): each run document of bench/gpu/culprit_corpus_gpu.sh against the truth the
script wrote before gputop ran the job (which rank, which kind: by construction).

    python -m gputop.evaluate.culprit_corpus DIR [--json F]     # DIR: the corpus's folder (truth/, docs/)

A case's truth: ``kind`` (left, outside, mismatch, straggler, small, none), ``ranks`` (the rank or ranks that are right:
both of a 2-rank mismatch, which has no odd one out) and ``gpus``. Rank r of the torchrun job runs on GPU r
(LOCAL_RANK r, no CUDA_VISIBLE_DEVICES). What is scored of each document:

* **named**: the job-level ``culprit`` names ranks, all of them right (its GPUs, where a rank was not read);
  a straggler case: the GPU its verdicts name the straggler (or the lowest straggler score) is the right one;
  a healthy run: no culprit, no GPU stalled or culprit at any time (a false stall or culprit is a miss); small
  collectives: the document's ``collectives`` says small, and every GPU of the job's verdict carries it;
* **per GPU**: the culprit rank's GPU's own verdict is "culprit" (its part told on its own verdict);
* **hang verdict**: seconds from the stall's start (the live verdict's regime start) to the first live "stalled"
  verdict (``stall_seen_after_s``), and **culprit**: to the read that named it (``named_after_s``);
* the **confusion** of kinds: the truth's against what gputop named (the culprit GPU's verdict subclass, else the
  job's culprit kind, "straggler", or "none").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

KINDS = ("left", "outside", "mismatch", "straggler", "small", "none")


def _gpu(doc: dict, index: int) -> dict | None:
    return next((g for g in doc.get("gpus") or [] if g.get("index") == index), None)


def _named_ranks(c: dict) -> list[int]:
    ranks = c.get("culprit_ranks") or []
    gpus = c.get("culprit_gpus") or []
    return [r if r is not None else g for r, g in zip(ranks, gpus + [None] * len(ranks))] if ranks else list(gpus)


def _straggler(doc: dict) -> int | None:
    for g in doc.get("gpus") or []:
        v = g.get("verdict") or {}
        if (v.get("job") or {}).get("straggler") == g.get("index"):
            return g["index"]
    scores = {g["index"]: (g.get("verdict") or {}).get("evidence", {}).get("straggler_score")
              for g in doc.get("gpus") or []}
    scores = {i: s for i, s in scores.items() if s is not None}
    return min(scores, key=scores.get) if scores and min(scores.values()) < 0.8 else None


def _any_stall(doc: dict) -> bool:
    for g in doc.get("gpus") or []:
        v = g.get("verdict") or {}
        if v.get("class") in ("stalled", "culprit") or any(s.get("class") == "stalled" for s in g.get("timeline") or []):
            return True
    return False


def score_case(truth: dict, doc: dict) -> dict:
    """One document against its truth (module doc)."""
    c = doc.get("culprit") or {}
    kind, want = truth["kind"], set(truth.get("ranks") or [])
    row = {"case": truth["case"], "truth_kind": kind, "truth_ranks": sorted(want), "named_ranks": _named_ranks(c),
           "named_kind": None, "named": False, "per_gpu": None, "hang_verdict_s": c.get("stall_seen_after_s"),
           "culprit_s": c.get("named_after_s"), "flight_recorder": (c.get("flight_recorder") or {}).get("kind"),
           "where": c.get("where") or c.get("sentence"), "status": doc.get("status")}
    if kind == "none":  # clean: nobody named (a block that names no one is no culprit), no stall at any time
        row["named"] = not (c.get("culprit_ranks") or c.get("culprit_gpus")) and not _any_stall(doc)
        row["named_kind"] = c.get("kind") or ("stalled" if _any_stall(doc) else "none")
        return row
    if kind == "small":  # no culprit: the job's many small collectives named on every GPU of it
        small = (doc.get("collectives") or {}).get("small") is True
        told = all("collectives" in ((g.get("verdict") or {}).get("job") or {}) for g in doc.get("gpus") or []
                   if g.get("used"))
        row.update(named=small and told and not (c.get("culprit_ranks") or c.get("culprit_gpus")), named_kind="small" if small else (c.get("kind") or "none"),
                   per_gpu=told)
        return row
    if kind == "straggler":
        s = _straggler(doc)
        row.update(named_ranks=[] if s is None else [s], named=s in want, named_kind="straggler" if s is not None
                   else (c.get("kind") or "none"), per_gpu=s in want)
        return row
    named = row["named_ranks"]
    row["named"] = bool(named) and set(named) <= want
    culprit_gpus = [g for g in (c.get("culprit_gpus") or [])]
    # the culprit's GPU tells its part: the named rank's where it is a right one (either rank of a 2-rank mismatch)
    told_by = min(set(named) & want) if set(named) & want else min(want)
    v = (_gpu(doc, told_by) or {}).get("verdict") or {}
    row["per_gpu"] = v.get("class") == "culprit"
    blamed = next(((_gpu(doc, g) or {}).get("verdict") or {} for g in culprit_gpus if g is not None), {})
    row["named_kind"] = (blamed.get("subclass") if blamed.get("class") == "culprit" else None) or c.get("kind") or "none"
    return row


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 1) if xs else None


def summarize(folder: str | Path) -> dict:
    """Every case of ``folder`` (truth/CASE.json, docs/CASE.json) scored, with the totals and the confusion."""
    folder = Path(folder)
    rows = []
    for t in sorted((folder / "truth").glob("*.json")):
        truth = json.loads(t.read_text())
        d = folder / "docs" / t.name
        if not d.exists():
            rows.append({"case": truth["case"], "truth_kind": truth["kind"], "named": False, "named_kind": "no document",
                         "truth_ranks": truth.get("ranks"), "named_ranks": []})
            continue
        rows.append(score_case(truth, json.loads(d.read_text())))
    faults = [r for r in rows if r["truth_kind"] not in ("none", "small")]
    confusion: dict[str, dict[str, int]] = {}
    for r in rows:
        confusion.setdefault(r["truth_kind"], {}).setdefault(r.get("named_kind") or "none", 0)
        confusion[r["truth_kind"]][r.get("named_kind") or "none"] += 1
    hangs = [r for r in rows if r["truth_kind"] in ("left", "outside", "mismatch")]
    return {"cases": rows, "faults": len(faults), "named_right": sum(r["named"] for r in faults),
            "healthy_clean": (all(r["named"] for r in rows if r["truth_kind"] == "none")
                              if any(r["truth_kind"] == "none" for r in rows) else None),  # None: no healthy run
            "small_named": [r["named"] for r in rows if r["truth_kind"] == "small"],
            "median_hang_verdict_s": _median([r.get("hang_verdict_s") for r in hangs]),
            "median_culprit_s": _median([r.get("culprit_s") for r in hangs]),
            "confusion": confusion}


def confusion_table(summary: dict) -> str:
    """The confusion of kinds as a Markdown table (rows: the truth; columns: what gputop named)."""
    conf = summary["confusion"]
    cols = sorted({k for row in conf.values() for k in row}, key=lambda k: (k not in KINDS, KINDS.index(k)
                                                                             if k in KINDS else 0, k))
    lines = ["| truth \\ named | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for kind in sorted(conf, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS)):
        lines.append(f"| {kind} | " + " | ".join(str(conf[kind].get(c, 0) or "") for c in cols) + " |")
    return "\n".join(lines)


def render(summary: dict) -> str:
    out = [f"{'case':12s} {'truth':18s} {'named':26s} {'right':5s} {'gpu':4s} {'hang s':>6s} {'culprit s':>9s}  where"]
    for r in summary["cases"]:
        truth = f"{r['truth_kind']} {r.get('truth_ranks')}"
        named = f"{r.get('named_kind')} {r.get('named_ranks')}"
        out.append(f"{r['case']:12s} {truth:18s} {named:26s} {'yes' if r['named'] else 'NO':5s} "
                   f"{'-' if r.get('per_gpu') is None else 'yes' if r['per_gpu'] else 'no':4s} "
                   f"{r.get('hang_verdict_s') if r.get('hang_verdict_s') is not None else '-':>6} "
                   f"{r.get('culprit_s') if r.get('culprit_s') is not None else '-':>9}  {str(r.get('where'))[:90]}")
    clean = {None: "no healthy run", True: "healthy run clean", False: "healthy run NOT clean"}[summary["healthy_clean"]]
    out += ["", f"culprit named right: {summary['named_right']} of {summary['faults']} faults; {clean}; median time to the hang verdict {summary['median_hang_verdict_s']} s, "
                f"to the culprit {summary['median_culprit_s']} s (from the stall's start)", "", confusion_table(summary)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the culprit corpus scored against its truths")
    ap.add_argument("folder")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    summary = summarize(a.folder)
    print(render(summary))
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
