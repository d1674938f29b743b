"""Windows asked of a running prepared process (issue 37), measured: the throughput a window costs (a run with one
window against one without), the time from a request to its window, and 50 request cycles on one long-running
process (every answer, no crash, no hang). The process is long_run.py, started as a job script would after
``eval "$(gputop --profile-env)"``; the requests are gputop's own (gputop/session/profile_target.py).

    python bench/gpu/anywhere/cycles.py OUT [--ab-seconds 40] [--ab-pairs 1] [--cycles 50]

A window's cost two ways: runs without and with one window, alternated ``--ab-pairs`` times (two runs of one
process differ by a few % on their own: on 2 H100s, 2026-11-27, a run with a window read 3.8% fewer steps/s than
the run before it without one, already 3% fewer in its first 8 s, before the request); and within the run with the
window, the steps lost from 1 s before its request to 3 s after its end against the same run's median rate per
second elsewhere (the run's own drift out of it), and the same span of the run without one read the same way (what
the method reads where there is no window).

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
ap.add_argument("--ab-pairs", type=int, default=1)
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


def within(ends, t_from, t_to):
    """Seconds of steps lost between ``t_from`` and ``t_to`` against the run's median steps per second in its whole
    seconds away from them (and from its first and last second)."""
    t0 = ends[0]
    per_s = {}
    for e in ends:
        per_s[int(e - t0)] = per_s.get(int(e - t0), 0) + 1
    last = int(ends[-1] - t0)
    base = sorted(n for k, n in per_s.items() if 0 < k < last - 1 and not t_from - 1 <= t0 + k <= t_to)
    r = base[len(base) // 2]
    return (r * (t_to - t_from) - sum(1 for e in ends if t_from <= e < t_to)) / r


# -- throughput: one window against none --------------------------------------------------------------------------
pairs = []
for pair in range(a.ab_pairs):
    rates = {}
    for label, window in (("none", False), ("one window", True)):
        truth = out / f"ab{pair}_{label.replace(' ', '_')}.json"
        proc, t = start(a.ab_seconds, truth)
        if window:
            time.sleep(max(0.0, a.ab_seconds / 2 - 5))
            asked_at = time.time()
            got, took, first = ask(t, 3.0, 10)
            w = {k: got.get(k) for k in ("status", "reason", "started_by", "wall_s", "stop_s", "summary_s", "steps",
                                         "started_at")}
            w["first_s"] = first
        proc.wait(timeout=a.ab_seconds + 120)
        ends = json.loads(truth.read_text())["step_ends"]
        rates[label] = rate(ends)
        if not window:
            none_ends = ends
        save(f"- pair {pair + 1}, {label}: {len(ends)} steps, {rate(ends):.2f} steps/s, exit {proc.returncode}")
    held = (w.get("wall_s") or 0) + (w.get("stop_s") or 0) + (w.get("summary_s") or 0)
    end_at = (w.get("started_at") or asked_at) + held
    lost_s = within(ends, asked_at - 1.0, end_at + 3.0)
    shift = none_ends[0] - ends[0]  # the same span of the run without a window: what the method reads of no window
    control_s = within(none_ends, asked_at - 1.0 + shift, end_at + 3.0 + shift)
    pairs.append({"none_steps_per_s": rates["none"], "window_steps_per_s": rates["one window"],
                  "ab_lost": 1 - rates["one window"] / rates["none"], "within_lost_s": lost_s,
                  "control_lost_s": control_s, "window": w, "held_s": held})
    results["pairs"] = pairs
    save(f"- pair {pair + 1}: {100 * pairs[-1]['ab_lost']:.2f}% fewer steps/s with the window than without; within "
         f"its run the window cost {lost_s:.2f} s of steps ({100 * lost_s / 60:.2f}% at one window a minute; the same "
         f"span of the run without one {control_s:.2f} s); window "
         f"{w.get('status')} {w.get('started_by')}, first {first} s after the request, held {held:.2f} s")
ab = sorted(p["ab_lost"] for p in pairs)
inside = sorted(p["within_lost_s"] for p in pairs)
results["throughput_lost"] = {"ab_median": ab[len(ab) // 2], "ab_one_window_a_minute": ab[len(ab) // 2] *
                              a.ab_seconds / 60.0, "within_s_median": inside[len(inside) // 2],
                              "within_one_window_a_minute": inside[len(inside) // 2] / 60.0}
save(f"- throughput lost, {len(pairs)} pair(s): runs against runs {', '.join(f'{100 * x:.2f}%' for x in ab)} over "
     f"{a.ab_seconds:g} s with one window (median {100 * results['throughput_lost']['ab_one_window_a_minute']:.2f}% "
     f"at one window a minute); within the window's run {', '.join(f'{x:.2f}' for x in inside)} s a window (median "
     f"{100 * results['throughput_lost']['within_one_window_a_minute']:.2f}% at one window a minute)")

# -- 50 request cycles on one long-running process ----------------------------------------------------------------
if a.cycles <= 0:
    raise SystemExit(0)
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
