"""Record the labelled proof traces on a GPU machine, and say how gputop diagnosed each.

    python bench/gpu/proof/record_all.py [--out DIR] [--cases idle,matmul_bf16,...] [--seconds N]

For each case (a script in bench/gpu/proof/ whose bottleneck is known by construction) this runs, exactly
as a user would::

    python -m gputop --json --record OUT/traces/<case>.<class>.jsonl.gz --run -- python bench/gpu/proof/<case>.py

keeps gputop's JSON document (OUT/runs/<case>.json) and stderr (OUT/runs/<case>.stderr.txt), writes
``expect=<class>`` into the trace's header note, diagnoses the trace again offline (what the CPU tests
do), and writes OUT/summary.json and OUT/summary.md with the confusion table. Copy OUT/traces/*.jsonl.gz
into tests/data/traces/ to make them CPU tests. Output dir: --out, else $OUT, else /tmp/gputop-proof.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))  # the checkout's gputop: gputop.evaluate is not installed with the package
sys.path.insert(0, str(HERE))

# case -> (expected class, expected subclass or None, extra args)
CASES = {
    "idle": ("idle", None),
    "matmul_bf16": ("compute-bound", "tensor"),
    "matmul_fp32": ("compute-bound", "fp32"),
    "matmul_fp64": ("compute-bound", "fp64"),
    "elementwise": ("memory-bound", None),
    "tiny_kernels_sync": ("latency-bound", "launch"),
    "dataloader_starved": ("input-starved", None),
    "pageable_h2d": ("pcie-bound", "pageable"),
    "memory_full": ("memory-capacity", None),
    "oom": ("memory-capacity", "oom"),
}


def set_note(path: Path, extra: str) -> None:
    """Append ``extra`` to the header note of a (gzip) trace, in place."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.readlines()
    header = json.loads(lines[0])
    header["note"] = (header.get("note") or "") + " " + extra
    lines[0] = json.dumps(header, separators=(",", ":")) + "\n"
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(lines)


def run_case(case: str, expected: str, out: Path, seconds: float | None) -> dict:
    trace = out / "traces" / f"{case}.{expected}.jsonl.gz"
    runs = out / "runs"
    cmd = [sys.executable, "-m", "gputop", "--json", "--record", str(trace), "--run", "--",
           sys.executable, str(HERE / f"{case}.py")]
    if seconds:
        cmd += ["--seconds", str(seconds)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"== {case} (expect {expected}): {' '.join(cmd[2:])}", flush=True)
    t0 = time.monotonic()
    row: dict = {"case": case, "expected": expected}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=(seconds or 12) + 150)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        (runs / f"{case}.stderr.txt").write_text(err)
        row.update(error="timeout", wall_s=round(time.monotonic() - t0, 1))
        return row
    (runs / f"{case}.stderr.txt").write_text(r.stderr)
    row["gputop_exit_code"] = r.returncode
    row["wall_s"] = round(time.monotonic() - t0, 1)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        row["error"] = f"no JSON document (exit {r.returncode}): " + " ".join(r.stderr[-300:].split())
        return row
    (runs / f"{case}.json").write_text(json.dumps(doc, indent=2))
    v = doc["verdict"]
    row.update(got=v["class"], subclass=v.get("subclass"), confidence=v["confidence"], mixed=v.get("mixed"),
               evidence=v["evidence_text"], exit_code=doc["exit_code"], gpus_used=doc["gpus_used"],
               gpu_detection=doc["gpu_detection"],
               timeline=[f"{s['t_start']:.1f}-{s['t_end']:.1f} {s['class']}"
                         + (f" ({s['subclass']})" if s["subclass"] else "")
                         for g in doc["gpus"] if g["used"] for s in g["timeline"]])
    if trace.exists():
        set_note(trace, f"expect={expected}")
        from gputop.evaluate.labelled import diagnose_trace

        off = diagnose_trace(str(trace))["verdict"]
        row.update(replay_got=off["class"], replay_subclass=off.get("subclass"))
    print(f"   -> {row.get('got')} ({row.get('subclass')}) conf {row.get('confidence')}  exit {row.get('exit_code')}  "
          f"replayed: {row.get('replay_got')}\n   {row.get('evidence')}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gputop-proof"))
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    ap.add_argument("--seconds", type=float, help="loop length of every case (default: each script's own)")
    args = ap.parse_args()
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in wanted if c not in CASES]
    if bad:
        print(f"record_all: unknown case {bad[0]} (known: {', '.join(CASES)})", file=sys.stderr)
        return 2
    for sub in ("traces", "runs"):
        (args.out / sub).mkdir(parents=True, exist_ok=True)
    rows = []
    for case in wanted:
        try:
            rows.append(run_case(case, CASES[case][0], args.out, args.seconds))
        except Exception as exc:  # keep going: the other cases are still worth having
            rows.append({"case": case, "expected": CASES[case][0], "error": f"{type(exc).__name__}: {exc}"})
        rows[-1]["expected_subclass"] = CASES[case][1]
    (args.out / "summary.json").write_text(json.dumps(rows, indent=2))

    from confusion import cases, markdown

    md = ["# gputop proof run", "", "| case | expected | got (live) | got (replayed) | conf | exit | evidence |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        exp = r["expected"] + (f" ({r['expected_subclass']})" if r.get("expected_subclass") else "")
        got = (r.get("got") or r.get("error", "?")) + (f" ({r['subclass']})" if r.get("subclass") else "")
        rep = (r.get("replay_got") or "-") + (f" ({r['replay_subclass']})" if r.get("replay_subclass") else "")
        md.append(f"| {r['case']} | {exp} | {got} | {rep} | {r.get('confidence', '-')} | {r.get('exit_code', '-')} | "
                  f"{(r.get('evidence') or '').replace('|', '/')} |")
    traces = sorted((args.out / "traces").glob("*.jsonl.gz"))
    md += ["", "## Confusion table (replayed traces)", "", markdown(cases(traces))]
    (args.out / "summary.md").write_text("\n".join(md))
    print("\n".join(md))
    ok = sum(1 for r in rows if r.get("got") == r["expected"])
    print(f"\n{ok} of {len(rows)} cases diagnosed as expected; traces in {args.out / 'traces'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
