"""Windows asked of a running prepared process (issue 37), measured: the throughput a window costs (a run with one
window against one without), the time from a request to its window, and 50 request cycles on one long-running
process (every answer, no crash, no hang). The process is long_run.py, started as a job script would after
``eval "$(gputop --profile-env)"``; the requests are gputop's own (gputop/session/profile_target.py).

    python bench/gpu/anywhere/cycles.py OUT [--ab-seconds 40] [--cycles 50]

Writes OUT/cycles.json and OUT/cycles.md as it goes.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from gputop.runner.profile_loader import protocol as P  # noqa: E402
from gputop.session import profile_target as PT  # noqa: E402

HERE = Path(__file__).resolve().parent
ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--ab-seconds", type=float, default=40.0)
ap.add_argument("--cycles", type=int, default=50)
a = ap.parse_args()
out = Path(a.out)
out.mkdir(parents=True, exist_ok=True)
results = {}


def save(line=None):
    (out / "cycles.json").write_text(json.dumps(results, indent=1))
    if line:
        with open(out / "cycles.md", "a") as f:
            f.write(line + "\n")
        print(line, flush=True)


def start(seconds, truth, stop=""):
    line = subprocess.run([sys.executable, "-m", "gputop", "--profile-env"], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))).stdout.strip()
    cmd = f'{line}; exec "$0" "$@"'
    proc = subprocess.Popen(["bash", "-c", cmd, sys.executable, str(HERE / "long_run.py"), "--seconds", str(seconds),
                             "--truth", str(truth), "--stop", stop], cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 120
    while time.monotonic() < end:  # its loader, with torch's CUDA initialised (it trains)
        t, _why = PT.find(proc.pid, attach_ok=False)
        if t is not None and t.cuda:
            return proc, t
        if proc.poll() is not None:
            raise SystemExit(f"long_run.py exited {proc.returncode}: {proc.stdout.read()}")
        time.sleep(0.1)
    raise SystemExit("long_run.py's loader did not say CUDA within 120 s")


def ask(t, seconds, steps, timeout=60.0):
    """(answer, seconds to the answer, seconds from the request to the window's start) of one request."""
    t0 = time.time()
    asked = PT.Asked([t], P.Request(seconds, steps, t0 + 0.5, os.getpid()))
    while not asked.done and time.time() - t0 < timeout:
        time.sleep(0.02)
    got = asked.answers().get(t.pid) or P.unavailable("no answer within %g s (the test's limit)" % timeout)
    first = (got.get("started_at") - t0) if got.get("started_at") else None
    return got, time.time() - t0, first


def rate(ends, skip=(0, 0)):
    ends = [e for e in ends if not (skip[0] <= e <= skip[1])]
    return (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 else None


# -- throughput: one window against none --------------------------------------------------------------------------
for label, window in (("none", False), ("one window", True)):
    truth = out / f"ab_{label.replace(' ', '_')}.json"
    proc, t = start(a.ab_seconds, truth)
    if window:
        time.sleep(max(0.0, a.ab_seconds / 2 - 5))
        got, took, first = ask(t, 3.0, 10)
        results["ab_window"] = {k: got.get(k) for k in ("status", "reason", "started_by", "wall_s", "stop_s",
                                                        "summary_s", "steps", "started_at")}
        results["ab_window"]["first_s"] = first
    proc.wait(timeout=a.ab_seconds + 120)
    ends = json.loads(truth.read_text())["step_ends"]
    results[f"ab_{label}"] = {"steps": len(ends), "steps_per_s": rate(ends), "exit": proc.returncode}
    save(f"- {label}: {len(ends)} steps, {rate(ends):.2f} steps/s, exit {proc.returncode}")
r0, r1 = results["ab_none"]["steps_per_s"], results["ab_one window"]["steps_per_s"]
lost = 1 - r1 / r0
w = results.get("ab_window") or {}
held = (w.get("wall_s") or 0) + (w.get("stop_s") or 0) + (w.get("summary_s") or 0)
per_minute = lost * a.ab_seconds / 60.0  # one window in ab_seconds, as one a minute
results["throughput_lost"] = {"run": lost, "one_window_a_minute": per_minute, "window_held_s": held}
save(f"- throughput lost: {100 * lost:.2f}% over {a.ab_seconds:g} s with one window "
     f"({100 * per_minute:.2f}% at one window a minute); window {w.get('status')} {w.get('started_by')}, "
     f"first {w.get('first_s')} s after the request, held {held:.2f} s")

# -- 50 request cycles on one long-running process ----------------------------------------------------------------
stop = out / "stop"
proc, t = start(3600, out / "cycles_truth.json", str(stop))
cycles = []
for i in range(a.cycles):
    got, took, first = ask(t, 0.5, 5, timeout=45.0)
    cycles.append({"status": got.get("status"), "reason": got.get("reason"), "answer_s": round(took, 3),
                   "first_s": round(first, 3) if first is not None else None, "started_by": got.get("started_by"),
                   "alive": proc.poll() is None})
    results["cycles"] = cycles
    save()
    if proc.poll() is not None:
        break
stop.write_text("")
try:
    rc = proc.wait(timeout=120)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = "hung (killed)"
ok = sum(c["status"] == "ok" for c in cycles)
firsts = sorted(c["first_s"] for c in cycles if c["first_s"] is not None)
results["cycles_summary"] = {"asked": len(cycles), "ok": ok, "exit": rc,
                             "first_s_median": firsts[len(firsts) // 2] if firsts else None,
                             "first_s_max": firsts[-1] if firsts else None,
                             "answer_s_max": max((c["answer_s"] for c in cycles), default=None)}
save(f"- {a.cycles} request cycles: {ok} ok of {len(cycles)}, process exit {rc}; request to window start median "
     f"{results['cycles_summary']['first_s_median']} s, max {results['cycles_summary']['first_s_max']} s; "
     f"longest request to answer {results['cycles_summary']['answer_s_max']} s")
