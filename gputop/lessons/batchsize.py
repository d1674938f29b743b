"""The batchsize run's verdicts: each batch size judged by what the next larger batch buys (per doubling),
and the run as a whole, with the knee; and its tour sentence. gputop runs :func:`analyze` on the run document;
``workloads/batchsize.py`` reports :func:`knee` in its summary.
"""

from __future__ import annotations

import math

from gputop.analysis.verdict import Verdict
from gputop.format import si
from gputop.lessons.docs import (
    is_number, phase_points, phase_window, points_with, tele, tele_numbers, tele_text, throttle_warnings)
from gputop.lessons.figures import Curves

# gputop --tour: what to look at while this workload runs
TOUR = "samples/s doubles with the batch while launch-bound, levels off at the knee, until out of memory."

KNEE_FRACTION = 0.95  # the knee: the smallest batch within 95% of the best samples/s

# Each batch is judged by what the next larger batch buys (per doubling of the batch):
LATENCY_GAIN = 1.6  # >= 1.6x the samples/s per doubling: the step's fixed cost (launches) dominates here
SATURATED_GAIN = 1.1  # <= 1.1x per doubling: the GPU is full; a larger batch buys latency and memory only


def knee(points: list[dict], fraction: float = KNEE_FRACTION) -> dict | None:
    """The smallest batch whose samples/s is within ``fraction`` of the best."""
    ok = [q for q in points if not q.get("oom") and q.get("samples_per_s")]
    if not ok:
        return None
    best = max(ok, key=lambda q: q["samples_per_s"])
    first = min((q for q in ok if q["samples_per_s"] >= fraction * best["samples_per_s"]), key=lambda q: q["batch"])
    return {"knee_batch": first["batch"], "knee_samples_per_s": first["samples_per_s"],
            "best_batch": best["batch"], "best_samples_per_s": best["samples_per_s"], "fraction": fraction}


def scaling(ok: list[dict]) -> dict[int, float | None]:
    """batch -> the samples/s gain per doubling from this batch to the next one that fit; the largest
    batch gets the gain that led to it (None when only one batch fit)."""
    gains: dict[int, float | None] = {}
    for a, b in zip(ok, ok[1:]):
        doublings = max(1e-9, math.log2(b["batch"] / a["batch"]))
        gains[a["batch"]] = (b["samples_per_s"] / a["samples_per_s"]) ** (1 / doublings) if a["samples_per_s"] else None
    if ok:
        gains[ok[-1]["batch"]] = gains[ok[-2]["batch"]] if len(ok) > 1 else None
    return gains


def classify_point(pt: dict, best: float, gain: float | None = None) -> tuple[str, str, str]:
    """(class, subclass, advice) of one batch size."""
    if pt.get("oom"):
        return "memory-capacity", "oom", ("this batch does not fit: stay at or below the largest that fits (or use "
                                          "AMP, activation checkpointing, gradient accumulation)")
    eff = pt["samples_per_s"] / best if best else 0.0
    if gain is None:  # a single batch: judge it against the best
        gain = SATURATED_GAIN if eff >= 0.9 else LATENCY_GAIN if eff < 0.5 else (LATENCY_GAIN + SATURATED_GAIN) / 2
    if gain <= SATURATED_GAIN:
        return "compute-bound", "saturated", ("the GPU is saturated: a larger batch buys no throughput, only latency "
                                              "and memory")
    if gain >= LATENCY_GAIN:
        return "latency-bound", "launch", ("the fixed cost of a step (kernel launches, Python) dominates: raise the "
                                           "batch")
    return "latency-bound", "transition", "throughput still rises with the batch, more slowly"


