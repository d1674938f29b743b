"""The fusion run's verdicts: each variant of each function judged by its bandwidth against the DRAM roof
and by whether its operations were fused, and the run as a whole: :func:`analyze`, which gputop runs
on the run document of ``workloads/fusion.py``.

An elementwise op does a few FLOPs per 8 bytes: memory-bound when its achieved bandwidth reaches half the
DRAM roof; a fused kernel that moves few bytes but stays below that is paced by its math (compute-bound).
The subclass says whether the operations were fused. On the CPU there is no DRAM roof: no verdict.
"""

from __future__ import annotations

from gputop.analysis.verdict import Verdict
from gputop.format import count
from gputop.lessons.docs import phase_points, phase_window, points_with, tele_numbers, tele_text, throttle_warnings
from gputop.lessons.figures import Bars

FUSED_GAIN = 1.5  # the bar: a fused nested sine at least this much faster than eager at large sizes
MEMORY_BOUND = 0.5  # at least half the DRAM roof: the traffic sets the pace; below it, the math does

ADVICE = {
    "unfused": "each operation is its own kernel and a round trip to DRAM: fuse them (torch.compile), so the "
               "data is read and written once",
    "fused": "fused into one kernel: the traffic is the minimum; to go faster move fewer bytes (bf16, or fold "
             "the op into its neighbours)",
    "math": "fused, the bytes are few enough that the math (four precise sines per element) sets the pace: "
            "cheaper math is what is left (lower precision, fewer transcendental calls)",
}


def phase_verdict(ph: dict, pts: list[dict], dram_bps: float | None) -> dict | None:
    done = sorted((q for q in pts if not q.get("skipped") and q.get("ms")), key=lambda q: q["n"])
    if not done or not dram_bps:  # on the CPU there is no DRAM roof to judge the bandwidth against
        return None
    q = done[-1]
    sub = "fused" if q["kernels_per_call"] == 1 else "unfused"
    ev = {"n": q["n"], "ms": q["ms"], "kernels_per_call": q["kernels_per_call"], "bytes_moved": q["bytes_moved"],
          "bytes_per_s": q["bytes_moved"] / (q["ms"] / 1e3) if q.get("bytes_moved") else None,
          "dram_roof_fraction": None, "speedup_vs_eager": q.get("speedup_vs_eager")}
    text = f"n={q['n']}: {count(q['kernels_per_call'], 'kernel')} per call, {q['ms']:.3f} ms"
    if ev["bytes_per_s"]:
        ev["dram_roof_fraction"] = ev["bytes_per_s"] / dram_bps
        text += (f", {q['bytes_moved'] / 1e9:.3g} GB moved at {ev['bytes_per_s'] / 1e9:.0f} GB/s = "
                 f"{100 * ev['dram_roof_fraction']:.0f}% of the DRAM roof")
    if q.get("speedup_vs_eager"):
        text += f"; {q['speedup_vs_eager']:.2f}x eager"
    cls, advice = "memory-bound", ADVICE[sub]
    if ev["dram_roof_fraction"] is not None and ev["dram_roof_fraction"] < MEMORY_BOUND:
        cls, advice = "compute-bound", ADVICE["math" if sub == "fused" else "unfused"]
    if tele_text(ph):
        ev.update(tele_numbers(ph))
        text += "; GPU " + tele_text(ph)
    return Verdict(cls, sub, None, ev, text, advice, **phase_window(ph)).to_dict()


def analyze(doc: dict) -> dict:
    dram = ((doc.get("device") or {}).get("peaks") or {}).get("dram_bytes_per_s")
    if (doc.get("device") or {}).get("kind") == "cpu":
        dram = None
    by_phase = phase_points(doc)
    for ph in doc.get("phases") or []:
        ph["verdict"] = phase_verdict(ph, by_phase.get(ph.get("name")) or [], dram)
    throttle_warnings(doc)
    best = {}  # per function: the best speed-up at its largest size
    for q in doc.get("points") or []:
        if q.get("speedup_vs_eager"):
            b = best.get(q["fn"])
            if b is None or (q["n"], q["speedup_vs_eager"]) > (b["n"], b["speedup_vs_eager"]):
                best[q["fn"]] = q
    if not dram or not best:
        doc["verdict"] = None
        return doc
    ev, parts = {}, []
    for fn, q in best.items():
        ev[f"{fn}_n"], ev[f"{fn}_speedup"] = q["n"], q["speedup_vs_eager"]
        ev[f"{fn}_kernels"] = q["kernels_per_call"]
        parts.append(f"{fn} at n={q['n']}: {q['variant']} {q['speedup_vs_eager']:.2f}x eager with "
                     f"{count(q['kernels_per_call'], 'kernel')} per call")
    fused = [q for q in doc.get("points") or [] if q.get("kernels_per_call") == 1 and q.get("gb_per_s")]
    cls = "memory-bound"
    if fused:
        top = max(fused, key=lambda q: q["gb_per_s"])
        ev["fused_dram_roof_fraction"] = top["gb_per_s"] * 1e9 / dram
        if ev["fused_dram_roof_fraction"] >= MEMORY_BOUND:
            parts.append(f"fused kernels reach {100 * ev['fused_dram_roof_fraction']:.0f}% of the DRAM roof: "
                         "still memory-bound, with a fraction of eager's traffic")
        else:
            cls = "compute-bound"
            parts.append(f"fused kernels reach only {100 * ev['fused_dram_roof_fraction']:.0f}% of the DRAM roof: "
                         "with the traffic cut, the math sets the pace")
    sub = "fusion speedup" if any(q["speedup_vs_eager"] >= FUSED_GAIN for q in best.values()) else "no fusion gain"
    advice = ADVICE["unfused"] if sub == "no fusion gain" else ADVICE["fused" if cls == "memory-bound" else "math"]
    doc["verdict"] = Verdict(cls, sub, None, ev, "; ".join(parts), advice).to_dict()
    return doc


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Bars]:
    """Time per call of each function and variant at the largest size measured (shorter is better)."""
    largest: dict[str, dict] = {}
    for q in points_with(doc, "ms", "n"):
        key = str(q.get("phase") or f"{q.get('fn')} {q.get('variant')}")
        if key not in largest or q["n"] >= largest[key]["n"]:
            largest[key] = q
    if not largest:
        return []
    sizes = sorted({q["n"] for q in largest.values()})
    where = f"n={sizes[-1]}" if len(sizes) == 1 else "the largest n of each"
    return [Bars(f"ms per call at {where} (shorter is better)", "ms", list(largest),
                 [("ms per call", [q["ms"] for q in largest.values()])])]
