"""Record every NVML answer ``gputop --doctor`` reads on this machine, as test data (tests/data/health/).

    python bench/gpu/doctor_record.py --out DIR [--load-s 12]

Writes two records (tests/fake_health.py's format, played back by its RecordedNvml):

* ``recorded_<model>_x<N>.json``: every GPU's answers at rest (static facts, health, a sample, the PCIe link, the
  CPU affinity, each pair's link facts), through gputop's own reads (``fake_health.record_node``);
* ``recorded_<model>_x<N>_loaded.json``: the answers that change under a load (over the first as its ``base``):
  one process per GPU running bf16 matmuls on one stream and 256 MiB pinned host-to-device copies on another for
  ``--load-s`` seconds, read in the middle of it: the clocks, the clock-event reasons, power, temperature and the
  PCIe link a loaded GPU reports.

Copy them into tests/data/health/: the doctor's tests then run over them (a healthy recorded node must have no
finding beyond ok, or the finding explained). Nothing here changes a setting of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import pynvml  # noqa: E402

from fake_health import RecordingLib, record_node  # noqa: E402
from gputop.telemetry.devices import MULTICAST_OFF  # noqa: E402
from gputop.telemetry.health import read_pcie_link  # noqa: E402
from gputop.telemetry.nvml import Nvml  # noqa: E402
from gputop.telemetry.sample import GpuReader  # noqa: E402
from gputop.telemetry.static import device_count, read_uuid  # noqa: E402

LOAD = """
import sys, time, torch
end = time.monotonic() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); c = torch.empty_like(a)
h = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
d = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
while time.monotonic() < end:
    with torch.cuda.stream(s1):
        d.copy_(h, non_blocking=True)
    with torch.cuda.stream(s2):
        torch.mm(a, a, out=c)
    s2.synchronize()
torch.cuda.synchronize()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--load-s", type=float, default=12.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    lib = RecordingLib(pynvml)
    nvml = Nvml(lib)
    if not nvml.available():
        print(f"no NVML here: {nvml.error}")
        return 3
    n = device_count(nvml)
    record_node(nvml)
    name = str(lib.answers.get("nvmlDeviceGetName(gpu0)") or "gpu")
    slug = name.lower().replace("nvidia ", "").replace(" ", "_").replace("-", "_")
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    how = (f"recorded on {platform.node()} ({n}x {name}, driver {lib.answers.get('nvmlSystemGetDriverVersion()')}), "
           f"{when}, by bench/gpu/doctor_record.py")
    idle = lib.record(how + ": at rest", n)
    base = f"recorded_{slug}_x{n}.json"
    (out / base).write_text(json.dumps(idle, indent=1) + "\n")
    print(f"{base}: {len(idle['answers'])} answers, {len(idle['errors'])} errors")

    uuids = [read_uuid(nvml, i) for i in range(n)]
    procs = [subprocess.Popen([sys.executable, "-c", LOAD, str(a.load_s)],
                              env={**os.environ, **MULTICAST_OFF, "CUDA_VISIBLE_DEVICES": u or str(i)})
             for i, u in enumerate(uuids)]
    try:
        time.sleep(a.load_s / 2)  # torch started, the clocks settled at the power cap
        loaded = RecordingLib(pynvml)
        lnvml = Nvml(loaded)
        for i in range(n):
            read_pcie_link(lnvml, i)
            GpuReader(lnvml, i, gpm=False, process_every=1).read()  # clocks, reasons, power, temperature
    finally:
        for p in procs:
            try:
                p.wait(a.load_s + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    changed = {k: v for k, v in loaded.answers.items() if idle["answers"].get(k) != v
               and not k.startswith(("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetComputeRunningProcesses",
                                     "nvmlSystemGetProcessName", "nvmlDeviceGetProcessUtilization"))}
    over = {"format": idle["format"], "version": idle["version"], "base": base, "gpus": n,
            "provenance": how + f": what changed under a {a.load_s:g} s bf16 matmul + pinned copy load on every GPU",
            "answers": dict(sorted(changed.items())), "errors": {}}
    (out / f"recorded_{slug}_x{n}_loaded.json").write_text(json.dumps(over, indent=1) + "\n")
    print(f"recorded_{slug}_x{n}_loaded.json: {len(changed)} answers changed under load: "
          + ", ".join(f"{k}={v}" for k, v in sorted(changed.items()) if "FieldValues" not in k)[:2000])
    print("exit codes of the loads:", [p.returncode for p in procs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
