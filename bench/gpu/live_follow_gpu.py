"""Does the live verdict follow the work on a real GPU? The TUI, live, watching a program of known phases.

    source .whl/use.sh && python bench/gpu/live_follow_gpu.py [--size 80x24] [--phase-s 8] [--json OUT]

gputop's TUI (Textual's headless ``run_test`` at the given size, live NVML + GPM at 10 Hz) runs
``gputop --tui --run -- python <child>`` as the CLI does (a Session, make_command_app). The child goes through
phases of known bottlenecks and appends each phase's start (``time.monotonic()``: the sampler's clock) to a
file. Every 0.1 s the script keeps what the verdict panel shows: class, confidence, the window it says it
judged, its evidence. Per phase it prints:

* **follow**: from the phase's start to the first frame that shows the expected class (not the previous
  phase's verdict) and keeps it for a second;
* **steady**: from then to the phase's end, the share of frames that show it, and the class changes (flaps);
* **confidence**: the median over those frames;
* **contradictions**: frames whose cited numbers are not the means of the window they say they judged, or
  whose class disagrees with them (``tests/test_live_verdict.py``'s check, here on live ticks).

Phases (each ``--phase-s``): a process that holds a CUDA context and sleeps (idle), a bf16 matmul loop
(compute-bound), a 1 GiB device copy (memory-bound), tiny kernels with a sync each (latency-bound), GPT-2
(random weights, Hugging Face transformers) decoding token by token at batch 1 (latency-bound: launch),
numpy preprocessing on the CPU with a small batch to the GPU now and then (host-bound), and sleep again.
Exit 0 when every phase was followed within 2 s and no frame contradicted its window.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from gputop.analysis import thresholds as T  # noqa: E402
from gputop.cli import parse  # noqa: E402
from gputop.session.command import Session  # noqa: E402
from gputop.session.monitor import open_monitor  # noqa: E402
from gputop.tui.command import make_command_app  # noqa: E402
from gputop.tui.config import TuiConfig  # noqa: E402
from test_live_verdict import contradictions  # noqa: E402  (the replay test's check, on live ticks here)

EXPECT = {  # phase -> the class the verdict should show
    "sleep, context held": "idle",
    "matmul bf16 8192^3": "compute-bound",
    "device copy 1 GiB": "memory-bound",
    "tiny kernels + sync": "latency-bound",
    "GPT-2 decode, batch 1": "latency-bound",
    "numpy preprocessing, GPU waits": "host-bound",
    "sleep again": "idle",
}
FOLLOW_S = 2.0  # the issue: "follow a phase change within 1-2 s"
HOLD_S = 1.0  # a follow counts once the class has held this long

CHILD = r"""
import sys, time
import numpy as np
import torch
marks, secs = sys.argv[1], float(sys.argv[2])
dev = torch.device("cuda")
def phase(name):
    with open(marks, "a") as f:
        f.write(f"{time.monotonic():.4f}\t{name}\n")
def loop(seconds, fn):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fn()
    torch.cuda.synchronize()
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
src = torch.randn(1 << 28, device=dev)
dst = torch.empty_like(src)
tiny = torch.randn(50000, device=dev)
from transformers import GPT2Config, GPT2LMHeadModel
model = GPT2LMHeadModel(GPT2Config()).to(dev).eval()
torch.cuda.synchronize()
phase("sleep, context held"); time.sleep(secs)
phase("matmul bf16 8192^3")
def mm():
    for _ in range(10): a @ b
    torch.cuda.synchronize()
loop(secs, mm)
phase("device copy 1 GiB")
def cp():
    for _ in range(10): dst.copy_(src)
    torch.cuda.synchronize()
loop(secs, cp)
phase("tiny kernels + sync")
def tk():
    tiny.mul_(1.0001); torch.cuda.synchronize()
