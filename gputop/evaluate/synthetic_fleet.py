"""A synthetic fleet's history in Prometheus, in the series and labels the fleet reader (``gputop/fleet/reader.py``)
queries, as ``gputop --export`` and dcgm-exporter expose them: for the scale bench (bench/perf/cluster_scale.py,
docs/benchmarks.md "Cluster scale (issue 26)") and its test (tests/test_cluster_scale_gen.py).

The history (:func:`backfill`): ``DCGM_FI_*`` with ``gpu``/``UUID``/``pci_bus_id``/``device``/``modelName``/
``Hostname``(/``hpc_job``) labels on every node, and the scrape's ``instance`` and ``job``;
``gputop_bottleneck{class,subclass}`` (1 for the current class, 0 for the others) and
``gputop_verdict_confidence{class}`` on the gputop nodes. The mix: 3 of every 4 nodes run
``gputop --export`` (its 17 queried DCGM series), the 4th only dcgm-exporter (its default counters plus the DCP
fields: 18 queried series, and ``DCGM_FI_DRIVER_VERSION`` as a label); nodes are scheduled in groups of 4
(:func:`schedule`), each group running a sequence of jobs of 1-6 h (one job over the 4 nodes, two over 2 nodes each,
or one per node, so most jobs span gputop and dcgm-exporter nodes) with idle gaps without a job; a job goes through
phases of 20-90 min whose class changes (compute-bound (tensor), memory-bound, input-starved, idle, host-bound,
memory-capacity, pcie-bound, comms-bound (collectives), throttled (power), stalled (collective): then the job's first
node idles, its culprit), one GPU in 16 lagging in its own class. Series the reader never queries (peaks, window
seconds, per-process memory, dcgm-exporter's XID/energy/ECC counters) are not generated. Each 2 h block is written
as OpenMetrics text (:func:`write_block`) and backfilled with ``promtool tsdb create-blocks-from openmetrics`` while
the next one is written (so no file holds the whole day and the blocks do not overlap).
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

from gputop.analysis.vocabulary import CLASSES
from gputop.export.dcgm_names import EXPORTED

BLOCK_S = 7200  # promtool's (and Prometheus') 2 h block
GPUS_PER_NODE = 8
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "570.133.20"
FB_TOTAL_MIB = 81559
# the queried DCGM series each kind of node exposes: gputop --export's (its EXPORTED and FB_FREE) ...
GPUTOP_SERIES = tuple(EXPORTED) + ("DCGM_FI_DEV_FB_FREE",)
# ... and dcgm-exporter's default counters + DCP fields among those the reader queries
DCGM_SERIES = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
               "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
               "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY",
               "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
               "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
               "DCGM_FI_PROF_PCIE_RX_BYTES")
RATIOS = {n for n in set(GPUTOP_SERIES) | set(DCGM_SERIES) if n.startswith("DCGM_FI_PROF_") and "PCIE" not in n}

# (class, subclass) -> the DCGM values of a GPU in that phase: ratios 0-1, util %, W, MHz, MiB, bytes/s.
# "burst": input-starved's SM activity alternates busy / waiting between scrapes.
PROFILES = {
    ("compute-bound", "tensor"): dict(sm=.93, occ=.45, tensor=.62, dram=.38, fp16=.02, fp32=.08, fp64=0, util=100,
                                      power=640, pcie=4e8, used=52000),
    ("memory-bound", None): dict(sm=.86, occ=.6, tensor=.01, dram=.88, fp16=0, fp32=.22, fp64=0, util=100,
                                 power=520, pcie=3e8, used=38000),
    ("input-starved", None): dict(sm=.35, occ=.2, tensor=.15, dram=.12, fp16=0, fp32=.04, fp64=0, util=45,
                                  power=260, pcie=6e9, used=30000, burst=True),
    ("idle", None): dict(sm=0, occ=0, tensor=0, dram=0, fp16=0, fp32=0, fp64=0, util=0, power=72, pcie=1e6,
                         used=24000),
    ("host-bound", None): dict(sm=.22, occ=.05, tensor=0, dram=.04, fp16=0, fp32=.06, fp64=0, util=97, power=160,
                               pcie=2e8, used=9000),
    ("memory-capacity", None): dict(sm=.55, occ=.3, tensor=.2, dram=.4, fp16=0, fp32=.1, fp64=0, util=90,
                                    power=420, pcie=1.2e10, used=81000),
    ("pcie-bound", None): dict(sm=.12, occ=.05, tensor=0, dram=.05, fp16=0, fp32=.02, fp64=0, util=30, power=180,
                               pcie=2.4e10, used=20000),
    # a job's GPUs waiting in collectives across nodes (their NIC traffic crosses PCIe both ways)
    ("comms-bound", "collectives"): dict(sm=.18, occ=.04, tensor=.05, dram=.1, fp16=0, fp32=.02, fp64=0, util=96,
                                         power=230, pcie=1.6e10, used=60000, both_ways=True),
    ("throttled", "power"): dict(sm=.92, occ=.45, tensor=.55, dram=.35, fp16=.02, fp32=.08, fp64=0, util=100,
                                 power=700, pcie=4e8, used=52000, clock=1410),
    # a collective that never completes: kernels resident, nothing moves (the job's first node left: idle)
    ("stalled", "collective"): dict(sm=.99, occ=.02, tensor=0, dram=0, fp16=0, fp32=0, fp64=0, util=100, power=120,
                                    pcie=1e5, used=60000),
}
PHASE_WEIGHTS = ((("compute-bound", "tensor"), 36), (("memory-bound", None), 13), (("input-starved", None), 18),
                 (("idle", None), 7), (("host-bound", None), 6), (("memory-capacity", None), 5),
                 (("pcie-bound", None), 4), (("comms-bound", "collectives"), 6), (("throttled", "power"), 3),
                 (("stalled", "collective"), 2))
NO_JOB = ("idle", None)


# -- the fleet's day ----------------------------------------------------------------------------------------------
def schedule(nodes: int, start: int, end: int, seed: int = 26) -> dict[int, list[tuple[int, int, str | None, list, int]]]:
    """node -> [(t0, t1, job or None, [(t0, t1, class, subclass), ...], the job's first node), ...] covering
    [start, end). In a stalled phase of a job over several nodes, its first node's GPUs idle (its ranks left the
    collective the others wait in: the culprit node)."""
    rng = random.Random(seed)
    out: dict[int, list] = {n: [] for n in range(nodes)}
    job_id = 100000
    phases_of = [p for p, _ in PHASE_WEIGHTS]
    weights = [w for _, w in PHASE_WEIGHTS]
    for group in range(0, nodes, 4):
        members = list(range(group, min(group + 4, nodes)))
        t = start - rng.randrange(0, 3 * 3600)
        while t < end:
            gap = rng.choice((0, 0, 600, 1800, 3600))  # no job: the GPUs idle
            if gap:
                for n in members:
                    out[n].append((t, t + gap, None, [(t, t + gap, *NO_JOB)], n))
                t += gap
            length = rng.randrange(3600, 6 * 3600)
            split = rng.choice((1, 1, 2, 4))  # one job on the 4 nodes, two of 2 nodes, or one per node
            for part in range(split):
                job_id += 1
                phases, p = [], t
                while p < t + length:
                    d = min(rng.randrange(1200, 5400), t + length - p)
                    phases.append((p, p + d, *rng.choices(phases_of, weights)[0]))
                    p += d
                held = members[part * len(members) // split:(part + 1) * len(members) // split]
                for n in held:
                    out[n].append((t, t + length, str(job_id), phases, held[0] if len(held) > 1 else -1))
            t += length
    return out


def gpu_states(node_plan: list, times: list[int], lagging: bool, node: int = -2) -> list[tuple[str | None, str, str | None]]:
    """(job, class, subclass) of one GPU of ``node`` at each time (a lagging GPU is input-starved where its job
    computes; the culprit node of a stalled job idles)."""
    out, i = [], 0
    for t in times:
        while i < len(node_plan) - 1 and node_plan[i][1] <= t:
            i += 1
        t0, t1, job, phases, culprit = node_plan[i]
        cls, sub = next(((c, s) for p0, p1, c, s in phases if p0 <= t < p1), NO_JOB)
        if lagging and job and cls == "compute-bound":
            cls, sub = "input-starved", None
        if cls == "stalled" and node == culprit:
            cls, sub = NO_JOB
        out.append((job, cls, sub))
    return out


RATIO_TEXT = [f"{i / 1000:g}" for i in range(1001)]


def dcgm_values(name: str, cls_sub: tuple, rng: random.Random, k: int) -> str:
    """The text of one DCGM series' value in a phase (``k``: the sample's number, for bursts)."""
    p = PROFILES[cls_sub]
    noise = rng.uniform(-.03, .03)
    if name in RATIOS:
        key = {"DCGM_FI_PROF_SM_ACTIVE": "sm", "DCGM_FI_PROF_SM_OCCUPANCY": "occ",
               "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor", "DCGM_FI_PROF_DRAM_ACTIVE": "dram",
               "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16", "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "fp32",
               "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "fp64"}[name]
        v = p[key]
        if p.get("burst") and key in ("sm", "tensor", "occ"):
            v = v * 2.2 if k % 2 else v * 0.1
        return RATIO_TEXT[min(1000, max(0, round(1000 * (v + noise if v else 0))))]
    if name == "DCGM_FI_DEV_GPU_UTIL":
        return str(min(100, max(0, round(p["util"] + 100 * noise)))) if p["util"] else "0"
    if name == "DCGM_FI_DEV_MEM_COPY_UTIL":
        return str(round(100 * p["dram"] * 0.8))
    if name == "DCGM_FI_DEV_POWER_USAGE":
        return f"{p['power'] * (1 + noise):.3f}"
    if name == "DCGM_FI_DEV_SM_CLOCK":
        return str(p.get("clock", 1980)) if p["util"] else "345"
    if name == "DCGM_FI_DEV_MEM_CLOCK":
        return "2619"
    if name == "DCGM_FI_DEV_GPU_TEMP":
        return str(round(30 + p["power"] / 15))
    if name == "DCGM_FI_DEV_FB_USED":
        return str(p["used"])
    if name == "DCGM_FI_DEV_FB_FREE":
        return str(FB_TOTAL_MIB - p["used"] - 590)
    if name == "DCGM_FI_DEV_FB_RESERVED":
        return "590"
    if name in ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES"):
        tx = 1.0 if p.get("both_ways") else 0.3
        return str(round(p["pcie"] * (1 + noise) * (tx if name.endswith("TX_BYTES") else 1)))
    raise KeyError(name)


def gpu_labels(node: int, gpu: int, dcgm_only: bool) -> str:
    """A GPU's labels as Prometheus stores them: the exporter's (dcgm-exporter's names) and the scrape's
    (``instance``: the exporter's address, dcgm-exporter's port 9400 or gputop's 9401; ``job``: the scrape job)."""
    uuid = f"GPU-{node:08x}-{gpu:04x}-4c1e-9b2a-{(node * 8 + gpu) * 2654435761 % (1 << 48):012x}"
    scrape = f'instance="node-{node:04d}:9400",job="dcgm-exporter"' if dcgm_only else \
        f'instance="node-{node:04d}:9401",job="gputop"'
    text = (f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + 0x10 * gpu:02X}:00.0",device="nvidia{gpu}",'
            f'modelName="{MODEL}",Hostname="node-{node:04d}",{scrape}')
    return text + (f',DCGM_FI_DRIVER_VERSION="{DRIVER}"' if dcgm_only else "")


def scrape_offset(node: int, step: int) -> int:
    """Where in each ``step`` a node's scrapes fall (s): spread over the step, as Prometheus spreads its targets'
    scrapes (by a hash of each target), not all at one instant (a read of the last few seconds then holds a few
    nodes, not all or none)."""
    return node * 7919 % step


def write_block(path: Path, plan: dict, times: list[int], seed: int, step: int | None = None,
                limit: int | None = None) -> int:
    """The OpenMetrics text of every GPU's series at ``times`` (one block's span): returns the samples written.
    Each family's lines together under its ``# TYPE`` (gathered in a file per family, then joined), each series'
    samples together and in time order, ``# EOF`` last. With ``step``, each node's samples are stamped its
    ``scrape_offset`` later; those it would stamp at ``limit`` or later (the next block's) are not written."""
    written = 0
    families = tuple(dict.fromkeys(GPUTOP_SERIES + DCGM_SERIES)) + ("gputop_bottleneck", "gputop_verdict_confidence")
    parts = {name: open(path.with_name(f"{path.name}.{name}"), "w", buffering=1 << 20) for name in families}
    try:
        for node, node_plan in plan.items():
            offset = scrape_offset(node, step) if step else 0
            stamps = [str(t + offset) for t in times if limit is None or t + offset < limit]
            dcgm_only = node % 4 == 3
            names = DCGM_SERIES if dcgm_only else GPUTOP_SERIES
            for gpu in range(GPUS_PER_NODE):
                rng = random.Random(seed * 1000003 + node * 64 + gpu + times[0])
                states = gpu_states(node_plan, times, lagging=(node * 8 + gpu) % 16 == 5, node=node)[:len(stamps)]
                base = gpu_labels(node, gpu, dcgm_only)
                runs, lo = [], 0  # stretches of one (job, class, subclass)
                for i in range(1, len(states) + 1):
                    if i == len(states) or states[i] != states[lo]:
                        runs.append((lo, i, states[lo]))
                        lo = i
                series: dict[str, dict[str, list[str]]] = {name: {} for name in families}  # family -> head -> lines
                for lo, hi, (job, cls, sub) in runs:
                    labels = base + (f',hpc_job="{job}"' if job else "")
                    for name in names:
                        head = f"{name}{{{labels}}} "
                        series[name].setdefault(head, []).extend(
                            f"{head}{dcgm_values(name, (cls, sub), rng, k)} {stamps[k]}\n" for k in range(lo, hi))
                    if dcgm_only:
                        continue
                    for c in CLASSES:
                        head = f'gputop_bottleneck{{{labels},class="{c}"' + (
                            f',subclass="{sub}"' if c == cls and sub else "") + "} "
                        value = "1 " if c == cls else "0 "
                        series["gputop_bottleneck"].setdefault(head, []).extend(
                            head + value + stamps[k] + "\n" for k in range(lo, hi))
                    head = f'gputop_verdict_confidence{{{labels},class="{cls}"}} '
                    conf = f"{0.55 + 0.4 * rng.random():.2f} "
                    series["gputop_verdict_confidence"].setdefault(head, []).extend(
                        head + conf + stamps[k] + "\n" for k in range(lo, hi))
                for name, by_head in series.items():
                    for lines in by_head.values():
                        written += len(lines)
                        parts[name].writelines(lines)
        for f in parts.values():
            f.close()
        with open(path, "wb") as out:
            for name in families:
                out.write(f"# TYPE {name} gauge\n".encode())
                with open(parts[name].name, "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 22)
                Path(parts[name].name).unlink()  # the block's text on disk once, not twice (8,192 GPUs: ~13 GB)
            out.write(b"# EOF\n")
    finally:
        for f in parts.values():
            f.close()
            Path(f.name).unlink(missing_ok=True)
    return written


def backfill(out_dir: Path, gpus: int, start: int, end: int, step: int, work: Path, seed: int = 26) -> dict:
    """The fleet's history from ``start`` to ``end`` (exclusive) in Prometheus blocks under ``out_dir``: each 2 h
    block written as text, then backfilled by promtool while the next one is written."""
    nodes = gpus // GPUS_PER_NODE
    plan = schedule(nodes, start, end, seed)
    samples, gen_s = 0, 0.0
    first = start - start % BLOCK_S
    running: subprocess.Popen | None = None  # promtool on the last block while the next one is written
    try:
        for k, b0 in enumerate(range(first, end, BLOCK_S)):
            times = [t for t in range(max(start, b0), min(end, b0 + BLOCK_S)) if (t - start) % step == 0]
            if not times:
                continue
            text = work / f"block{k % 2}.om"
            t0 = time.perf_counter()
            samples += write_block(text, plan, times, seed, step, b0 + BLOCK_S)
            gen_s += time.perf_counter() - t0
            _wait(running)
            running = subprocess.Popen(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text),
                                        str(out_dir)], stdout=subprocess.DEVNULL)
        _wait(running)
        running = None
    finally:
        stop(running)
    for text in work.glob("block*.om"):
        text.unlink()
    return {"samples": samples, "generate_s": gen_s}


def _wait(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.wait() != 0:
        raise RuntimeError(f"{' '.join(proc.args)} failed ({proc.returncode})")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
