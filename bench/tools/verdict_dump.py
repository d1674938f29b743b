"""Every verdict gputop's analysis gives on every recorded trace of the checkout, as JSON lines: the proof that a
change to the rules changed no verdict (run it before and after, then ``diff -r`` the two folders).

For each trace (tests/data/traces/**, gputop/data/demo.jsonl.gz, gputop/data/runs/*):

* ``replay``: the run document of ``gputop --replay F --json`` (gputop/headless/replay.py): each GPU's timeline
  (segments and their verdicts), its verdict, the run's verdict (the job's GPUs judged together);
* ``fixed``: each GPU's timeline in fixed 2 s windows (the classifier on windows the change detector did not cut);
* ``live``: each GPU's live verdict (gputop/analysis/live.py) fed a second of ticks at a time, the node's GPUs then
  judged together (``judge_node``, as ``--export`` does), every second of the trace.

Usage: python bench/tools/verdict_dump.py OUT_DIR [TRACE...]   (default: every trace above)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gputop.analysis import thresholds as T  # noqa: E402
from gputop.analysis.comms import judge_node  # noqa: E402
from gputop.analysis.live import LiveVerdict  # noqa: E402
from gputop.analysis.peaks import compute_peaks  # noqa: E402
from gputop.analysis.timeline import timeline  # noqa: E402
from gputop.headless.replay import replay_document  # noqa: E402
from gputop.telemetry.trace import ReplaySource  # noqa: E402


def traces() -> list[Path]:
    found = sorted((ROOT / "tests" / "data" / "traces").rglob("*.jsonl.gz"))
    found += [ROOT / "gputop" / "data" / "demo.jsonl.gz"]
    found += sorted((ROOT / "gputop" / "data" / "runs").glob("*.jsonl.gz"))
    return found


def plain(x):
    """JSON-ready: segments, verdicts and documents (whichever shape the analysis hands out) as dicts."""
    if hasattr(x, "to_dict"):
        return plain(x.to_dict())
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, str):
        return str(x)
    return x


def dump(path: Path, out) -> None:
    def row(kind, **kw):
        out.write(json.dumps(plain({"kind": kind, **kw}), sort_keys=True) + "\n")

    doc = replay_document(str(path))
    row("replay-run", gpus_used=doc["gpus_used"], detection=doc["gpu_detection"], notes=doc["notes"],
        verdict=doc["verdict"])
    for g in doc["gpus"]:
        row("replay-gpu", index=g["index"], used=g["used"], first_seen_s=g["first_seen_s"], verdict=g["verdict"])
        for seg in g["timeline"]:
            row("replay-segment", index=g["index"], segment=seg)

    src = ReplaySource(str(path), speed=float("inf"))
    statics = src.static()
    peaks = [compute_peaks(s) for s in statics]
    ticks = src.ticks
    pids = {k for t in ticks for k in ((t.get("host") or {}).get("procs") or {})}
    pid = next(iter(pids)) if len(pids) == 1 else None
    for pos, st in enumerate(statics):
        for seg in timeline(ticks, pos, st, peaks[pos], watched_pid=pid, fixed=True):
            row("fixed-segment", pos=pos, segment=seg)

    lives = [LiveVerdict() for _ in statics]
    positions = list(range(len(statics)))
    names = [s.get("index", i) for i, s in enumerate(statics)]
    step = 10
    for end in range(step, len(ticks) + 1, step):
        now = ticks[end - 1]["t"]
        window = [t for t in ticks[:end] if t["t"] >= now - (T.LIVE_MAX_S + T.LIVE_EVERY_S)]
        vs = [lv.update(window, statics[i], peaks[i], gpu_pos=i) for i, lv in enumerate(lives)]
        judge_node(vs, window, positions, names)
        for i, v in enumerate(vs):
            row("live", t=now, pos=i, previous=lives[i].previous, verdict=v)


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for p in argv[1:]] or traces()
    for p in paths:
        name = str(p.resolve().relative_to(ROOT)).replace("/", "__")
        with open(out_dir / (name + ".jsonl"), "w") as out:
            dump(p, out)
        print(name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
