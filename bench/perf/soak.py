"""An hour of gputop at 10 Hz: the TUI (in an 80x24 pseudo-terminal) and ``--export`` (scraped once a second, as
Prometheus would) side by side, their RSS and CPU read every ``--every`` seconds (issue 24: both must stay flat).

    python bench/perf/soak.py                        # 60 minutes on the demo trace (no GPU needed)
    python bench/perf/soak.py --minutes 5 --live     # live NVML instead of the demo
    python bench/perf/soak.py --json out.json        # also every sample, as JSON

Printed per program: RSS once the sampler's history ring is full (its DEFAULT_HISTORY_S, 10 minutes, plus one: the
ring of ticks grows until then, by design) and at the end, the least-squares RSS slope after that point (MiB per
hour), CPU (% of one core) over the first and the last 10 minutes (or fifths of a shorter run), and the largest
RSS seen. ``--json-in FILE`` recomputes the figures from an earlier run's ``--json``. Exit 1 when a program died or
a scrape failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_cpu import free_port, scrape  # noqa: E402
from tui_cpu import ROOT, PtyProc  # noqa: E402  (the checkout; the pty runner the other TUI benches use)

sys.path.insert(0, ROOT)
from gputop.telemetry.sampler import DEFAULT_HISTORY_S  # noqa: E402

FULL_S = DEFAULT_HISTORY_S + 60  # the ring of ticks is full from here on: RSS should stay flat


def tree_cpu_rss(pid: int) -> tuple[float, int]:
    """CPU seconds and RSS bytes of ``pid`` and its live descendants."""
    try:
        p = psutil.Process(pid)
        procs = [p] + p.children(recursive=True)
    except psutil.Error:
        return float("nan"), 0
    cpu, rss = 0.0, 0
    for q in procs:
        try:
            t = q.cpu_times()
            cpu += t.user + t.system
            rss += q.memory_info().rss
        except psutil.Error:
            pass
    return cpu, rss


def slope_mib_per_h(samples: list[tuple[float, float, int]], skip_s: float) -> float | None:
    pts = [(t, rss / 2**20) for t, _, rss in samples if t >= skip_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt, mr = sum(t for t, _ in pts) / n, sum(r for _, r in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return 3600.0 * sum((t - mt) * (r - mr) for t, r in pts) / den if den else None


def cpu_pct(samples, t_from: float, t_to: float) -> float | None:
    inside = [(t, c) for t, c, _ in samples if t_from <= t <= t_to]
    if len(inside) < 2:
        return None
    (ta, ca), (tb, cb) = inside[0], inside[-1]
    return 100.0 * (cb - ca) / (tb - ta) if tb > ta else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between readings")
    ap.add_argument("--live", action="store_true", help="live NVML (default: --demo)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--json-in", metavar="FILE", help="recompute the figures from an earlier run's --json")
    a = ap.parse_args()
    if a.json_in:
        with open(a.json_in) as fh:
            earlier = json.load(fh)
        return summarize(earlier["minutes"], earlier["samples"], earlier["scrapes"], earlier["failures"], earlier, None)
    src = [] if a.live else ["--demo"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    tui = PtyProc("tui", [sys.executable, "-m", "gputop", "--rate", "10", *src], 80, 24, env=env)
    exp = subprocess.Popen([sys.executable, "-m", "gputop", "--export", f"127.0.0.1:{port}", "--rate", "10", *src],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples: dict[str, list] = {"tui": [], "export": []}
    failures, scrapes = [], 0
    t0 = time.monotonic()
    end, next_read, next_scrape = t0 + a.minutes * 60, t0, t0 + 5
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_scrape:
                try:
                    scrape(url)
                    scrapes += 1
                except OSError as exc:
                    if now - t0 > 30:  # the exporter had 30 s to start
                        failures.append(f"scrape at {now - t0:.0f} s: {exc}")
                next_scrape += 1.0
            if now >= next_read:
                for name, pid in (("tui", tui.pid), ("export", exp.pid)):
                    cpu, rss = tree_cpu_rss(pid)
                    samples[name].append((round(now - t0, 1), round(cpu, 3), rss))
                next_read += a.every
            if not tui.alive() or exp.poll() is not None:
                failures.append(f"died at {now - t0:.0f} s: tui {tui.returncode}, export {exp.poll()}")
                break
            time.sleep(max(0.0, min(next_read, next_scrape) - time.monotonic()))
    finally:
        tui.stop()
        if exp.poll() is None:
            exp.terminate()
            try:
                exp.wait(10)
            except subprocess.TimeoutExpired:
                exp.kill()
    report = {"minutes": a.minutes, "source": "live" if a.live else "demo", "rate_hz": 10,
              "machine": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return summarize(a.minutes, samples, scrapes, failures, report, a.json)


def summarize(minutes: float, samples: dict, scrapes: int, failures: list, report: dict, json_out: str | None) -> int:
    total = minutes * 60
    win = min(600.0, total / 5)
    report.update(scrapes=scrapes, failures=failures, programs={})
    for name, s in samples.items():
        full = next((rss for t, _, rss in s if t >= FULL_S), None)
        r = {"rss_mib_full": full / 2**20 if full else None, "rss_mib_end": s[-1][2] / 2**20 if s else None,
             "rss_mib_max": max(x[2] for x in s) / 2**20 if s else None,
             "rss_slope_mib_per_h": slope_mib_per_h(s, FULL_S),
             "cpu_pct_first": cpu_pct(s, 60, 60 + win), "cpu_pct_last": cpu_pct(s, total - win, total)}
        report["programs"][name] = r
        f = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
        print(f"{name:7s} RSS {f(r['rss_mib_full'], '.1f')} MiB at {FULL_S / 60:.0f} min (the tick ring full) -> "
              f"{f(r['rss_mib_end'], '.1f')} MiB at the end (max {f(r['rss_mib_max'], '.1f')}; slope after "
              f"{FULL_S / 60:.0f} min {f(r['rss_slope_mib_per_h'], '+.2f')} MiB/h); CPU "
              f"{f(r['cpu_pct_first'], '.2f')}% of a core from minute 1 for {win / 60:.1f} min, "
              f"{f(r['cpu_pct_last'], '.2f')}% over the last {win / 60:.1f} min")
    print(f"{scrapes} scrapes; failures: {failures or 'none'}")
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({**report, "samples": samples}, fh)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
