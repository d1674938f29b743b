"""Record the demo workloads with their phases labelled by physics, for the classifier's CPU tests.

    python bench/gpu/proof/record_workloads.py [--out DIR] [--workloads dataloader,cudagraphs,batchsize,amp]

Each workload runs as ``python workloads/NAME.py --events ...`` while gputop samples every GPU at 10 Hz
(LiveSource + Sampler + Recorder, watching the child's process tree). Each ``phase`` event becomes a
mark; phases whose bottleneck is known by construction get ``expect=<class>`` in the mark (see
PHASES below), which tests/test_classify_traces.py and bench/gpu/proof/confusion.py check. Traces go to
OUT/traces/wl_<name>.jsonl.gz; OUT/workloads.md holds the phase table. Output dir: --out, else $OUT,
else /tmp/gputop-proof.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

# workload -> (parameters making each phase last a few seconds, [(phase-name regex, expected class)])
WORKLOADS = {
    # workers=0: the heavy per-sample transform runs in the training loop; the GPU waits for every batch
    "dataloader": (["--param", "seconds=6"], [(r"^workers=0$", "input-starved")]),
    # a 50000-float kernel runs for ~2 us: with a sync each, back to back, or replayed from a graph, the
    # SMs stay nearly empty; the small-batch MLP is hundreds of tiny kernels per step
    "cudagraphs": (["--param", "min_seconds=3", "--param", "mlp_seconds=3"],
                   [(r"^(naive|interleaved|graph|pipes)$", "latency-bound"), (r"^mlp X=\d+ ", "latency-bound")]),
    # batch 1-4 of a small CNN: a step is a few hundred kernels of a few thousand threads each
    "batchsize": (["--param", "batches=1,2,4,64,512", "--param", "min_seconds=4"],
                  [(r"^batch=(1|2|4)$", "latency-bound")]),
    # strict FP32 (TF32 off): the transformer's matmuls run on the FP32 pipes
    "amp": (["--param", "steps=60"], [(r"^fp32-strict$", "compute-bound")]),
}


def expect_for(workload: str, phase: str) -> str | None:
    for pattern, cls in WORKLOADS[workload][1]:
        if re.search(pattern, phase):
            return cls
    return None


def record(workload: str, out: Path, timeout: float) -> dict:
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.sampler import Sampler
    from gputop.telemetry.trace import Recorder

    path = out / "traces" / f"wl_{workload}.jsonl.gz"
    src = LiveSource()
    rec = Recorder(str(path), src.static(), rate_hz=10.0, note=f"workload {workload} (phases labelled by physics)")
    sampler = Sampler(src, rate_hz=10.0)
    sampler.listeners.append(rec)
    sampler.step()
    cmd = [sys.executable, str(ROOT / "workloads" / f"{workload}.py"), "--events", *WORKLOADS[workload][0]]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    print(f"== {workload}: {' '.join(cmd[1:])}", flush=True)
    errlog = open(out / "runs" / f"wl_{workload}.stderr.txt", "w")
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errlog, text=True, cwd=ROOT, env=env)
    src.watch(child.pid)
    sampler.start()
    phases, status = [], None
    t_end = time.monotonic() + timeout
    try:
        for line in child.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev.get("event") == "phase":
                cls = expect_for(workload, ev["name"])
                label = ev["name"] + (f" expect={cls}" if cls else "")
                rec.mark(label, ev.get("t"))
                phases.append({"phase": ev["name"], "expected": cls})
                print(f"   phase {label}", flush=True)
            elif ev.get("event") == "done":
                status = ev.get("status")
            elif ev.get("event") == "error":
                print(f"   error: {ev.get('message')}", flush=True)
            if time.monotonic() > t_end:
                child.terminate()
                status = "timeout"
                break
        child.wait(30)
    finally:
        rec.mark("end")
        sampler.stop()
        rec.close()
        src.close()
        errlog.close()
    return {"workload": workload, "status": status, "exit_code": child.returncode, "phases": phases,
            "trace": str(path)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gputop-proof"))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--timeout", type=float, default=240.0, help="per workload, seconds")
    args = ap.parse_args()
    from gputop.telemetry.nvml import Nvml

    nvml = Nvml()
    if not nvml.available():
        print(f"record_workloads: {nvml.error}", file=sys.stderr)
        return 3
    for sub in ("traces", "runs"):
        (args.out / sub).mkdir(parents=True, exist_ok=True)
    results = []
    for w in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        if w not in WORKLOADS:
            print(f"record_workloads: unknown workload {w} (known: {', '.join(WORKLOADS)})", file=sys.stderr)
            return 2
        try:
            results.append(record(w, args.out, args.timeout))
        except Exception as exc:  # keep going
            results.append({"workload": w, "error": f"{type(exc).__name__}: {exc}"})
    (args.out / "workloads.json").write_text(json.dumps(results, indent=2))
    from confusion import cases, markdown

    traces = [Path(r["trace"]) for r in results if r.get("trace") and Path(r["trace"]).exists()]
    md = markdown(cases(traces))
    (args.out / "workloads.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
