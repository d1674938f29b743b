"""Compose one trace of A's GPUs followed by B's from two real gputop traces recorded on the same kind of machine.

    python scripts/compose_trace.py A.jsonl.gz B.jsonl.gz OUT.jsonl.gz [--seconds S]

No 8-GPU machine was lent to this project, so its 8-GPU screens and documents are tested on a trace composed from two
real 4-GPU recordings: GPU i of B becomes GPU len(A) + i (its static entry, each tick's sample, the ``on GPU n``
marks), tick by tick over the shorter recording (or ``--seconds``), at A's tick times. A's host fields are kept, B's
dropped (B's GPUs keep their own process lists). B's marks land on A's tick of the same position; one
``started`` and one ``exited`` mark are kept (A's, else B's: the first in the composed span). The static entries keep
what NVML said (two recordings of one machine: the same UUIDs twice). Each recording is one job (one command): a
process it lists without a process group (``pgid``: recordings made before gputop read it) gets its recording's
own, the smallest pid that recording lists (only equality matters: gputop judges a node's jobs apart by it), so the
composed node holds two jobs, as a node running both would. The header says what it is: its ``note`` names both
sources, ``composed`` lists each GPU's source and index there and the process group given to each source.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
import sys
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.telemetry.trace import read_trace

ON_GPU = re.compile(r"^on GPU (\d+) (\(.+\))$")
SAME_KIND = ("name", "architecture", "driver_version")  # what "the same kind of machine" means here


def shifted_label(label: str, offset: int) -> str:
    """'on GPU 1 (process list)' -> 'on GPU 5 (process list)' for offset 4; other labels unchanged."""
    m = ON_GPU.match(label)
    return f"on GPU {int(m.group(1)) + offset} {m.group(2)}" if m else label


def process_group(ticks: list[dict], taken: set[int]) -> int:
    """The process group given to a recording's processes that have none: the smallest pid it lists (the next free
    number where another recording has it already)."""
    pids = [p["pid"] for t in ticks for g in t["gpus"] for p in g.get("processes") or [] if p.get("pid") is not None]
    pgid = min(pids, default=1)
    while pgid in taken:
        pgid += 1
    return pgid


def grouped(sample: dict, pgid: int) -> dict:
    """A sample whose listed processes without a ``pgid`` have ``pgid``."""
    procs = sample.get("processes")
    if not procs:
        return sample
    return dict(sample, processes=[p if p.get("pgid") is not None else dict(p, pgid=pgid) for p in procs])


def compose(path_a: str, path_b: str, seconds: float | None = None) -> tuple[dict, list[dict]]:
    """(header, rows) of the composed trace; rows are ticks and marks in time order."""
    head_a, rows_a = read_trace(path_a)
    head_b, rows_b = read_trace(path_b)
    dev_a, dev_b = head_a.get("devices") or [], head_b.get("devices") or []
    kinds = {tuple(d.get(k) for k in SAME_KIND) for d in dev_a + dev_b}
    if len(kinds) != 1:
        raise SystemExit(f"compose_trace: A and B were not recorded on the same kind of machine: {sorted(kinds)}")
    ticks_a = [r for r in rows_a if r["type"] == "tick"]
    ticks_b = [r for r in rows_b if r["type"] == "tick"]
    n = min(len(ticks_a), len(ticks_b))
    if seconds is not None:
        n = min(n, bisect.bisect_right([t["t"] for t in ticks_a], ticks_a[0]["t"] + seconds))
    ticks_a, ticks_b = ticks_a[:n], ticks_b[:n]
    offset = len(dev_a)
    index_b = {d.get("index", i): offset + i for i, d in enumerate(dev_b)}
    devices = [dict(d, index=i) for i, d in enumerate(dev_a)] + \
              [dict(d, index=index_b[d.get("index", i)]) for i, d in enumerate(dev_b)]
    pgid_a = process_group(ticks_a, set())
    pgid_b = process_group(ticks_b, {pgid_a})
    ticks = []
    for ta, tb in zip(ticks_a, ticks_b):
        gpus = [grouped(dict(g), pgid_a) for g in ta["gpus"]] + \
               [grouped(dict(g, t=ta["t"], index=index_b.get(g.get("index"), g.get("index"))), pgid_b)
                for g in tb["gpus"]]
        ticks.append({**ta, "gpus": gpus})
    end = ticks[-1]["t"]
    times_b = [t["t"] for t in ticks_b]
    marks = [(r["t"], r["label"]) for r in rows_a if r["type"] == "mark" and r["t"] <= end]
    for r in rows_b:  # B's marks at A's tick of the same position (the first at or after the mark)
        if r["type"] != "mark":
            continue
        k = bisect.bisect_left(times_b, r["t"])
        if k < n:
            marks.append((ticks[k]["t"], shifted_label(r["label"], offset)))
    seen, kept = set(), []
    for t, label in sorted(marks, key=lambda m: m[0]):
        if label.startswith("exited ") or label == "started":  # one of each (A's first, else B's)
            if label.split()[0] in seen:
                continue
            seen.add(label.split()[0])
        kept.append({"type": "mark", "t": t, "label": label})
    name_a, name_b = Path(path_a).name, Path(path_b).name
    counts = f"{len(dev_a)}" if len(dev_a) == len(dev_b) else f"{len(dev_a)}- and {len(dev_b)}"
    header = {**head_a, "devices": devices,
              "note": f"composed from {name_a} and {name_b} (two real {counts}-GPU recordings; "
                      f"no {len(devices)}-GPU machine was lent): GPUs 0-{offset - 1} are {name_a}'s, "
                      f"{offset}-{len(devices) - 1} are {name_b}'s GPUs 0-{len(dev_b) - 1}, at {name_a}'s tick "
                      f"times; {name_a}'s host fields. {name_a}: {head_a.get('note', '')} | "
                      f"{name_b}: {head_b.get('note', '')}",
              "composed": {"from": [name_a, name_b], "recorded_at": [head_a.get("recorded_at"),
                                                                   head_b.get("recorded_at")],
                           "gpus": [{"index": i, "source": name_a, "source_index": d.get("index", i)}
                                    for i, d in enumerate(dev_a)] +
                                   [{"index": offset + i, "source": name_b, "source_index": d.get("index", i)}
                                    for i, d in enumerate(dev_b)],
                           "process_groups": {name_a: pgid_a, name_b: pgid_b}}}
    rows = sorted([(t["t"], 1, t) for t in ticks] + [(m["t"], 0, m) for m in kept], key=lambda r: (r[0], r[1]))
    return header, [r for _, _, r in rows]


def write(path: str, header: dict, rows: list[dict]) -> None:
    """Compact JSON lines, gzip with no timestamp in it (the same inputs give the same bytes)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for row in [header] + rows:
            gz.write((json.dumps(row, separators=(",", ":")) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="the first trace: its GPUs come first, its tick times and host fields are kept")
    ap.add_argument("b", help="the second trace: its GPUs follow A's")
    ap.add_argument("out", help="the composed trace (.jsonl.gz)")
    ap.add_argument("--seconds", type=float, default=None, help="crop to this many seconds from A's first tick")
    args = ap.parse_args(argv)
    header, rows = compose(args.a, args.b, args.seconds)
    write(args.out, header, rows)
    ticks = sum(r["type"] == "tick" for r in rows)
    print(f"{args.out}: {len(header['devices'])} GPUs, {ticks} ticks, {rows[-1]['t']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
