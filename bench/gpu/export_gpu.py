"""``gputop --export`` live on a GPU machine, scraped by a real Prometheus while a bf16 matmul runs.

    source .whl/use.sh
    python3 bench/gpu/export_gpu.py --prometheus PATH [--seconds 20]

Starts ``gputop --export 127.0.0.1:PORT`` (live NVML), a Prometheus (``--prometheus``: its binary, e.g. from
Debian's package unpacked with ``dpkg -x``) scraping it every second, and a torch bf16 matmul loop on GPU 0.
Once the loop has run ``--seconds``, it asks Prometheus for the DCGM series and gputop's verdict, runs every
query of the Grafana dashboard (docs/grafana/gputop.json, variables at "All"), prints what came back, and
checks: tensor pipe busy, the verdict compute-bound, each dashboard query non-empty, the listen address.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ("import torch, time\nx = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
          "while True:\n    y = x @ x\n    torch.cuda.synchronize()\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())["data"]["result"]


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads((ROOT / "docs" / "grafana" / "gputop.json").read_text())
    out = []

    def walk(panels):
        for p in panels:
            out.extend((p.get("title"), t["expr"].replace("$Hostname", ".*").replace("$gpu", ".*"))
                       for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(dash["panels"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gputop-export-"))
    exp_port, prom_port = free_port(), free_port()
    (tmp / "p.yml").write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                               f"  - job_name: gputop\n    static_configs:\n      - targets: ['127.0.0.1:{exp_port}']\n")
    procs = []
    try:
        exporter = subprocess.Popen([sys.executable, "-m", "gputop", "--export", f"127.0.0.1:{exp_port}"], cwd=ROOT)
        procs.append(exporter)
        prom = subprocess.Popen([args.prometheus, f"--config.file={tmp / 'p.yml'}", f"--storage.tsdb.path={tmp / 'db'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=subprocess.DEVNULL,
                                stderr=open(tmp / "prom.log", "w"))
        procs.append(prom)
        load = subprocess.Popen([sys.executable, "-c", MATMUL])
        procs.append(load)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                up = query(prom_port, 'up{job="gputop"}')
                if up and up[0]["value"][1] == "1":
                    break
            except OSError:
                pass
            time.sleep(0.5)
        time.sleep(args.seconds)
        problems = []
        listen = [c.laddr for c in psutil.Process(exporter.pid).net_connections() if c.status == psutil.CONN_LISTEN]
        print("exporter listens on:", listen)
        if any(a.ip != "127.0.0.1" for a in listen):
            problems.append(f"listens beyond localhost: {listen}")
        for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
                     "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED", "gputop_verdict_confidence"):
            rows = query(prom_port, name)
            print(f"{name:34s}", [(r["metric"].get("gpu"), r["metric"].get("modelName"), r["metric"].get("class"),
                                    r["value"][1]) for r in rows])
        tensor = query(prom_port, "max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)")
        if not tensor or float(tensor[0]["value"][1]) < 0.3:
            problems.append(f"tensor pipe not busy: {tensor}")
        at_one = [(r["metric"]["class"], r["metric"].get("subclass")) for r in query(prom_port, "gputop_bottleneck == 1")]
        print("gputop_bottleneck == 1:", at_one)
        if at_one[:1] != [("compute-bound", "tensor")]:
            problems.append(f"verdict {at_one}")
        for title, expr in dashboard_queries():
            n = len(query(prom_port, expr))
            print(f"dashboard: {n} series  {title}")
            if not n:
                problems.append(f"empty dashboard query: {title}")
        print("problems:", problems or "none")
        return 1 if problems else 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    raise SystemExit(main())
