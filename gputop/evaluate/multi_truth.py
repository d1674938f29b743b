"""The multi-GPU corpus's ground truth (bench/gpu/corpus_multi_gpu.sh), as what each GPU's verdict should be, and the
judgement of a run document (``gputop --replay TRACE --json``'s) against it. Used by the calibration (the
confusion table per machine in docs/diagnosis.md) and tests/test_multi_gpu_*.py.

    python -m gputop.evaluate.multi_truth [DIR]      # the confusion table of DIR (default: the 4-H100 corpus)

The truth comes from the truth files (torch.profiler's kernel-time shares on rank 0, or the construction), never
from gputop. Rank r of a torchrun job runs on GPU r (LOCAL_RANK r, no CUDA_VISIBLE_DEVICES: the trace's "on GPU r"
marks agree). The rules, one a kind of case (docs/diagnosis.md says why):

* profiled (``nccl_share``): NCCL's kernels at least half of the kernel time -> comms-bound on every GPU. Kernel
  time overlaps: with DDP's overlap on (case ddp_resnet50_overlap1) NCCL's kernels run beside backward's, so their
  share overstates the step's wait; there the GPU's own class (compute- or memory-bound) with comms-bound in
  ``mixed`` is right too. Under half: the GPU's own work, not communication: compute-bound when GEMM/conv kernels
  are at least half of the kernel time, else compute- or memory-bound (the rest is elementwise, copy and
  normalisation kernels: memory-bound kernels by kind; the bench labelled FSDP GPT-2 "compute-bound").
* straggler (construction): the slow rank's GPU compute-bound and named the straggler (more work); every other
  GPU comms-bound, waiting for it.
* stalled collective (construction): every waiting rank's GPU stalled (subclass collective), its stall named
  within ``STALL_NAMED_S`` of ``stall_from``, the leaving rank's GPU named as left (exit) or idle (idle) by the
  waiting GPUs, and itself the culprit (issue 36: subclass left or outside).
  ``stall_from`` is seconds since the rank's process started; the trace's clock counts from its "started" mark
  (gputop started torchrun, which starts the ranks after it): the rank's clock runs behind the trace's, so a
  verdict at trace time t is ``t - stall_from`` or less after the stall.
* JAX psum (construction): 4 bf16 8192^2 matmuls a step beside a psum of 256 MiB: 4.4 TFLOP a step, 4.4 ms at the
  H100's published 989 TFLOP/s dense BF16, 75% or more of the 5.9 ms step -> compute-bound.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import sys
from pathlib import Path

from gputop.headless.replay import replay_document

ROOT = Path(__file__).resolve().parents[2]  # the checkout: its tests/data/traces
CORPUS = ROOT / "tests" / "data" / "traces" / "corpus_multi_h100x4"
STALL_NAMED_S = 10.0
H100_BF16_DENSE_FLOPS = 989e12  # NVIDIA H100 SXM datasheet, dense (no sparsity)
JAX_MATMULS, JAX_N = 4, 8192  # bench/gpu/corpus_multi/jax_psum.py's defaults, as the driver ran it


def cases(directory: str | Path = CORPUS) -> list[str]:
    return sorted(os.path.basename(p)[: -len(".jsonl.gz")] for p in glob.glob(os.path.join(directory, "*.jsonl.gz")))


def truths(directory: str | Path, case: str) -> dict[int, dict]:
    out = {}
    for p in glob.glob(os.path.join(directory, f"{case}_truth_rank*.json")):
        t = json.loads(Path(p).read_text())
        out[t["rank"]] = t
    return out


ANNOTATION = re.compile(r"^nccl:|#|^DistributedDataParallel\.|^FullyShardedDataParallel|^FSDP::|^ProfilerStep|^## ")


def clean_shares(r0: dict) -> tuple[float, float]:
    """(NCCL share, GEMM share) of the kernel time without the record_function ranges that torch mirrors on the
    GPU ("nccl:all_reduce", "Optimizer.step#SGD.step", "DistributedDataParallel.forward": spans over kernels, not
    kernels). The truths recorded before _multi.shares left them out counted them: they are taken out here from the
    truth's top kernels (the larger ones: those are among the top 8)."""
    nccl, gemm = r0["nccl_share"], r0.get("gemm_share") or 0.0
    total = (r0.get("kernel_us_per_step") or 0.0) * (r0.get("profiled_steps") or 0)
    if not total:
        return nccl, gemm
    notes = [(name, us) for name, us in r0.get("top_kernels") or [] if ANNOTATION.search(name)]
    out = sum(us for _, us in notes)
    out_nccl = sum(us for name, us in notes if "nccl" in name.lower())
    kept = total - out
    return (max(0.0, nccl * total - out_nccl) / kept, gemm * total / kept) if kept > 0 else (nccl, gemm)


HOST_BUSY = 0.6  # as the single-GPU corpus labels (corpus_truth.label_from_profile)


