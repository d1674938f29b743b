"""The cudagraphs run's verdicts: each launch mode and each MLP step judged from what was measured, and the
run as a whole (:func:`analyze`, gputop runs it on the run document), and its tour sentence.
``workloads/cudagraphs.py`` runs the :data:`MODES` judged here.

A phase is latency-bound ("launch overhead") when launching costs more than the work launched; once the
launches are hidden (back to back, or a graph) the GPU's own work sets the pace: compute-bound in this
workload's sense (whether pipes, DRAM or too few blocks limit that work is for the phase's telemetry).
"""

from __future__ import annotations

from gputop.analysis.verdict import Verdict
from gputop.lessons.docs import (
    is_number, phase_points, phase_window, points_with, tele_numbers, tele_text, throttle_warnings)
from gputop.lessons.figures import Bars

# gputop --tour: what to look at while this workload runs
TOUR = "Time per kernel by launch mode: tiny kernels are launch-bound; one graph launch for many cuts it."

MODES = ["naive", "interleaved", "graph", "pipes"]
V100_REFERENCE_US = {"naive": 9.6, "interleaved": 3.8, "graph": 3.4}  # NVIDIA's published figures

LAUNCH_BOUND = 2.0  # per-kernel cost at least twice the kernel's own run time: overhead >= work
GRAPH_GAIN = 1.2  # an MLP step this much faster as a graph was paying launch overhead


def classify_kernel_mode(pt: dict) -> tuple[str, str, str]:
    """(class, subclass, advice) of one launch mode from its overhead ratio (per-kernel cost / run time)."""
    if pt["overhead_ratio"] >= LAUNCH_BOUND:
        return "latency-bound", "launch overhead", ("each kernel costs more to launch than to run; batch the "
                                                    "launches in a CUDA graph, fuse kernels, or give each kernel "
                                                    "more work")
    return "compute-bound", "launch overhead hidden", ("the GPU runs the kernels back to back; only less or fused "
                                                      "work goes faster now")


def classify_mlp(mode: str, speedup: float) -> tuple[str, str, str]:
    """(class, subclass, advice) of an MLP step, eager or graph, from what the graph replay gained."""
    if speedup < GRAPH_GAIN:
        sub = "launch overhead hidden" if mode == "eager" else "no graph gain"
        return "compute-bound", sub, "the step has enough work per kernel: graphs buy little here"
    advice = ("the eager step pays per-kernel launch cost: capture the step in a CUDA graph (torch.cuda.graph or "
              "torch.compile(mode='reduce-overhead'))")
    if mode == "eager":
        return "latency-bound", "launch overhead", advice
    return "compute-bound", "graph speedup", advice