loop(secs, tk)
phase("GPT-2 decode, batch 1")
state = {"ids": torch.randint(0, 50257, (1, 16), device=dev), "past": None}
@torch.no_grad()
def decode():
    ids, past = state["ids"], state["past"]
    out = model(ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    int(nxt.item())  # a generation loop looks at each token (stopping criteria): a sync per token
    ids = torch.cat([ids, nxt], 1)
    state["ids"], state["past"] = (ids, out.past_key_values) if ids.shape[1] < 512 else (ids[:, :16], None)
loop(secs, decode)
phase("numpy preprocessing, GPU waits")
rng = np.random.default_rng(0)
img = rng.random((64, 3, 224, 224), dtype=np.float32)
def prep():
    x = img
    for _ in range(3):  # augmentations on the CPU, one core
        x = np.clip(np.sqrt(np.abs(x * 1.7 - 0.3)) + rng.random(x.shape, dtype=np.float32) * 0.01, 0, 1)
    t = torch.from_numpy(x[:8]).to(dev)
    (t * 2).sum().item()
loop(secs, prep)
phase("sleep again"); time.sleep(secs)
phase("end")
"""


def follow_report(frames: list[dict], marks: list[tuple[float, str]]) -> list[dict]:
    """Per phase: follow time, steady share, flaps, median confidence."""
    out = []
    for (t0, name), (t1, _) in zip(marks, marks[1:]):
        want = EXPECT.get(name)
        inside = [f for f in frames if t0 <= f["t"] < t1]
        followed = None
        for i, f in enumerate(inside):
            if f["cls"] == want and not f["previous"]:
                held = [g for g in inside[i:] if g["t"] < f["t"] + HOLD_S]
                if all(g["cls"] == want for g in held) and inside[-1]["t"] >= f["t"] + HOLD_S:
                    followed = f["t"] - t0
                    break
        after = [f for f in inside if followed is not None and f["t"] >= t0 + followed]
        shown = [f["cls"] for f in after]
        flaps = sum(1 for x, y in zip(shown, shown[1:]) if x != y)
        classes: dict[str, int] = {}
        for f in inside:
            classes[f["cls"]] = classes.get(f["cls"], 0) + 1
        out.append({
            "phase": name, "expect": want, "seconds": round(t1 - t0, 2), "frames": len(inside),
            "follow_s": None if followed is None else round(followed, 2),
            "steady_share": round(sum(c == want for c in shown) / len(shown), 3) if shown else 0.0,
            "flaps": flaps,
            "median_confidence": (round(statistics.median(f["confidence"] for f in after if f["cls"] == want), 2)
                                  if any(f["cls"] == want for f in after) else None),
            "classes_shown": classes,
            "last_words": inside[-1]["words"] if inside else "",
            "last_evidence": inside[-1]["evidence_text"] if inside else "",
        })
    return out


async def drive(app, frames: list[dict], bad: list[str], done) -> None:
    async with app.run_test(size=app.bench_size) as pilot:
        while not done():
            await pilot.pause(0.1)
            mon = app.monitor
            v = mon.verdict
            if v is None or not app.model.statics:
                continue
            d = mon.diagnosis
            frames.append({"t": d.now, "cls": v.cls, "sub": v.subclass, "confidence": v.confidence,
                           "previous": d.previous, "words": d.words(), "evidence_text": v.evidence_text,
                           "t_start": v.t_start, "t_end": v.t_end})
            if len(frames) % 5 == 0 and v.t_start is not None:  # 2 checks a second: each is a classify's worth
                ticks = app.model.sampler.window(T.LIVE_MAX_S + 5)
                i = app.model.selected
                one = [{**t, "gpus": [t["gpus"][app.model.positions[i]]]} for t in ticks]
                for why in contradictions(v, one, app.model.statics[i], app.model.peaks[i], app.model.watched_pid()):
                    bad.append(f"t={d.now:.1f} {v.cls}: {why}")
        await pilot.press("q")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--phase-s", type=float, default=8.0)
    ap.add_argument("--json", help="write frames and the per-phase report here")
    args = ap.parse_args()
    cols, rows = map(int, args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="gputop-follow-"))
    child, marks_file = tmp / "child.py", tmp / "marks.tsv"
    child.write_text(CHILD)
    command = [sys.executable, str(child), str(marks_file), str(args.phase_s)]
    gargs, _ = parse(["--tui", "--rate", "10", "--run", "--", *command])
    mon = open_monitor(gargs.spec, note="bench/gpu/live_follow_gpu.py")
    session = Session(mon, command, log=str(tmp / "child.log"), grace_s=5.0, stdin=subprocess.DEVNULL,
                      err=io.StringIO())
    session.start()
    app = make_command_app(TuiConfig(source=mon.source, rate_hz=10, hostname=platform.node()), session)
    app.bench_size = (cols, rows)
    frames: list[dict] = []
    bad: list[str] = []
    t_wall = time.monotonic()
    limit = 7 * args.phase_s + 120

    def done() -> bool:
        return session.poll() or time.monotonic() - t_wall > limit

    try:
        asyncio.run(drive(app, frames, bad, done))
    finally:
        if not session.stopping:
            session.stop()
        session.wait()
        mon.close()
    marks = [(float(t), name) for t, name in (line.split("\t", 1) for line in
             marks_file.read_text().splitlines())] if marks_file.exists() else []
    if not marks or marks[-1][1] != "end":
        print("the child did not finish its phases; its log:", (tmp / "child.log").read_text()[-3000:])
        return 1
    report = follow_report(frames, marks)
    print(f"gputop TUI at {args.size}, live NVML at 10 Hz, {len(frames)} frames read every 0.1 s; "
          f"verdict follow target {FOLLOW_S:g} s (held {HOLD_S:g} s)")
    print(f"{'phase':<32} {'expect':<14} {'follow s':>8} {'steady':>7} {'flaps':>5} {'conf':>5}  shown")
    ok = True
    for r in report:
        fs = "-" if r["follow_s"] is None else f"{r['follow_s']:.2f}"
        conf = "-" if r["median_confidence"] is None else f"{r['median_confidence']:.2f}"
        print(f"{r['phase']:<32} {r['expect']:<14} {fs:>8} {r['steady_share']:>7.0%} {r['flaps']:>5} {conf:>5}  "
              f"{r['classes_shown']}")
        print(f"{'':<32} last: {r['last_words']}: {r['last_evidence']}")
        ok &= r["follow_s"] is not None and r["follow_s"] <= FOLLOW_S
    print(f"contradictions (a frame's cited numbers vs its own window, 2 checks a second): {len(bad)}")
    for line in bad[:20]:
        print("  " + line)
    if args.json:
        Path(args.json).write_text(json.dumps({"size": args.size, "phase_s": args.phase_s, "marks": marks,
                                               "report": report, "contradictions": bad, "frames": frames}))
    return 0 if ok and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