def kernel_busy(r0: dict) -> float | None:
    """Kernel time a step (without the GPU-side annotations) over the timed loop's step time: under HOST_BUSY
    the GPU runs nothing most of the step. Kernels overlap (NCCL's beside compute), so this can pass 1."""
    per_step, step = r0.get("kernel_us_per_step"), r0.get("step_s")
    if not per_step or not step:
        return None
    total = per_step * (r0.get("profiled_steps") or 1)
    out = sum(us for name, us in r0.get("top_kernels") or [] if ANNOTATION.search(name))
    return (total - out) / (r0.get("profiled_steps") or 1) / 1e6 / step


def expected(directory: str | Path, case: str) -> dict:
    """{"gpus": {gpu: (accepted classes, rule)}, "stall": {...} or None, "straggler": gpu or None} of a case."""
    tr = truths(directory, case)
    r0 = tr.get(0, {})
    world = r0.get("devices") or len(tr)
    out: dict = {"gpus": {}, "stall": None, "straggler": None}
    if r0.get("label") == "stalled collective":
        out["stall"] = {"from": min(t["stall_from"] for t in tr.values()), "leaver": r0["leaver"], "how": r0["how"],
                        "waiting": r0["waiting"]}
        for g in r0["waiting"]:
            out["gpus"][g] = ({"stalled"}, "waits in a collective a rank left (construction)")
        out["gpus"][r0["leaver"]] = ({"culprit"}, f"its rank {'exits' if r0['how'] == 'exit' else 'runs nothing'} "
                                     "while the others wait (construction)")
    elif r0.get("case") == "host_straggler":  # held out: the slow rank's host keeps its GPU idle
        slow = r0["slow_rank"]
        out["straggler"] = slow
        for g in tr:
            out["gpus"][g] = (({"input-starved", "host-bound"}, f"the straggler: {tr[slow]['host_ms_median']:.0f} ms "
                               "of host work a step (construction)") if g == slow
                              else ({"comms-bound"}, "waits for the straggler (construction)"))
    elif r0.get("case") == "straggler":
        slow = r0["slow_rank"]
        out["straggler"] = slow
        for g in tr:
            out["gpus"][g] = (({"compute-bound"}, f"the straggler: {r0['factor']}x the matmuls (construction)")
                              if g == slow else ({"comms-bound"}, "waits for the straggler (construction)"))
    elif r0.get("case") == "jax_psum":
        share = JAX_MATMULS * 2 * JAX_N ** 3 / H100_BF16_DENSE_FLOPS / r0["step_s"]
        for g in range(world):
            out["gpus"][g] = ({"compute-bound"}, f"matmuls >= {share:.0%} of the step at peak (construction)")
    elif r0.get("nccl_share") is not None:
        for g in range(world):  # each GPU by its own rank's profile where the rank kept one (truths since 2026-11-26
            # evening: a rank's NCCL share is its own waiting; DDP's ranks differ: 4% and 78% on 2 H100s), else rank 0's
            r = tr[g] if tr.get(g, {}).get("nccl_share") is not None else r0
            out["gpus"][g] = profiled_rule(r, own=r is not r0 or g == 0)
    return out


def profiled_rule(r: dict, own: bool = True) -> tuple[set, str]:
    """(accepted classes, rule) of a GPU whose truth is the torch.profiler breakdown ``r`` (its own rank's, or rank
    0's for a GPU whose rank kept none: ``own`` False says so in the rule)."""
    nccl, gemm = clean_shares(r)
    busy = kernel_busy(r)
    whose = "" if own else ", rank 0's"
    if busy is not None and busy < HOST_BUSY:
        want = {"host-bound", "input-starved"}
        rule = f"kernels {busy:.0%} of the step (torch.profiler{whose}, NCCL {nccl:.0%} of them): the GPU waits on the host"
    elif nccl >= 0.5:
        overlap = {"compute-bound+comms", "memory-bound+comms"} if "overlap1" in r["case"] else set()
        want = {"comms-bound"} | overlap
        rule = f"NCCL {nccl:.0%} of kernel time (torch.profiler{whose})"
    elif gemm >= 0.5:
        want, rule = {"compute-bound"}, f"GEMM {gemm:.0%}, NCCL {nccl:.0%} of kernel time (torch.profiler{whose})"
    else:
        want = {"compute-bound", "memory-bound"}
        rule = f"NCCL {nccl:.0%}, GEMM {gemm:.0%}, the rest elementwise/copies (torch.profiler{whose})"
    return want, rule


def judge(doc: dict, want: dict) -> dict:
    """{gpu: (right, what gputop said)} of a run document against :func:`expected`, and the stall's timing."""
    by = {g["index"]: g for g in doc["gpus"]}
    out: dict = {"gpus": {}, "stall_named_after_s": None, "problems": []}
    for gpu, (accept, _) in want["gpus"].items():
        v = (by.get(gpu) or {}).get("verdict") or {}
        cls, mixed, ev, job = v.get("class"), v.get("mixed") or [], v.get("evidence") or {}, v.get("job") or {}
        right = cls in accept or (f"{cls}+comms" in accept and "comms-bound" in mixed)
        if want["straggler"] is not None:
            if gpu == want["straggler"]:
                right = right and job.get("straggler") == gpu and bool(job.get("why"))
            else:
                right = right and job.get("waits_for") == [want["straggler"]]
        if want["stall"] is not None and cls == "culprit":
            right = right and v.get("subclass") == ("left" if want["stall"]["how"] == "exit" else "outside")
        if want["stall"] is not None and cls == "stalled":
            st = want["stall"]
            named = ev.get("stalled_since_s")
            key = "left" if st["how"] == "exit" else "idle"
            right = right and v.get("subclass") == "collective" and st["leaver"] in (job.get(key) or [])
            if named is not None:
                after = named - st["from"]
                out["stall_named_after_s"] = max(out["stall_named_after_s"] or after, after)
                right = right and after <= STALL_NAMED_S
        out["gpus"][gpu] = (right, f"{cls} ({v.get('subclass')}) {v.get('confidence')}", v.get("confidence"))
    return out


