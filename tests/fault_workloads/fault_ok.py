"""A well-behaved test workload: phases, points, results, a log line, a stray print, a warning, analyze."""

import os
import sys
import time
from pathlib import Path

try:
    import gputop  # noqa: F401
except ImportError:  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.analysis.verdict import Verdict
from gputop.workload import Param, main

NAME = "fault_ok"
DESCRIPTION = "test workload that finishes normally"
PARAMS = [
    Param("device", "choice", "cuda", choices=["cuda", "cpu"], help="where it runs"),
    Param("k", "int_list", [1, 2, 4], lo=1, hi=64, help="points to emit"),
    Param("sleep", "float", 0.05, lo=0, hi=5, help="seconds per point"),
    Param("analyze_fail", "bool", False, help="make analyze raise"),
]
QUICK = {"k": [1, 2]}
CPU = {"sleep": 0.02}


def run(p, emit):
    emit.started(NAME, p, {"kind": p["device"], "name": "test device",
                           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")})
    print("a stray line that is not JSON", flush=True)
    print("something on stderr", file=sys.stderr, flush=True)
    emit.log("hello from fault_ok")
    for phase in ("warmup", "measure"):
        emit.phase(phase)
        for i, k in enumerate(p["k"]):
            if emit.should_stop():
                return
            time.sleep(p["sleep"])
            if phase == "measure":
                emit.point({"k": k, "ai": k / 4, "gflops": float(k) * 1.5, "nan": float("nan"), "extra": [k, k]})
            emit.progress(i + 1, len(p["k"]), phase)
    emit.warning("a test warning", code="test")
    emit.result({"sum_k": sum(p["k"])})


def analyze(doc):
    if doc["params"]["analyze_fail"]:
        raise ValueError("analyze broke on purpose")
    n = len(doc["points"])
    doc["verdict"] = Verdict("compute-bound", "test", 0.9, {"points": n}, f"{n} points", "nothing to do").to_dict()
    for ph in doc["phases"]:
        ph["verdict"] = Verdict("idle", "phase " + ph["name"], None, {}, "a test phase", "none").to_dict()
    doc["results"]["analyzed"] = True
    return doc


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
