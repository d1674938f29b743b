"""Copy a trace, labelling its phases (marks) and/or the whole run with the class they must get.

    python bench/gpu/proof/label_trace.py IN OUT [--run CLASS] [--phase PREFIX=CLASS ...]

``--phase "matmul=compute-bound"`` appends `` expect=compute-bound`` to every mark whose label starts
with "matmul"; ``--run CLASS`` appends ``expect=CLASS`` to the header note. Used to turn real recorded
traces (for example gputop's demo trace) into labelled test data in tests/data/traces/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from gputop.analysis.vocabulary import CLASSES  # noqa: E402
from gputop.telemetry.trace import read_trace  # noqa: E402


def label(src: str, dst: str, run: str | None, phases: dict[str, str]) -> int:
    header, rows = read_trace(src)
    if run:
        header["note"] = ((header.get("note") or "") + f" expect={run}").strip()
    n = 0
    for r in rows:
        if r["type"] == "mark":
            for prefix, cls in phases.items():
                if r["label"].startswith(prefix) and "expect=" not in r["label"]:
                    r["label"] += f" expect={cls}"
                    n += 1
    opener = gzip.open if dst.endswith(".gz") else open
    with opener(dst, "wt", encoding="utf-8") as f:
        for obj in [header, *rows]:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--run", choices=CLASSES, help="the class of the whole run")
    ap.add_argument("--phase", action="append", default=[], metavar="PREFIX=CLASS")
    args = ap.parse_args()
    phases = {}
    for item in args.phase:
        prefix, _, cls = item.rpartition("=")
        if not prefix or cls not in CLASSES:
            print(f"label_trace: --phase {item!r}: want PREFIX=CLASS with CLASS one of {', '.join(CLASSES)}",
                  file=sys.stderr)
            return 2
        phases[prefix] = cls
    n = label(args.src, args.dst, args.run, phases)
    print(f"label_trace: {n} marks labelled, wrote {args.dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