def analyze(doc: dict) -> dict:
    by_phase = phase_points(doc)
    graphed = {q["layers"]: q for v in by_phase.values() for q in v  # the MLPs replayed as CUDA graphs
               if q.get("part") == "mlp" and q.get("mode") == "graph" and q.get("speedup_vs_eager") is not None}
    for ph in doc.get("phases") or []:
        got = by_phase.get(ph.get("name"))
        if not got:
            continue
        pt = got[-1]
        ph["verdict"] = None
        if pt.get("part") == "kernels" and pt.get("mode") == "kernel alone":
            cls, sub, advice = "compute-bound", "kernel alone", "the reference for the launch modes that follow"
            ev = {"kernel_us": pt["kernel_us"], "back_to_back_us": pt["back_to_back_us"]}
            text = (f"shortKernel runs {pt['kernel_us']:.2f} us on the GPU; queued back to back "
                    f"{pt['back_to_back_us']:.2f} us per kernel")
        elif pt.get("part") == "kernels" and pt.get("overhead_ratio") is not None:
            cls, sub, advice = classify_kernel_mode(pt)
            ev = {k: pt.get(k) for k in ("us_per_kernel", "kernel_us", "overhead_ratio", "overhead_us",
                                         "v100_reference_us")}
            text = (f"{pt['us_per_kernel']:.2f} us per kernel vs {pt['kernel_us']:.2f} us of kernel run time "
                    f"({pt['overhead_ratio']:.1f}x; overhead {pt['overhead_us']:.2f} us)")
            if pt.get("v100_reference_us"):
                text += f"; NVIDIA's V100 figure: {pt['v100_reference_us']} us"
        elif pt.get("part") == "mlp" and pt["layers"] in graphed:  # judged by what the graph replay gained
            speedup = graphed[pt["layers"]]["speedup_vs_eager"]
            cls, sub, advice = classify_mlp(pt["mode"], speedup)
            ev = {"step_ms": pt["step_ms"], "layers": pt["layers"], "batch": pt["batch"], "speedup_vs_eager": speedup}
            text = (f"{pt['step_ms']:.3f} ms per training step (X={pt['layers']}, batch {pt['batch']}); "
                    f"as a CUDA graph the step runs {speedup:.2f}x as fast as eager")
        else:  # skipped, not measured, or an eager step with no graph to compare (on the CPU)
            continue
        if tele_text(ph):
            ev.update(tele_numbers(ph))
            text += "; GPU " + tele_text(ph)
        ph["verdict"] = Verdict(cls, sub, None, ev, text, advice, **phase_window(ph)).to_dict()
    throttle_warnings(doc)
    pts = {(q.get("part"), q.get("mode")): q for v in by_phase.values() for q in v if not q.get("skipped")}
    naive = pts.get(("kernels", "naive"))
    if naive is None and not graphed:  # on the CPU: nothing was launched on a GPU, nothing to judge
        doc["verdict"] = None
        return doc
    ev, parts, notes = {}, [], []
    launch_bound = False
    if naive is not None:
        ev["kernel_us"] = naive["kernel_us"]
        ev.update({f"{m}_us_per_kernel": pts[("kernels", m)]["us_per_kernel"] for m in MODES if ("kernels", m) in pts})
        row = ", ".join(f"{m} {pts[('kernels', m)]['us_per_kernel']:.2f}" for m in MODES if ("kernels", m) in pts)
        parts.append(f"us per kernel: {row}; the kernel itself runs {naive['kernel_us']:.2f} us")
        notes.append(f"NVIDIA's V100 reference: {V100_REFERENCE_US['naive']} / {V100_REFERENCE_US['interleaved']} / "
                     f"{V100_REFERENCE_US['graph']} us per kernel (sync / back to back / graph)")
        launch_bound = (naive.get("overhead_ratio") or 0) >= LAUNCH_BOUND
    for x, q in sorted(graphed.items()):
        ev[f"mlp{x}_graph_step_ms"], ev[f"mlp{x}_speedup_vs_eager"] = q["step_ms"], q["speedup_vs_eager"]
        parts.append(f"'mlp X={x}' as a graph {q['step_ms']:.3f} ms per step, {q['speedup_vs_eager']:.2f}x eager")
    text = "; ".join(parts)
    if launch_bound or any(q["speedup_vs_eager"] >= GRAPH_GAIN for q in graphed.values()):
        advice = ("kernels shorter than their launch cost: capture repeated launch sequences in CUDA graphs, or fuse "
                  "the small kernels / give each kernel more work (larger batch)")
        doc["verdict"] = Verdict("latency-bound", "launch overhead", None, ev, text, advice, notes=notes).to_dict()
    else:
        advice = "launch overhead is hidden here; speed up the kernels themselves"
        doc["verdict"] = Verdict("compute-bound", "launch overhead hidden", None, ev, text, advice,
                                 notes=notes).to_dict()
    return doc


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Bars]:
    """Microseconds per kernel of each launch mode against the kernel's own run time; on a CPU, which has
    no graphs, the MLP's step time."""
    pts = points_with(doc, "us_per_kernel")
    if pts:
        kernel = next((q["kernel_us"] for q in pts if is_number(q.get("kernel_us"), True)), None)
        lines = [(f"the kernel alone {kernel:.3g} us", kernel)] if kernel else []
        return [Bars("us per kernel launched (shorter is better)", "us", [str(q["mode"]) for q in pts],
                     [("us per kernel", [q["us_per_kernel"] for q in pts])], lines)]
    pts = points_with(doc, "step_ms")
    if not pts:
        return []
    return [Bars("MLP step time (shorter is better)", "ms", [str(q["phase"]).replace("mlp ", "") for q in pts],
                 [("step ms", [q["step_ms"] for q in pts])])]
