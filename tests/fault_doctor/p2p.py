"""A stand-in for ``gputop.measure.p2p_load`` in the doctor's tests: the pairs of the GPUs CUDA_VISIBLE_DEVICES
names, each at ``DOCTOR_FAKE_P2P`` bytes/s (JSON: {"default": B/s, "A>B": B/s} by CUDA index), after a line on
stdin when given ``--wait``; ``DOCTOR_FAKE_P2P_FAULT=hang`` hangs once told to go."""

import json
import os
import sys
import time


def send(event, **fields):
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()


def main():
    n = len([e for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e])
    if os.environ.get("DOCTOR_FAKE_PIDS"):
        with open(os.path.join(os.environ["DOCTOR_FAKE_PIDS"], str(os.getpid())), "w") as f:
            f.write("p2p")
    bw = {"default": 380e9, **json.loads(os.environ.get("DOCTOR_FAKE_P2P") or "{}")}
    send("started", workload="doctor-p2p", params={}, device={"kind": "cuda", "count": n})
    if "--wait" in sys.argv:
        send("phase", name="p2p-wait")
        if not sys.stdin.readline():
            send("done", status="interrupted")
            return 0
    send("phase", name="p2p")
    if os.environ.get("DOCTOR_FAKE_P2P_FAULT") == "hang":
        while True:
            time.sleep(3600)
    pairs = [{"gpus": [a, b], "bytes_per_s": bw.get(f"{a}>{b}", bw["default"]), "peer_access": True, "error": None}
             for a in range(n) for b in range(n) if a != b]
    send("result", data={"pairs": pairs})
    send("done", status="ok")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
