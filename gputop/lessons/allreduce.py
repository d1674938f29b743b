"""The allreduce lesson (``workloads/allreduce.py``): the numbers of an all-reduce run and their verdicts.

:func:`fit_latency_bandwidth` (the fixed cost of one call and the best bus bandwidth of a sweep),
:func:`link_peak` (the peak of the link NVML says joins the GPUs), :func:`sweep_verdicts` (latency- vs
bandwidth-bound message sizes) and :func:`step_verdict` (a DDP step's exposed communication); gputop runs
:func:`analyze` and :func:`csv_rows` on the run document. The comms-bound class itself (what the live
classifier sees) is :mod:`gputop.analysis.comms`.
"""

from __future__ import annotations

from gputop.analysis.rules import comms_bound
from gputop.analysis.rules.comms_bound import ADVICE
from gputop.analysis.links import link_peak
from gputop.analysis.verdict import Verdict
from gputop.format import si
from gputop.lessons.docs import is_number, phase_points, points_with, throttle_warnings
from gputop.lessons.figures import Curves

LATENCY_SHARE = comms_bound.COMMS_LATENCY_SHARE
# where DDP's overlap measured no faster than none (gloo on a CPU: the all-reduce and backward share the cores), the
# advice follows the measurement, not the rule's "keep the overlap"
OVERLAP_SLOWER_ADVICE = ("here DDP's overlap did not hide the all-reduce: the step was no faster with it (the "
                         "all-reduce and backward competed for the same resource, as gloo's threads and the "
                         "computation share the CPU's cores); communicate less instead: accumulate gradients over "
                         "several steps with no_sync(), send bf16 gradients, or fewer, larger buckets (bucket_cap_mb); "
                         "on GPUs, NCCL's all-reduce overlaps backward")


