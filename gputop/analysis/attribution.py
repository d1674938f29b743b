"""What a profiler window says: where the window's time went, by kernel category and by op, and what to do.

Input: one window as the profile loader wrote it (gputop/runner/profile_loader/sitecustomize.py):
``wall_s``, ``gpu_busy_s`` (None without CUDA), ``steps`` (optimizer steps in the window), ``kernels``
[{name, count, device_us}] and ``ops`` [{name, count, self_cpu_us, cpu_us, device_us}] (torch.profiler's key
averages, microseconds), ``kernel_spans`` (each kernel's stream, start, end, launch: HTA's idle breakdown,
:mod:`gputop.analysis.idle`). Output (:func:`attribute`): the ``attribution`` window of the run document.

Categories, by kernel (or op) name, first rule that matches. The first two follow HolisticTraceAnalysis
(facebookresearch/HolisticTraceAnalysis, hta/utils/utils.py ``get_kernel_type``: a name with "nccl" is
COMMUNICATION, one with "Memcpy"/"Memset" is MEMORY, the rest COMPUTATION); the computation kernels are split
further here, GEMM/conv by the corpus' rule (bench/gpu/corpus/_corpus.py ``GEMM``), the rest by the words
PyTorch's, cuDNN's and Triton's kernel names carry (``triton_poi``: pointwise, ``triton_red``/``triton_per``:
reductions, ``triton_tem``: a GEMM template), and for CUPTI windows of programs without torch CuPy's
(``cupy_sum``: a reduction, any other ``cupy_<ufunc>__<types>``: elementwise) and XLA's (``loop_*_fusion``,
``wrapped_*``: elementwise; ``input_reduce_fusion``: a reduction; ``gemm_fusion``/cuBLAS: GEMM).

On a machine without CUDA the window has host ops only: the breakdown is then of their self CPU time, and
it suggests no GPU class (:func:`window_finding` returns None).

Pure: no torch, no NVML.
"""

from __future__ import annotations

import re

from gputop.analysis.idle import window_idle
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import Cls

CATEGORIES = ("communication", "memcpy/memset", "optimizer", "attention", "GEMM/conv", "normalisation",
              "reduction", "elementwise", "other")