def by_gpu(doc: dict, gpu: int) -> dict:
    return next((g for g in doc["gpus"] if g["index"] == gpu), {})


def confusion(directory: str | Path = CORPUS) -> tuple[list[str], list[dict]]:
    """The table (markdown lines) of a corpus's cases, and the judged GPUs (for the calibration)."""
    lines = ["| case | truth (rule) | GPU | gputop | right |", "|---|---|---|---|---|"]
    judged = []
    for case in cases(directory):
        want = expected(directory, case)
        doc = replay_document(os.path.join(directory, case + ".jsonl.gz"))
        res = judge(doc, want)
        for gpu, (right, said, conf) in sorted(res["gpus"].items()):
            accept, rule = want["gpus"][gpu]
            lines.append(f"| {case} | {' / '.join(sorted(accept))} ({rule}) | {gpu} | {said} | "
                         f"{'yes' if right else '**no**'} |")
            judged.append({"name": f"{case} GPU {gpu}", "right": right, "conf": conf, "case": case})
        if want["stall"] is not None:
            st = want["stall"]
            key = "left" if st["how"] == "exit" else "idle"
            named = all(st["leaver"] in (((by_gpu(doc, g).get("verdict") or {}).get("job") or {}).get(key) or [])
                        for g in st["waiting"])
            lines.append(f"| {case} | {key} (rank {st['leaver']}, construction) | "
                         f"{st['leaver']} | named {key} by the waiting GPUs: {'yes' if named else 'no'} | "
                         f"{'yes' if named else '**no**'} |")
        if res["stall_named_after_s"] is not None:
            lines.append(f"| {case} | named within {STALL_NAMED_S:.0f} s of the stall | | "
                         f"{res['stall_named_after_s']:.1f} s after stall_from (trace clock) | "
                         f"{'yes' if res['stall_named_after_s'] <= STALL_NAMED_S else '**no**'} |")
    return lines, judged


def recorded_by(directory: str | Path) -> str:
    """The gputop build whose documents were recorded with a folder's traces (``CASE.gputop-BUILD.json.gz``)."""
    names = glob.glob(os.path.join(directory, "*.gputop-*.json.gz"))
    return os.path.basename(names[0]).split(".gputop-")[1][: -len(".json.gz")] if names else ""


def before_after(directory: str | Path = CORPUS) -> list[str]:
    """The confusion of the machine's corpus, case by case: what the gputop that recorded it said (the documents
    recorded with the traces, ``CASE.gputop-BUILD.json.gz``) and what it says now, each GPU judged by :func:`judge`."""
    build = recorded_by(directory)
    def said(doc, res):
        names = [res["gpus"][g][1].split(" ")[0] + ("" if res["gpus"][g][0] else " (wrong)")
                 for g in sorted(res["gpus"])]
        return ", ".join(f"{n} x{names.count(n)}" if names.count(n) > 1 else n for n in dict.fromkeys(names))

    lines = [f"| case | truth | {build} (before) | now | right before | right now |", "|---|---|---|---|---|---|"]
    tot = [0, 0, 0]
    for case in cases(directory):
        want = expected(directory, case)
        old = json.loads(gzip.open(os.path.join(directory, f"{case}.gputop-{build}.json.gz")).read())
        new = replay_document(os.path.join(directory, case + ".jsonl.gz"))
        rb, rn = judge(old, want), judge(new, want)
        nb, nn = sum(r for r, _, _ in rb["gpus"].values()), sum(r for r, _, _ in rn["gpus"].values())
        truth = "; ".join(dict.fromkeys(" / ".join(sorted(a)) for a, _ in want["gpus"].values()))
        lines.append(f"| {case} | {truth} | {said(old, rb)} | {said(new, rn)} | {nb}/{len(want['gpus'])} | "
                     f"{nn}/{len(want['gpus'])} |")
        tot = [tot[0] + nb, tot[1] + nn, tot[2] + len(want["gpus"])]
    lines.append(f"| **all** | | | | **{tot[0]}/{tot[2]}** | **{tot[1]}/{tot[2]}** |")
    return lines


if __name__ == "__main__":
    table, got = confusion(sys.argv[1] if len(sys.argv) > 1 else CORPUS)
    print("\n".join(table))
    print(f"\n{sum(g['right'] for g in got)} of {len(got)} GPUs right")