def fit_latency_bandwidth(points: list[dict]) -> dict:
    """The two numbers of the usual model t(S) = latency + S / algbw_best of a size sweep: the best measured
    algorithm and bus bandwidths, the fixed cost per call (the least, over the smaller half of the
    sizes, of a message's time less its transfer time at the best bandwidth), and the size at which the two
    are equal."""
    pts = sorted((q for q in points if q.get("time_us") and q.get("size_bytes")), key=lambda q: q["size_bytes"])
    if not pts:
        return {}
    algbw = max(q["algbw_gbps"] for q in pts) * 1e9
    small = pts[:max(1, (len(pts) + 1) // 2)]  # the smaller half of the sizes: their time is mostly the fixed cost
    latency = max(0.0, min(q["time_us"] * 1e-6 - q["size_bytes"] / algbw for q in small))
    return {"latency_us": latency * 1e6, "algbw_gbps": algbw / 1e9,
            "busbw_gbps": max(q["busbw_gbps"] for q in pts), "half_bytes": latency * algbw}


def sweep_verdicts(points: list[dict], fit: dict, link: dict | None) -> list[Verdict]:
    """One verdict per message size: latency-bound where the fixed cost per call is at least
    ``LATENCY_SHARE`` of its time, else comms-bound (the link's bandwidth), with busbw's share of the link's
    peak where NVML gave one (else of the sweep's best)."""
    out = []
    peak = (link or {}).get("peak_gbps")
    for q in points:
        t = q["time_us"]
        share = min(1.0, (fit.get("latency_us") or 0.0) / t) if t else None
        ev = {"size_bytes": q["size_bytes"], "time_us": t, "busbw_gbps": q["busbw_gbps"],
              "latency_us": fit.get("latency_us"), "latency_share": share}
        size = si(q["size_bytes"], "B")
        if share is not None and share >= LATENCY_SHARE:
            text = (f"{size}: {t:.1f} us per all-reduce, {100 * share:.0f}% of it the fixed cost of a call "
                    f"({fit['latency_us']:.1f} us); busbw only {q['busbw_gbps']:.2f} GB/s")
            out.append(Verdict("latency-bound", "collective latency", None, ev, text, ADVICE["collective latency"]))
            continue
        if peak:
            ev["link_peak_gbps"], ev["link_pct"] = peak, 100.0 * q["busbw_gbps"] / peak
            ref = f"{ev['link_pct']:.0f}% of the {link['kind']} peak {peak:.0f} GB/s ({link['source']})"
        else:
            best = fit.get("busbw_gbps") or q["busbw_gbps"]
            ev["best_busbw_pct"] = 100.0 * q["busbw_gbps"] / best if best else None
            ref = f"{ev['best_busbw_pct']:.0f}% of the best measured busbw (no link peak from NVML)"
        text = f"{size}: bandwidth-bound, busbw {q['busbw_gbps']:.2f} GB/s = {ref}"
        sub = "link" if peak and ev["link_pct"] >= 100 * comms_bound.NVLINK_NEAR_LINK_FRACTION else None
        out.append(Verdict("comms-bound", sub, None, ev, text, ADVICE[sub]))
    return out


def step_verdict(points: list[dict]) -> Verdict | None:
    """The DDP step: comms-bound ("exposed") when, with overlap off, the exposed all-reduce is at least
    ``COMMS_EXPOSED_SHARE`` of the step; the evidence says how much DDP's overlap hid."""
    by = {q.get("mode"): q for q in points}
    base, off, on = by.get("compute only"), by.get("no overlap"), by.get("overlap")
    if not base or not off:
        return None
    ev = {"compute_step_ms": base["step_ms"], "no_overlap_step_ms": off["step_ms"],
          "no_overlap_exposed_ms": off["exposed_comm_ms"], "no_overlap_exposed_share": off["exposed_share"],
          "comm_ms": off["comm_ms"], "grad_bytes": off["grad_bytes"]}
    text = (f"all-reduce of {si(off['grad_bytes'], 'B')} of gradients takes {off['comm_ms']:.2f} ms; with "
            f"overlap off {off['exposed_comm_ms']:.2f} ms of the {off['step_ms']:.2f} ms step "
            f"({100 * off['exposed_share']:.0f}%) waits for it")
    slower = False
    if on:
        ev.update({"overlap_step_ms": on["step_ms"], "overlap_exposed_ms": on["exposed_comm_ms"],
                   "overlap_hidden_pct": on.get("hidden_pct")})
        slower = on["step_ms"] >= off["step_ms"]
        text += f"; DDP's overlap: {on['step_ms']:.2f} ms, {on['exposed_comm_ms']:.2f} ms exposed"
        if slower:
            text += f" (slower than without it, {off['step_ms']:.2f} ms: the overlap hid nothing here)"
    if off["exposed_share"] >= comms_bound.COMMS_EXPOSED_SHARE:
        return Verdict("comms-bound", "exposed", None, ev, text, OVERLAP_SLOWER_ADVICE if slower else ADVICE["exposed"])
    text += "; communication is a small part of this step"
    return Verdict("compute-bound", "comms hidden", None, ev, text,
                   "communication is not what limits this step: see the single-GPU verdicts for what does")


def analyze(doc: dict) -> dict:
    """Latency- vs bandwidth-bound message sizes, and whether the DDP step is comms-bound.

    The link's peak comes from NVML (rank 0's ``link`` result on GPUs); gloo on a CPU has no link to
    compare with, so there the sweep's own best busbw is the reference."""
    by_phase = phase_points(doc)
    link = link_peak((doc.get("results") or {}).get("link"))
    sweep_pts = sorted(by_phase.get("bus bandwidth", []), key=lambda q: q["size_bytes"])
    fit = fit_latency_bandwidth(sweep_pts)
    for q, v in zip(sweep_pts, sweep_verdicts(sweep_pts, fit, link)):
        q["bound"] = "latency" if v.cls == "latency-bound" else "bandwidth"
        q["latency_share"] = v.evidence.get("latency_share")
        q["verdict"] = v.to_dict()
        if (link or {}).get("peak_gbps"):
            q["busbw_gbps_peak"] = link["peak_gbps"]  # the results view's bars: busbw as a share of the link
    verdicts = {}
    for ph in doc.get("phases") or []:
        name = ph.get("name")
        if name == "bus bandwidth" and sweep_pts:
            big = sweep_pts[-1]["verdict"]
            ph["verdict"] = big
            verdicts[name] = big
        if name == "ddp step" and by_phase.get("ddp step"):
            v = step_verdict(by_phase["ddp step"])
            if v is not None:
                ph["verdict"] = verdicts[name] = v.to_dict()
    if fit:
        doc["results"] = {**(doc.get("results") or {}), "latency_us": fit.get("latency_us"),
                          "busbw_gbps_best": fit.get("busbw_gbps"), "half_bandwidth_bytes": fit.get("half_bytes"),
                          "latency_share_limit": LATENCY_SHARE, "link_peak": link}
    doc["verdict"] = verdicts.get("ddp step") or verdicts.get("bus bandwidth")
    throttle_warnings(doc)
    return doc


def csv_rows(doc: dict) -> list[dict]:
    cols = ("phase", "size_bytes", "time_us", "algbw_gbps", "busbw_gbps", "bound", "mode", "step_ms",
            "exposed_comm_ms", "comm_ms", "hidden_pct")
    return [{c: q.get(c) for c in cols} for q in doc.get("points") or []]


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Curves]:
    """All-reduce bus bandwidth against message size, under the link's peak when NVML knew it."""
    pts = [q for q in points_with(doc, "size_bytes", "busbw_gbps") if q.get("phase") == "bus bandwidth"]
    if not pts:
        return []
    results = doc.get("results") or {}
    peak = (results.get("link_peak") or {}).get("peak_gbps")
    lines = [(f"link peak {si(peak * 1e9, 'B/s')}", peak * 1e9)] if is_number(peak, True) else []
    title = "all-reduce bus bandwidth against message size"
    if is_number(results.get("latency_us"), True):
        title += f"; latency {results['latency_us']:.3g} us"
    busbw = [(q["size_bytes"], q["busbw_gbps"] * 1e9) for q in pts]
    return [Curves(title, "message bytes", "bus B/s", [("busbw", busbw)], lines)]