def analyze(doc: dict) -> dict:
    by_phase = phase_points(doc)
    pts = sorted((q for v in by_phase.values() for q in v), key=lambda q: q.get("batch") or 0)
    ok = [q for q in pts if not q.get("oom")]
    best = max((q["samples_per_s"] for q in ok), default=0.0)
    gains = scaling(ok)
    prev = None
    for ph in doc.get("phases") or []:
        got = by_phase.get(ph.get("name"))
        if not got:
            continue
        pt = got[-1]
        cls, sub, advice = classify_point(pt, best, gains.get(pt.get("batch")))
        ev = {"batch": pt["batch"]}
        notes = []
        if pt.get("oom"):
            text = f"batch {pt['batch']} does not fit in the GPU's memory"
            notes.append(pt["error"])
            if pt.get("mem_allocated_after_free_gb") is not None:
                ev["mem_allocated_after_free_gb"] = pt["mem_allocated_after_free_gb"]
                text += f"; after freeing, {pt['mem_allocated_after_free_gb']:.2f} GB still allocated (the model)"
        else:
            ev.update(samples_per_s=pt["samples_per_s"], best_pct=100 * pt["samples_per_s"] / best,
                      step_ms=pt["step_ms"])
            text = (f"batch {pt['batch']}: {pt['samples_per_s']:.0f} samples/s = {ev['best_pct']:.0f}% of the best, "
                    f"step {pt['step_ms']:.2f} ms")
            if prev is not None and not prev.get("oom") and prev["batch"] < pt["batch"]:
                ev.update(step_ratio=pt["step_ms"] / prev["step_ms"], prev_batch=prev["batch"],
                          batch_ratio=pt["batch"] / prev["batch"])
                text += (f" ({ev['step_ratio']:.2f}x the step of batch {prev['batch']}, "
                         f"for {ev['batch_ratio']:.0f}x the samples)")
            if pt.get("peak_mem_gb") is not None:
                ev["peak_mem_gb"] = pt["peak_mem_gb"]
                text += f", peak memory {pt['peak_mem_gb']:.2f} GB"
            if tele_text(ph):
                ev.update(tele_numbers(ph))
                text += "; GPU " + tele_text(ph)
        ph["verdict"] = Verdict(cls, sub, None, ev, text, advice, notes=notes, **phase_window(ph)).to_dict()
        prev = pt
    throttle_warnings(doc)
    res = doc.get("results") or {}
    k = res.get("knee") or knee(pts)
    if not k:
        doc["verdict"] = None
        return doc
    small = ok[0]
    kb = k["knee_batch"]
    ev = {"knee_batch": kb, "knee_samples_per_s": k["knee_samples_per_s"], "knee_fraction": k["fraction"],
          "best_samples_per_s": k["best_samples_per_s"], "best_batch": k["best_batch"],
          "smallest_batch": small["batch"], "smallest_samples_per_s": small["samples_per_s"],
          "smallest_step_ms": small["step_ms"], "smallest_best_pct": 100 * small["samples_per_s"] / best}
    text = (f"knee at batch {kb}: {k['knee_samples_per_s']:.0f} samples/s, within {100 * k['fraction']:.0f}% of the "
            f"best {k['best_samples_per_s']:.0f} (batch {k['best_batch']}); batch {small['batch']}: "
            f"{small['samples_per_s']:.0f} samples/s, step {small['step_ms']:.2f} ms "
            f"({ev['smallest_best_pct']:.1f}% of the best)")
    sm = {ph["name"]: tele(ph, "sm_active_pct") for ph in doc.get("phases") or []}
    s_small, s_knee = sm.get(small["phase"]), sm.get(f"batch={kb}")
    if s_small is not None and s_knee is not None:
        ev["smallest_sm_active_pct"], ev["knee_sm_active_pct"] = s_small, s_knee
        text += f"; SM active {s_small:.0f}% at batch {small['batch']} vs {s_knee:.0f}% at the knee"
    subclasses = {q["batch"]: classify_point(q, best, gains.get(q["batch"]))[1] for q in ok}
    last_latency = max((b for b, c in subclasses.items() if c == "launch"), default=None)
    first_full = min((b for b, c in subclasses.items() if c == "saturated"), default=None)
    if first_full is not None:
        ev["first_compute_batch"], ev["saturated_gain"] = first_full, SATURATED_GAIN
        text += f"; throughput gains under {SATURATED_GAIN:.1f}x per doubling from batch {first_full}"
    if res.get("end") == "oom":
        ev["largest_fit_batch"], ev["oom_batch"] = res["largest_fit"], res["oom_batch"]
        text += f"; memory: fits at {res['largest_fit']}, out of memory at {res['oom_batch']}"
    notes = [f"memory: {res['oom_boundary']}"] if res.get("oom_boundary") and res.get("end") != "oom" else []
    mixed = []
    if last_latency is None and first_full == small["batch"]:
        cls, sub = "compute-bound", "at every batch size"
        advice = "even the smallest batch fills the GPU: pick the batch for convergence, not speed"
    elif first_full is None:
        ev["last_latency_batch"] = last_latency or ok[-1]["batch"]
        cls, sub = "latency-bound", f"up to batch {ev['last_latency_batch']}: throughput still rising"
        advice = f"no plateau below batch {ok[-1]['batch']}: raise max_batch to find where it saturates"
    else:
        cls, sub = "compute-bound", f"from batch {first_full}"
        if last_latency:
            ev["last_latency_batch"] = last_latency
            cls, sub = "latency-bound", f"up to batch {last_latency}, compute-bound from batch {first_full}"
            mixed = ["compute-bound"]
        advice = (f"a batch of {first_full} to {kb} fills the GPU (knee {kb}: the smallest within "
                  f"{100 * KNEE_FRACTION:.0f}% of the best); larger batches add latency and memory, not throughput")
    if res.get("end") == "oom":
        advice += f"; batch {res.get('oom_batch')} does not fit: gradient accumulation reaches larger effective batches"
    doc["verdict"] = Verdict(cls, sub, None, ev, text, advice, mixed, notes=notes).to_dict()
    return doc


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Curves]:
    """Samples/s against the batch size (doubling: a log axis), and the line the knee crosses."""
    pts = points_with(doc, "batch", "samples_per_s")
    if not pts:
        return []
    results = doc.get("results") or {}
    knee = results.get("knee") or {}
    lines = []
    if is_number(knee.get("best_samples_per_s"), True) and is_number(knee.get("fraction"), True):
        lines.append((f"{100 * knee['fraction']:.0f}% of best ({si(knee['best_samples_per_s'], '/s')} at batch "
                      f"{knee.get('best_batch')}): knee at batch {knee.get('knee_batch')}",
                      knee["fraction"] * knee["best_samples_per_s"]))
    title = "samples/s against batch size"
    if results.get("oom_boundary"):
        title += f"; {results['oom_boundary']}"
    return [Curves(title, "batch size", "samples/s", [("samples/s", [(q["batch"], q["samples_per_s"]) for q in pts])],
                   lines, xlog=True, ylog=False)]