_RULES = [
    ("communication", re.compile(r"nccl|gloo|c10d::|allreduce|all_reduce|allgather|reduce_scatter", re.I)),
    ("memcpy/memset", re.compile(r"Memcpy|Memset")),
    ("optimizer", re.compile(r"multi_tensor_apply|fused_adam|_fused_sgd|optimizer|adamw?_|_foreach_|lamb_|"
                             r"\bsgd\b|Optimizer\.", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|scaled_dot_product|_efficient_attention", re.I)),
    ("GEMM/conv", re.compile(r"gemm|xmma|cutlass|wgmma|matmul|cublas|conv(?!ert)|implicit_|dgrad|wgrad|fprop|"
                             r"sm\d\d_|nvjet|gemv|triton_tem|aten::(?:mm|addmm|bmm|baddbmm|linear|_?convolution|"
                             r"mkldnn_\w+)$", re.I)),
    ("normalisation", re.compile(r"norm|layer_nor|group_nor|rms_nor|softmax", re.I)),
    ("reduction", re.compile(r"reduce|reduction|triton_red|triton_per|cupy_(?:nan)?(?:sum|prod|max|min|argmax|argmin|"
                             r"mean|var|std|all|any|count_nonzero)(?:_|$)|aten::(?:sum|mean|max|min|amax|amin|argmax|"
                             r"argmin|cumsum|prod|var|std|norm|topk|sort)$", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized_|CatArray|unrolled_|triton_poi|pointwise|fill_kernel|copy_kernel|"
                               r"^cupy_|^loop_\w*fusion|^wrapped_|"
                               r"index_(?:elementwise|put)|cat_|aten::(?:add|sub|mul|div|relu|gelu|silu|sigmoid|tanh|"
                               r"exp|log|pow|sqrt|rsqrt|neg|abs|clamp|where|copy_|fill_|zero_|add_|mul_|div_|sub_|"
                               r"addcmul_|addcdiv_|lerp_|threshold_backward|gelu_backward|silu_backward|"
                               r"sigmoid_backward|tanh_backward|dropout|native_dropout|masked_fill_?|lt|gt|eq|ne|"
                               r"le|ge|cat|to|_to_copy|square|reciprocal|sign)$", re.I)),
]
MEMORY_HEAVY = ("elementwise", "normalisation", "reduction", "optimizer")
COMPUTE_HEAVY = ("GEMM/conv", "attention")
TOP = 10
IDLE_SHARE = 0.5  # the GPU idle this much of the window: it waits on the host
HEAVY_SHARE = 0.5  # a family of categories this much of the kernel time names the class
COMMS_SHARE = 0.3
COPY_SHARE = 0.3
COMMS_REFUTED_SHARE = 0.10  # NCCL's kernels under this share of a window's kernel time refute comms-bound
SMALL_KERNEL_US = 20.0  # kernels this short on average, many a step: launch overhead
MANY_KERNELS_PER_STEP = 200
_DATALOADER = re.compile(r"DataLoader", re.I)


def category(name: str) -> str:
    """The category of a kernel or op name (see the module's rules)."""
    for cat, rule in _RULES:
        if rule.search(name):
            return cat
    return "other"


def category_table(rows) -> list[dict]:
    """``(category, us, count)`` rows summed by category, the largest first, each with its share of the time: a
    window's ``categories``, and a job's over its ranks (:func:`job_categories`)."""
    cats: dict[str, list] = {}
    for cat, us, count in rows:
        c = cats.setdefault(cat, [0.0, 0])
        c[0] += us
        c[1] += count
    total = sum(us for us, _n in cats.values())
    return [{"category": c, "us": round(us, 3), "share": round(us / total, 4) if total else 0.0, "count": n}
            for c, (us, n) in sorted(cats.items(), key=lambda kv: -kv[1][0]) if us > 0 or n]


def job_categories(per_process: list[dict]) -> list[dict]:
    """Kernel time by category over all of a job's ranks in one window. The stable figure: a rank's own NCCL share
    says whether it was late (DDP ResNet-50 on 2 H100s: 22% and 61%, then 66% and 6%), the job's stays where the
    program's own profile puts it (48% and 50% against 53%)."""
    return category_table((c["category"], c["us"], c["count"]) for p in per_process if p.get("basis") == "kernels"
                          for c in p.get("categories") or [])


def attribute(win: dict) -> dict:
    """The window's breakdown: busy/idle shares, categories, top kernels and ops, kernels per step, finding."""
    kernels, ops = win.get("kernels") or [], win.get("ops") or []
    wall = float(win.get("wall_s") or 0.0)
    busy = win.get("gpu_busy_s")
    on_gpu = bool(kernels)
    basis = "kernels" if on_gpu else "ops"
    items = ([(k["name"], k["count"], k["device_us"]) for k in kernels] if on_gpu
             else [(o["name"], o["count"], o["self_cpu_us"]) for o in ops])
    total = sum(us for _n, _c, us in items)
    categories = category_table((category(name), us, count) for name, count, us in items)
    top_k = sorted(kernels, key=lambda k: -k["device_us"])[:TOP]
    op_time = "device_us" if on_gpu else "self_cpu_us"
    top_o = sorted((o for o in ops if o[op_time] > 0), key=lambda o: -o[op_time])[:TOP]
    steps = win.get("steps") or None
    n_kernels = sum(k["count"] for k in kernels)
    out = {
        "started_at": win.get("started_at"),  # the window's start, Unix time (the program's clock)
        "stop_s": win.get("stop_s"),  # the program's thread held by the profiler's stop, seconds
        "summary_s": win.get("summary_s"),  # the loader's thread summing the events up (the program runs on)
        "summed_from": win.get("summed_from"),  # "raw events" or "key_averages"
        "ended_by": win.get("ended_by"),  # why it ended before its seconds or steps: the program's own profiler
        "wall_s": round(wall, 4),
        "gpu_busy_s": busy,
        "gpu_busy_share": round(min(1.0, busy / wall), 4) if busy is not None and wall > 0 else None,
        "gpu_idle_share": round(max(0.0, 1 - busy / wall), 4) if busy is not None and wall > 0 else None,
        "basis": basis,
        "total_us": round(total, 3),
        "categories": categories,
        "top_kernels": [{"name": k["name"], "count": k["count"], "total_us": round(k["device_us"], 3),
                         "mean_us": round(k["device_us"] / k["count"], 3) if k["count"] else None,
                         "category": category(k["name"])} for k in top_k],
        "top_ops": [{"name": o["name"], "count": o["count"], "self_cpu_us": round(o["self_cpu_us"], 3),
                     "device_us": round(o["device_us"], 3),
                     "mean_us": round(o[op_time] / o["count"], 3) if o["count"] else None,
                     "category": category(o["name"])} for o in top_o],
        "kernel_count": n_kernels,
        "mean_kernel_us": round(sum(k["device_us"] for k in kernels) / n_kernels, 3) if n_kernels else None,
        "steps": steps,
        "step_kind": win.get("step_kind") if steps else None,  # "optimizer step", or "forward pass" (inference)
        "kernels_per_step": round(n_kernels / steps, 1) if steps and n_kernels else None,
        "ops_per_step": round(sum(o["count"] for o in ops) / steps, 1) if steps and ops else None,
    }
    out["idle"] = window_idle(win, out["gpu_idle_share"])
    out["finding"] = window_finding(out)
    out["headline"] = headline(out)
    return out


def _share(a: dict, names) -> float:
    return sum(c["share"] for c in a["categories"] if c["category"] in names)


def window_finding(a: dict, trust_idle: bool = True) -> dict | None:
    """What a GPU window says about the bottleneck: {class, text (naming the ops/categories), advice}; None for a
    host-only window or one without a clear majority. ``trust_idle`` False: the window's idle share is left
    out (the profiler's own slowing of the host made it, :func:`discount_profiler_idle`)."""
    if a["basis"] != "kernels":
        return None
    idle = a.get("gpu_idle_share")
    waits = trust_idle and idle is not None and idle >= IDLE_SHARE
    feeder = next((o["name"] for o in a["top_ops"] if _DATALOADER.search(o["name"])), None)
    split = a.get("idle") or {}
    hta = (f" (host wait {100 * split['shares']['host_wait']:.0f}% of the idle time between kernels)"
           if split.get("shares") else "")
    if waits and feeder:
        return {"class": Cls.INPUT_STARVED,
                "text": f"the GPU idles {100 * idle:.0f}% of the profiled window waiting on the host{hta}: "
                        f"the DataLoader ({feeder})", "advice": "more DataLoader workers, pin_memory and prefetching"}
    # many tiny kernels a step: the host's time between them is their launches (GPT-2 decoding on an H100: kernels
    # of 2.9 us on average, the GPU idle 93-94% of the window, all of it host wait), not other host work
    kps, mean = a.get("kernels_per_step"), a.get("mean_kernel_us")
    if kps and mean is not None and kps >= MANY_KERNELS_PER_STEP and mean < SMALL_KERNEL_US:
        kind = "forward pass (a token when decoding)" if a.get("step_kind") == "forward pass" else "step"
        gaps = f", the GPU idle {100 * idle:.0f}% of the window between them" if idle is not None else ""
        return {"class": Cls.LATENCY_BOUND,
                "text": f"{kps:.0f} kernels a {kind}, {mean:.1f} us each on average{gaps}",
                "advice": "CUDA graphs / torch.compile(mode='reduce-overhead') launch them as one"}
    if waits:
        return {"class": Cls.HOST_BOUND,
                "text": f"the GPU idles {100 * idle:.0f}% of the profiled window waiting on the host{hta}: "
                        "the host code between kernels",
                "advice": "move the host work off the step's path (CUDA graphs, torch.compile, async input)"}
    comms = _share(a, ("communication",))
    if comms >= COMMS_SHARE:
        return {"class": Cls.COMMS_BOUND, "text": f"{100 * comms:.0f}% of kernel time in NCCL communication kernels",
                "advice": "overlap the collectives with compute (DDP buckets, FSDP prefetch) or send less"}
    copies = _share(a, ("memcpy/memset",))
    if copies >= COPY_SHARE:
        return {"class": Cls.PCIE_BOUND, "text": f"{100 * copies:.0f}% of kernel time in memcpy/memset",
                "advice": "keep tensors on the GPU; pinned memory and non_blocking copies for what must move"}
    heavy = _share(a, MEMORY_HEAVY)
    if heavy >= HEAVY_SHARE:
        names = [c["category"] for c in a["categories"] if c["category"] in MEMORY_HEAVY and c["share"] >= 0.05]
        return {"class": Cls.MEMORY_BOUND,
                "text": f"{100 * heavy:.0f}% of kernel time in {'/'.join(names) or 'elementwise'} kernels",
                "advice": "torch.compile fuses them (fewer trips through DRAM); a fused optimizer (fused=True)"}
    gemm = _share(a, COMPUTE_HEAVY)
    if gemm >= HEAVY_SHARE:
        return {"class": Cls.COMPUTE_BOUND, "text": f"{100 * gemm:.0f}% of kernel time in GEMM/conv/attention kernels",
                "advice": "bf16 or TF32 on the tensor cores; larger batches keep them fed"}
    return None


def headline(a: dict) -> str:
    """One line for people: the finding, or where the window's time went."""
    f = a.get("finding")
    if f:
        return f"{f['text']}: {f['advice']}"
    what = "kernel time" if a["basis"] == "kernels" else "host op time (no GPU kernels in the window)"
    top = ", ".join(f"{c['category']} {100 * c['share']:.0f}%" for c in a["categories"][:3])
    return f"{what}: {top}" if top else f"no {what.split(' (')[0]} recorded in the window"


BUSY_OUTSIDE_UTIL_PCT = 70.0  # NVML's duty cycle outside the windows at or over this: the GPU was not waiting


def discount_profiler_idle(a: dict, verdict: Verdict | None) -> dict:
    """A window whose finding is the GPU idling on the host while NVML, outside the windows, saw kernels active
    ``BUSY_OUTSIDE_UTIL_PCT`` or more of the time: the idle time is the profiler's (it slows the program's host
    side 2-4x: GPT-2 training on an H100 ran at a quarter of its pace in a window and "idled 59% on the host",
    while its run outside the window is memory-bound with kernels active 95%). The finding is made again without
    the idle share, and the window says why."""
    f = a.get("finding")
    util = verdict.evidence.get("util_gpu_pct") if verdict is not None else None
    if not f or f["class"] not in (Cls.HOST_BOUND, Cls.INPUT_STARVED) or util is None or util < BUSY_OUTSIDE_UTIL_PCT:
        return a
    out = dict(a, finding=window_finding(a, trust_idle=False))
    out["idle_discounted"] = (f"the window's idle time ({100 * (a.get('gpu_idle_share') or 0):.0f}%) is the "
                              f"profiler's: outside the windows NVML saw kernels active {util:.0f}% of the time")
    return out


def apply_window(verdict: Verdict | None, a: dict | None) -> Verdict | None:
    """The run's verdict with a window's finding (a new :class:`Verdict`): the advice names the ops; a finding of the
    same class raises the confidence, another class is added to ``mixed`` and lowers it. No finding: the verdict
    unchanged. A comms-bound verdict whose window shows NCCL's kernels under ``COMMS_REFUTED_SHARE`` of the kernel
    time, on its own rank and on every rank of its job (``job_comms_share``, :func:`window_for_gpu`), is refuted
    (:func:`_refuted`)."""
    f = a.get("finding") if a else None
    if (verdict and a and verdict.cls == Cls.COMMS_BOUND and a.get("basis") == "kernels"
            and a.get("kernel_count") and _share(a, ("communication",)) < COMMS_REFUTED_SHARE
            and (a.get("job_comms_share") or 0.0) < COMMS_REFUTED_SHARE):
        return _refuted(verdict, a, f)
    if not verdict or not f:
        return verdict
    conf = float(verdict.confidence or 0.0)
    same = f["class"] == verdict.cls
    return verdict.copy(
        advice=f"{f['text']}: {f['advice']}. " + (verdict.advice or ""),
        evidence_text=(verdict.evidence_text or "") + f"; the profiler window: {f['text']}",
        confidence=round(min(0.99, conf + 0.1), 2) if same else round(conf * 0.8, 2),
        mixed=list(verdict.mixed) + ([f["class"]] if not same and f["class"] not in verdict.mixed else []),
        notes=list(verdict.notes) + [f"profiler window: {f['text']}"])


def _refuted(verdict: Verdict, a: dict, f: dict | None) -> Verdict:
    """A comms-bound verdict the window contradicts: a GPU that waits in collectives spends its kernel time in NCCL's
    kernels (it waits inside them), and this one's window shows them under ``COMMS_REFUTED_SHARE``. NVML and GPM
    cannot tell NCCL's resident kernels from the step's own (Lightning's DDP on 2 H100s read comms-bound
    (collectives) while torch.profiler put NCCL at 2% of its kernel time: tests/data/traces/heldout_multi_h100x2).
    The window's finding takes the verdict's place (without one the verdict stays, unconfident), comms in ``mixed``."""
    comms = _share(a, ("communication",))
    text = f"the profiler window: NCCL's kernels {100 * comms:.0f}% of kernel time, so not waiting in collectives"
    mixed = [Cls.COMMS_BOUND] + [c for c in verdict.mixed if c != Cls.COMMS_BOUND]
    conf = float(verdict.confidence or 0.0)
    changes = {"mixed": mixed, "notes": list(verdict.notes) + [text],
               "evidence_text": (verdict.evidence_text or "") + f"; {text}", "confidence": round(conf * 0.5, 2)}
    if f and f["class"] != Cls.COMMS_BOUND:
        changes.update({"cls": f["class"], "subclass": None, "confidence": round(max(0.5, min(0.8, conf)), 2),
                        "advice": f"{f['text']}: {f['advice']}",
                        "evidence_text": changes["evidence_text"] + f"; {f['text']}",
                        "mixed": [c for c in mixed if c != f["class"]]})
    return verdict.copy(**changes)


def window_for_gpu(windows: list[dict], pids: set[int]) -> dict | None:
    """The last answered window of a process that held this GPU (``pids``: those NVML listed on it): each of a
    job's GPUs judged with its own rank's window (``per_process``), else the window's chosen process's. With
    ``job_comms_share``: NCCL's largest share of kernel time over the job's ranks in that window. A rank's own
    share says which rank was late, not whether the job waits in collectives: a late rank's NCCL kernels end as
    soon as they start, its peers' wait in theirs (DDP ResNet-50 on 2 H100s, all-reduce after backward: the same
    rank read 22% in one window and 66% in the next, its peer 61% and 6%)."""
    for w in reversed(windows):
        if w.get("status") != "ok":
            continue
        ranks = [p for p in w.get("per_process") or [w] if p.get("basis") == "kernels" and p.get("kernel_count")]
        for p in ranks:
            if p.get("pid") in pids:
                return {**p, "job_comms_share": max(_share(q, ("communication",)) for q in ranks)}
    return None

