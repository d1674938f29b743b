"""A stand-in for ``gputop.measure.health_load`` in the doctor's tests (no GPU): it speaks the same events, with the
figures a test gives, and fails the way a test asks.

    python load.py [--events --turn --quick --sustained S --cpus LIST]   (the doctor's own arguments)

Environment (JSON): ``DOCTOR_FAKE_FIGURES`` {"dram": B/s, "fp32", "bf16", "sustained", "h2d", "d2h"};
``DOCTOR_FAKE_SCALE`` {UUID: factor} (this GPU's figures scaled: a slow GPU); ``DOCTOR_FAKE_FAULT``
{UUID: "hang@PHASE" | "segv@PHASE" | "cuda@PHASE" | "missing"}; ``DOCTOR_FAKE_PIDS``: a folder each child writes its
pid into (a test checks nothing outlives the run). ``DOCTOR_FAKE_PHASE_S``: how long the copies and the sustained
load last (default 0.5 s: long enough for the doctor's sampler to read a few ticks).
"""

import argparse
import json
import os
import signal
import sys
import time

HEALTHY = {"dram": 3.15e12, "fp32": 65.3e12, "bf16": 826e12, "sustained": 700e12, "h2d": 55.1e9, "d2h": 54.9e9}


def send(event, **fields):
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", action="store_true")
    ap.add_argument("--turn", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sustained", type=float)
    ap.add_argument("--cpus")
    a = ap.parse_args()
    uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if os.environ.get("DOCTOR_FAKE_PIDS"):
        with open(os.path.join(os.environ["DOCTOR_FAKE_PIDS"], str(os.getpid())), "w") as f:
            f.write(uuid)
    fig = {**HEALTHY, **json.loads(os.environ.get("DOCTOR_FAKE_FIGURES") or "{}")}
    scale = json.loads(os.environ.get("DOCTOR_FAKE_SCALE") or "{}").get(uuid, 1.0)
    fault = json.loads(os.environ.get("DOCTOR_FAKE_FAULT") or "{}").get(uuid, "")
    phase_s = float(os.environ.get("DOCTOR_FAKE_PHASE_S") or 0.5)
    how, _, where = fault.partition("@")
    send("started", workload="doctor", params={"cpus": a.cpus, "quick": a.quick}, device={"kind": "cuda"})
    if how == "missing":
        send("error", kind="missing_dependency", message="cupy is not installed: pip install 'gputop[cuda12]'")
        send("done", status="error")
        return 4

    def phase(name):
        send("phase", name=name)
        if where == name:
            if how == "hang":
                while True:
                    time.sleep(3600)
            if how == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if how == "cuda":
                send("error", kind="cuda", message="CUDA error: an illegal memory access was encountered")
                send("done", status="error")
                sys.exit(1)

    phase("dram")
    send("result", data={"dram": {"bytes_per_s": fig["dram"] * scale, "rms_pct": 0.2}})
    phase("fp32")
    send("result", data={"fp32": {"flops_per_s": fig["fp32"] * scale, "rms_pct": 0.1}})
    phase("bf16")
    send("result", data={"bf16": {"flops_per_s": fig["bf16"] * scale, "rms_pct": 0.5}})
    if a.turn:
        send("phase", name="pcie-wait")
        if not sys.stdin.readline():
            send("done", status="interrupted")
            return 130
    phase("pcie")
    time.sleep(phase_s)
    send("result", data={"pcie": {"h2d_bytes_per_s": fig["h2d"] * scale, "d2h_bytes_per_s": fig["d2h"] * scale}})
    phase("sustained")
    time.sleep(a.sustained if a.sustained is not None else phase_s)
    send("result", data={"sustained": {"bf16_sustained_flops": fig["sustained"] * scale}})
    send("done", status="ok")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        send("done", status="interrupted")
        sys.exit(130)
