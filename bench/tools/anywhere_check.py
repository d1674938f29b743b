"""gputop's windows on each program shape of bench/gpu/attribution_anywhere_gpu.sh (issue 37) against the program's
own torch.profiler: every window of each case (how it started: at a step or on time; how many processes answered and
how far apart they started; the process compared, which wrote the truth), the kernel-time share of each category in
gputop's window and in the program's own profile (memcpy/memset left out of both), the largest difference, how long
after the loader read the request the window started, and how the run ended. The rules are
gputop/evaluate/anywhere.py's (the table docs/diagnosis.md holds, from the compact copy in tests/data).

    python bench/tools/anywhere_check.py DIR                      # DIR/shape_CASE.json (gputop's), .truth.json beside
    python bench/tools/anywhere_check.py DIR --compact OUT.json   # also the compact copy the table is computed from
        [--meta 'device=...' --meta 'date=...' ...]               #   (its meta: device, date, command)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gputop.evaluate import anywhere as A  # noqa: E402


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--compact", type=Path, help="write the compact documents here")
    ap.add_argument("--meta", action="append", default=[], help="KEY=VALUE in the compact copy's meta")
    a = ap.parse_args(argv[1:])
    meta = dict(m.split("=", 1) for m in a.meta if "=" in m)
    env = a.dir / "env.txt"
    if env.exists():
        meta.setdefault("env", env.read_text().strip().splitlines())
    data = A.compact_dir(a.dir, meta)
    if a.compact:
        a.compact.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    rs = A.rows(data)
    sys.stdout.write(A.markdown(rs) + "\n" + A.summary(rs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
