"""CPU cost of sampling: one GPU at 10 Hz, GPM included, for N seconds.

    python bench/perf/sampler_cpu.py [--seconds 60] [--rate 10] [--gpu 0]

Prints the sampler thread's CPU time and the whole process's CPU time as % of one core
(target: <= 1% of a core at 10 Hz for one GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()

    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.sampler import Sampler

    src = LiveSource(gpus=[args.gpu])
    if not src.nvml.available():
        print(f"sampler_cpu: {src.nvml.error}", file=sys.stderr)
        return 3
    static = src.static()[0]
    sampler = Sampler(src, rate_hz=args.rate)
    c0, w0 = time.process_time(), time.monotonic()
    sampler.start()
    time.sleep(args.seconds)
    sampler.stop()
    c1, w1 = time.process_time(), time.monotonic()
    ticks = list(sampler.ticks)
    gpm_ok = sum(1 for t in ticks if t["gpus"][0].get("sm_active_pct") is not None)
    res = {
        "device": static["name"], "gpm_supported": static["gpm_supported"], "rate_hz": args.rate,
        "seconds": round(w1 - w0, 2), "ticks": len(ticks), "ticks_with_gpm": gpm_ok,
        "sampler_thread_cpu_pct_of_core": round(100 * sampler.cpu_s / (w1 - w0), 3),
        "process_cpu_pct_of_core": round(100 * (c1 - c0) / (w1 - w0), 3),
        "per_tick_ms": round(1000 * sampler.cpu_s / max(1, len(ticks)), 3),
    }
    print(json.dumps(res, indent=2))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "sampler_cpu.json").write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
