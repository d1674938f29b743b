"""CPU cost of ``gputop --export`` at 10 Hz sampling while it is scraped once a second (issue 14: <= 1% of a core).

    python bench/perf/export_cpu.py                      # live NVML, 60 s
    python bench/perf/export_cpu.py --demo --seconds 60  # no GPU: the demo trace as the source
    python bench/perf/export_cpu.py --json               # also one JSON line with the figures

Starts ``gputop --export 127.0.0.1:<free port> --rate 10`` as its own process, waits until it serves a
tick, gives it ``--warmup`` seconds, then measures its CPU time (user + system, psutil) over ``--seconds``
while this script scrapes ``/metrics`` once a second, as Prometheus would. Printed: % of one core, the
scrapes, the mean scrape latency and the size of a scrape. Exit 0; 1 if the exporter died or a scrape failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--demo", action="store_true", help="the demo trace as the source (no GPU)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    argv = [sys.executable, "-m", "gputop", "--export", f"127.0.0.1:{port}", "--rate", "10"] + (["--demo"] if a.demo else [])
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # until it serves a tick
            if proc.poll() is not None:
                print(f"gputop --export exited {proc.returncode}: {proc.stderr.read()}", file=sys.stderr)
                return 1
            try:
                if b"DCGM_FI_DEV_SM_CLOCK{" in scrape(url):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                print("gputop --export did not serve a tick within 60 s", file=sys.stderr)
                return 1
            time.sleep(0.1)
        time.sleep(a.warmup)
        p = psutil.Process(proc.pid)
        c0, t0 = p.cpu_times(), time.monotonic()
        scrapes, latency, size, next_at = 0, 0.0, 0, t0
        while time.monotonic() - t0 < a.seconds:
            s0 = time.monotonic()
            size = len(scrape(url))
            latency += time.monotonic() - s0
            scrapes += 1
            next_at += 1.0
            time.sleep(max(0.0, next_at - time.monotonic()))
        c1, t1 = p.cpu_times(), time.monotonic()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    pct = 100.0 * cpu / (t1 - t0)
    out = {"source": "demo" if a.demo else "live", "seconds": round(t1 - t0, 2), "rate_hz": 10, "scrapes": scrapes,
           "cpu_s": round(cpu, 3), "pct_of_one_core": round(pct, 3),
           "scrape_latency_ms": round(1000 * latency / max(1, scrapes), 2), "scrape_bytes": size,
           "machine": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}
    print(f"gputop --export ({out['source']}, 10 Hz, scraped 1/s): {pct:.2f}% of one core over {t1 - t0:.0f} s; "
          f"{scrapes} scrapes, {out['scrape_latency_ms']} ms each on average, {size} bytes")
    if a.json:
        print(json.dumps(out))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
