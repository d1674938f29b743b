"""The spread of ``gputop --doctor``'s figures over repeated runs, and each run's wall time and findings.

    python bench/gpu/doctor_summary.py DIR     # DIR: where bench/gpu/doctor_gpu.sh wrote quick_*.json, full_*.json

Per mode: each run's exit code, status, wall time (the document's wall_s; the shell's, from walls.txt, beside it),
every finding other than ok (counted over the runs); per GPU and figure: the mean, min, max and spread
((max - min) / mean, and the coefficient of variation), marked where the spread is over the issue's 3%.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

TARGET = 0.03


def main(folder: str) -> int:
    d = Path(folder)
    walls = {}
    if (d / "walls.txt").exists():
        for line in (d / "walls.txt").read_text().splitlines():  # "quick 3 rc=0 wall=21.4"
            parts = line.split()
            if len(parts) == 4:
                walls[(parts[0], parts[1])] = parts[3].removeprefix("wall=")
    for mode in ("passive", "quick", "full"):
        docs = []
        for p in sorted(d.glob(f"{mode}_*.json"), key=lambda p: int(p.stem.split("_")[1])):
            try:
                docs.append((p.stem.split("_")[1], json.loads(p.read_text())))
            except ValueError as exc:
                print(f"{p.name}: not a document ({exc})")
        if not docs:
            continue
        print(f"== {mode}: {len(docs)} runs")
        for run, doc in docs:
            print(f"  run {run}: exit {doc['exit_code']} {doc['status']}  wall {doc['wall_s']:.1f} s (shell "
                  f"{walls.get((mode, run), '?')} s)  counts {doc.get('counts')}")
        bad = Counter((f["status"], f["check"], f.get("gpu"), f["message"][:110]) for _, doc in docs
                      for f in doc["findings"] if f["status"] not in ("ok",))
        for (status, check, gpu, msg), n in sorted(bad.items()):
            print(f"  {n}/{len(docs)} runs  {status:<8} GPU {gpu} {check}: {msg}")
        figures: dict[tuple[int, str], list[float]] = {}
        for _, doc in docs:
            for g in doc["gpus"]:
                for k, v in ((g.get("active") or {}).get("figures") or {}).items():
                    figures.setdefault((g["index"], k), []).append(v)
            for p in doc.get("pairs") or []:
                if p.get("bytes_per_s"):
                    figures.setdefault((p["gpus"][0], f"p2p->{p['gpus'][1]}"), []).append(p["bytes_per_s"])
        print(f"  {'GPU':>3} {'figure':<22} {'n':>3} {'mean':>12} {'min':>12} {'max':>12} {'spread':>7} {'cv':>6}")
        for (i, k), vs in sorted(figures.items()):
            mean = statistics.mean(vs)
            spread = (max(vs) - min(vs)) / mean if mean else 0.0
            cv = statistics.pstdev(vs) / mean if mean and len(vs) > 1 else 0.0
            mark = "  > 3%" if spread > TARGET else ""
            print(f"  {i:>3} {k:<22} {len(vs):>3} {mean:>12.4g} {min(vs):>12.4g} {max(vs):>12.4g} {spread:>6.1%} "
                  f"{cv:>6.2%}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
