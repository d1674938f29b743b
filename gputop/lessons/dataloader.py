"""The dataloader run's verdicts: each phase judged from its measured split of the step time (data wait,
host-to-device copy, compute), and the run as a whole (how much the workers gained, how many would keep
up): :func:`analyze`, which gputop runs on the run document of ``workloads/dataloader.py``; and its tour
sentence."""

from __future__ import annotations

from gputop.analysis.verdict import Verdict
from gputop.lessons.docs import (
    phase_points, phase_window, points_with, tele, tele_numbers, tele_text, throttle_warnings)
from gputop.lessons.figures import Bars

# gputop --tour: what to look at while this workload runs
TOUR = ("Step time split per loader: the GPU waits while the loop transforms data; workers and pinned memory "
        "feed it.")

STARVED_PCT = 50.0  # data wait above this share of the step: the input pipeline is the bottleneck
PARTLY_PCT = 20.0
TRANSFER_PCT = 30.0


def classify_point(pt: dict) -> tuple[str, str | None, str]:
    """(class, subclass, advice) of one phase from its measured split of the step time."""
    wait, h2d, comp = pt.get("data_wait_pct") or 0.0, pt.get("h2d_pct") or 0.0, pt.get("compute_pct") or 0.0
    if wait >= STARVED_PCT:
        if pt.get("num_workers"):
            return "input-starved", "too few workers", ("still waiting for data: raise num_workers further, or make "
                                                        "the transform cheaper (precompute, move it to the GPU)")
        return "input-starved", "no workers", ("raise num_workers: the transform runs in the training loop, one "
                                               "sample at a time")
    if h2d >= TRANSFER_PCT and h2d > comp:
        sub = None if pt.get("pin_memory") else "pageable"
        return "pcie-bound", sub, "pin_memory=True and .to(device, non_blocking=True): slow host-to-device copies"
    if wait >= PARTLY_PCT:
        return "input-starved", "partly", "a few more workers or a deeper prefetch_factor would close the gap"
    return "compute-bound", None, "the input pipeline keeps up; the model's compute is now the limit (AMP, batch size)"


def analyze(doc: dict) -> dict:
    by_phase = phase_points(doc)
    results = doc.get("results") or {}
    need = results.get("workers_to_keep_up")
    first = None
    for ph in doc.get("phases") or []:
        pts = by_phase.get(ph.get("name"))
        if not pts:
            continue
        pt = pts[-1]
        cls, sub, advice = classify_point(pt)
        if cls == "input-starved" and need:
            advice += f" (about {need} workers would keep up)"
        ev = {k: pt[k] for k in ("samples_per_s", "step_ms", "data_wait_ms", "data_wait_pct", "h2d_ms", "h2d_pct",
                                 "compute_ms", "compute_pct", "worker_cpu_pct")}
        text = (f"{pt['samples_per_s']:.0f} samples/s; per step {pt['step_ms']:.1f} ms: data wait "
                f"{pt['data_wait_ms']:.1f} ms ({pt['data_wait_pct']:.0f}%), H2D {pt['h2d_ms']:.2f} ms "
                f"({pt['h2d_pct']:.0f}%), compute {pt['compute_ms']:.1f} ms ({pt['compute_pct']:.0f}%); "
                f"workers' CPU {pt['worker_cpu_pct']:.0f}%")
        if tele_text(ph):
            ev.update(tele_numbers(ph))
            text += "; GPU " + tele_text(ph)
        notes = []
        util = tele(ph, "util_gpu_pct")
        if cls == "input-starved" and util is not None and util > 80:
            notes.append("kernel-active is high although data wait dominates: check the split")
        ph["verdict"] = Verdict(cls, sub, None, ev, text, advice, notes=notes, **phase_window(ph)).to_dict()
        first = first or (pt, cls, sub)
    throttle_warnings(doc)
    pts = [q for v in by_phase.values() for q in v]
    if not pts or first is None:
        doc["verdict"] = None
        return doc
    base, cls0, sub0 = first
    best = max(pts, key=lambda q: q.get("samples_per_s") or 0)
    speedup = (best["samples_per_s"] / base["samples_per_s"]) if base.get("samples_per_s") else None
    ev = {"workers0_data_wait_pct": base["data_wait_pct"], "workers0_samples_per_s": base["samples_per_s"],
          "best_samples_per_s": best["samples_per_s"], "best_data_wait_pct": best["data_wait_pct"],
          "speedup": speedup, "num_workers": base.get("num_workers") or 0}
    if cls0 == "input-starved":
        text = (f"with num_workers={ev['num_workers']} the loop waits for data {base['data_wait_pct']:.0f}% of the "
                f"time; '{best['phase']}' is {speedup:.1f}x faster ({best['samples_per_s']:.0f} vs "
                f"{base['samples_per_s']:.0f} samples/s), data wait {best['data_wait_pct']:.0f}%")
        advice = ("raise num_workers (the transform is CPU work: spread it over processes); pin_memory=True + "
                  "non_blocking=True for the copy, persistent_workers to skip restarts")
        if classify_point(best)[0] == "input-starved" and need:
            advice += f"; still starved at the best setting: about {need} workers would keep up"
        doc["verdict"] = Verdict("input-starved", None, None, ev, text, advice).to_dict()
    else:
        text = (f"even with num_workers={ev['num_workers']} data wait is only {base['data_wait_pct']:.0f}% of the "
                f"step; best '{best['phase']}' {best['samples_per_s']:.0f} samples/s")
        doc["verdict"] = Verdict(cls0, sub0, None, ev, text, classify_point(base)[2]).to_dict()
    return doc


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Bars]:
    """Where each loader setting's step time goes: waiting for data, the copy to the GPU, compute."""
    pts = points_with(doc, "step_ms")
    if not pts:
        return []
    parts = [(label, [q.get(key) or 0.0 for q in pts]) for label, key in
             (("data wait", "data_wait_ms"), ("h2d copy", "h2d_ms"), ("compute", "compute_ms"))]
    parts = [p for p in parts if any(p[1])] or [("step", [q["step_ms"] for q in pts])]
    return [Bars("ms per training step, by where it goes", "ms", [str(q["phase"]) for q in pts], parts)]
