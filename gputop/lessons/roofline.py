"""The roofline run's analysis: every sweep point against the measured and theoretical roofs, the ridge
points, and the verdict: ``analyze(doc)`` and ``csv_rows(doc)``, which gputop runs on the run document of
``workloads/roofline.py`` (and that script, run on its own, through ``gputop.workload.util.analyzed``); and its tour
sentence. The roofline maths is :mod:`gputop.analysis.roofline`."""

from __future__ import annotations

from gputop.analysis import roofline as rl
from gputop.analysis.verdict import Verdict
from gputop.format import count, si
from gputop.lessons.docs import by_key, cuda_peaks, is_number, points_with
from gputop.lessons.figures import Curves

# gputop --tour: what to look at while this workload runs
TOUR = ("Dots climb the memory roof as k/4 grows, then flatten under the compute roof: the ridge splits DRAM "
        "from ALUs.")


def csv_rows(doc: dict) -> list[dict]:
    """``gputop --run roofline --csv FILE``: the seed's columns first (k, ai, gflops, bandwidth, percent_peak),
    then every other field of the point."""
    rows = []
    for pt in doc.get("points") or []:
        pct = pt.get("pct_fp32_theoretical")
        if pct is None:
            pct = pt.get("pct_fp32_measured")
        lead = {"k": pt.get("k"), "ai": pt.get("ai"), "gflops": pt.get("gflops"), "bandwidth": pt.get("gbs"),
                "percent_peak": pct}
        rows.append({**lead, **{k: v for k, v in pt.items() if k not in lead}})
    return rows


def analyze(doc: dict) -> None:
    """Classify every point against the measured and theoretical roofs; fill the ridge and the verdict."""
    device = doc.get("device") or {}
    reported = device.get("reported") or {}
    kind = device.get("kind") or reported.get("kind") or "cuda"
    peaks = device.get("peaks") or reported.get("peaks") or {}
    static = device.get("static") or reported.get("static") or {}
    results = doc.setdefault("results", {})
    measured = results.get("measured_roofs") or {}
    points = doc.get("points") or []

    meas = rl.Roofs(measured.get("fp32_flops"), measured.get("dram_bytes_per_s"))
    theo = rl.Roofs(peaks.get("fp32_flops"), peaks.get("dram_bytes_per_s")) if kind == "cuda" else rl.Roofs(None, None)
    roofs = {"measured": meas, "theoretical": theo}
    max_clock = static.get("max_sm_clock_mhz")

    flagged = []
    for pt in points:
        if not isinstance(pt, dict) or not all(isinstance(pt.get(f), (int, float)) for f in ("ai", "gflops", "gbs")):
            continue
        flops, bw = pt["gflops"] * 1e9, pt["gbs"] * 1e9
        c = rl.classify_point(pt["ai"], flops, bw, roofs, ceiling_fraction=0.5 if pt.get("variant") == "mul+add" else 1.0)
        if kind == "cpu" and c["bound"] == rl.BELOW_BOTH:
            c["hint"] += " " + CPU_BELOW_BOTH
        pt.update({k: v for k, v in c.items() if k != "basis"})
        pt["roof_basis"] = c["basis"]
        pt["pct_fp32_measured"] = _pct(flops, meas.flops)
        pt["pct_fp32_theoretical"] = _pct(flops, theo.flops)
        at_clk = rl.at_clock(theo.flops, pt.get("sm_clock_mhz"), max_clock)
        pt["pct_fp32_theoretical_at_clock"] = _pct(flops, at_clk)
        pt["pct_l2_roof"] = _pct(bw, measured.get("l2_bytes_per_s"))  # between the DRAM and L2 roofs: cache hits
        if c["flags"]:
            flagged.append(pt)

    ridge = {
        "fp32": {"theoretical": _r(theo.ridge), "measured": _r(meas.ridge)},
        "basis": "measured" if meas.complete else ("theoretical" if theo.complete else None),
        "unit": "FLOP/byte",
    }
    if measured.get("l2_bytes_per_s") and meas.flops:
        ridge["l2"] = {"theoretical": None, "measured": _r(rl.ridge(meas.flops, measured["l2_bytes_per_s"]))}
    tensor_m = measured.get("tensor_dense_flops") or {}
    tensor_t = peaks.get("tensor_dense_flops") or {}
    for name in ("bf16", "fp16"):
        if tensor_m.get(name) or tensor_t.get(name):
            ridge[f"tensor_{name}"] = {"theoretical": _r(rl.ridge(tensor_t.get(name), theo.bw)),
                                       "measured": _r(rl.ridge(tensor_m.get(name), meas.bw))}
    results["ridge"] = ridge
    results["points_above_roof"] = len(flagged)
    doc["verdict"] = _verdict(kind, points, measured, peaks, static, meas, theo, ridge, flagged)


CPU_BELOW_BOTH = ("on the host, NumPy runs each term as two separate ufunc passes on one core with no fused "
                  "multiply-add, while the FP32 roof is BLAS on every core with FMA and register blocking: "
                  "a compiled, fused loop (or the GPU) is what closes that gap")


def _pct(x, ref) -> float | None:
    return round(100.0 * x / ref, 2) if isinstance(ref, (int, float)) and ref > 0 else None


def _r(v) -> float | None:
    return round(v, 3) if isinstance(v, float) else None


def _fmt_rate(v: float, unit: str) -> str:
    """3.12 TB/s, 65.3 TFLOP/s, 812 GB/s: three significant figures in the largest unit under v."""
    scale, prefix = (1e12, "T") if v >= 1e12 else (1e9, "G")
    return f"{v / scale:.3g} {prefix}{unit}"


def _verdict(kind, points, measured, peaks, static, meas, theo, ridge, flagged) -> dict | None:
    """The sweep's verdict in three short lines: the class (memory-bound left of the ridge, compute-bound
    right of it), the evidence (each roof, measured and % of theoretical; the ridge), the advice. The
    best point of each variant, the tensor roofs' clocks and anything odd go in the notes."""
    pts = [p for p in points if isinstance(p, dict) and p.get("bound")]
    basis = meas if meas.complete else theo
    rd = basis.ridge
    if not rd or (not pts and not measured):
        return None  # no complete roofs: nothing to classify against
    details = measured.get("details") or {}
    ev: dict = {}
    said: list[str] = []
    if theo.complete:
        ev.update(fp32_theoretical_flops=theo.flops, dram_theoretical_bytes_per_s=theo.bw,
                  ridge_theoretical=theo.ridge)
    roofs = [("DRAM", meas.bw, theo.bw, "B/s", "dram"), ("FP32", meas.flops, theo.flops, "FLOP/s", "fp32"),
             ("L2", measured.get("l2_bytes_per_s"), None, "B/s", "l2"),
             ("FP64", measured.get("fp64_flops"), peaks.get("fp64_flops") if kind == "cuda" else None, "FLOP/s", "fp64")]
    for name, m_, t_, unit, key in roofs:
        if not m_:
            continue
        ev[f"{key}_measured"] = m_
        line = f"{name} {_fmt_rate(m_, unit)}"
        if t_:
            ev[f"{key}_measured_pct_of_theoretical"] = 100 * m_ / t_
            line += f" ({100 * m_ / t_:.0f}%)"
        said.append(line)
    fp = details.get("fp32") or {}
    at_clk = rl.at_clock(theo.flops, fp.get("sm_clock_mhz"), static.get("max_sm_clock_mhz"))
    if at_clk and meas.flops:
        ev["fp32_measured_sm_clock_mhz"] = fp["sm_clock_mhz"]
        ev["fp32_measured_pct_at_clock"] = 100 * meas.flops / at_clk
    if measured.get("dram_vs_best_peer"):
        ev["dram_vs_best_torch_peer"] = measured["dram_vs_best_peer"]
    for name, v in (measured.get("tensor_dense_flops") or {}).items():
        ev[f"{name}_tensor_measured_flops"] = v
        t = (peaks.get("tensor_dense_flops") or {}).get(name)
        if t:
            ev[f"{name}_tensor_measured_pct_of_theoretical"] = 100 * v / t
        said.append(f"{name} tensor {_fmt_rate(v, 'FLOP/s')}" + (f" ({100 * v / t:.0f}%)" if t else ""))
    ev.update(ridge_flop_per_byte=rd, ridge_k=4 * rd)
    said.insert(min(2, len(said)), f"ridge {rd:.1f} FLOP/byte = k {4 * rd:.0f}")  # the class's evidence first
    if kind == "cpu" and not theo.complete:
        said.append("host roofs measured (no datasheet)")

    notes: list[str] = []
    if theo.complete:
        notes.append(f"theoretical: FP32 {_fmt_rate(theo.flops, 'FLOP/s')}, DRAM {_fmt_rate(theo.bw, 'B/s')}, "
                     f"ridge {theo.ridge:.1f} FLOP/byte")
    dram = details.get("dram") or {}
    if dram.get("read_bytes_per_s"):
        line = (f"DRAM: read stream {_fmt_rate(dram['read_bytes_per_s'], 'B/s')}, copy "
                f"{_fmt_rate(dram['copy_bytes_per_s'], 'B/s')}")
        peers = measured.get("dram_peers") or {}
        if peers:
            line += "; " + ", ".join(f"{k} {_fmt_rate(v, 'B/s')}" for k, v in peers.items())
            line += f"; roof / best torch op = {measured.get('dram_vs_best_peer', 0):.3f}"
        notes.append(line)
    for name, v in (details.get("tensor") or {}).items():
        line = f"{name} tensor roof: {'x'.join(map(str, v.get('shape') or []))}"
        if v.get("mm_8192_flops_per_s"):
            line += f" (8192^3: {_fmt_rate(v['mm_8192_flops_per_s'], 'FLOP/s')})"
        if v.get("sm_clock_mhz"):
            line += f", SM {v['sm_clock_mhz']:.0f} MHz"
        if v.get("power_w"):
            line += f", {v['power_w']:.0f} W"
        if v.get("clock_reasons"):
            line += f" [{', '.join(v['clock_reasons'])}]"
        sus = v.get("sustained")
        if sus:
            line += (f"; sustained {sus['seconds']:g} s: {_fmt_rate(sus['flops_per_s'], 'FLOP/s')} at SM "
                     f"{sus.get('sm_clock_mhz') or 0:.0f} MHz [{', '.join(sus.get('clock_reasons') or []) or 'no limit'}]")
        notes.append(line)
    best = {}
    for p in pts:
        v = p["variant"]
        if v not in best or p["gflops"] > best[v]["gflops"]:
            best[v] = p
    for v, p in best.items():
        ev[f"{v}_best_gflops"], ev[f"{v}_best_k"] = p["gflops"], p["k"]
        pct = p.get("pct_roof_measured") if p.get("pct_roof_measured") is not None else p.get("pct_roof_theoretical")
        line = f"{v}: best {p['gflops']:.4g} GFLOP/s at k={p['k']}"
        if pct is not None:
            line += f" = {pct:.0f}% of the roof there"
        if p.get("pct_ceiling") is not None:
            line += f" ({p['pct_ceiling']:.0f}% of its half-roof ceiling)"
        notes.append(line)
    below = [p for p in pts if p["bound"] == rl.BELOW_BOTH]
    ev.update(points=len(pts), points_below_both_roofs=len(below), points_above_a_roof=len(flagged))
    if below:
        notes.append(f"{len(below)} of {count(len(pts), 'point')} below both roofs")
    if flagged:
        notes.append(f"{count(len(flagged), 'point')} above a roof (a bug): " +
                     "; ".join(f"{p['variant']} k={p['k']}: {p['flags'][0]}" for p in flagged[:3]))

    advice: list[str] = []
    if "mul+add" in best and "fma" in best and best["fma"]["gflops"] > 1.3 * best["mul+add"]["gflops"]:
        advice.append(f"Horner form (FMA) is {best['fma']['gflops'] / best['mul+add']['gflops']:.1f}x the seed's "
                      f"mul+add at k={best['fma']['k']}: separate multiply and add stop at half the FP32 roof")
    elif "mul+add" in best and kind == "cuda":
        advice.append("write polynomials in Horner form: separate multiply and add stop at half the FP32 roof")
    advice.append(f"below k {4 * rd:.0f} only bytes matter (fuse, reuse on chip, smaller types)")
    t = (measured.get("tensor_dense_flops") or {}).get("bf16")
    if t and meas.flops:
        advice.append(f"matmuls belong on the tensor cores ({t / meas.flops:.0f}x the FP32 roof in bf16)")
    if below:
        advice.append(CPU_BELOW_BOTH if kind == "cpu" else rl.HINTS[rl.BELOW_BOTH])
    sub = f"below {rd:.3g} FLOP/byte, k < {4 * rd:.0f}; compute-bound above"
    return Verdict("memory-bound", sub, None, ev, ", ".join(said), "; ".join(advice), ["compute-bound"],
                   notes=notes).to_dict()


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

def figures(doc: dict) -> list[Curves]:
    """FLOP/s against FLOP/byte, a series per kernel variant, under the measured roof (the DRAM slope up to
    the ridge, the FP32 and FP64 flats) and the GPU's datasheet peaks."""
    pts = points_with(doc, "ai", "gflops")
    if not pts:
        return []
    series = [(variant, [(q["ai"], q["gflops"] * 1e9) for q in qs]) for variant, qs in by_key(pts, "variant").items()]
    roofs = (doc.get("results") or {}).get("measured_roofs") or {}
    peaks = cuda_peaks(doc)
    lines = []
    x_lo = min(q["ai"] for q in pts)
    for what, bw, fp in (("measured", roofs.get("dram_bytes_per_s"), roofs.get("fp32_flops")),
                         ("peak", peaks.get("dram_bytes_per_s"), peaks.get("fp32_flops"))):
        if is_number(bw, True) and is_number(fp, True):
            ridge = fp / bw
            series.append((f"DRAM {si(bw, 'B/s')} ({what}), ridge {ridge:.3g} FLOP/B",
                           [(x, bw * x) for x in (min(x_lo, ridge), ridge)]))
            lines.append((f"FP32 {si(fp, 'FLOP/s')} ({what})", fp))
    if is_number(roofs.get("fp64_flops"), True):
        lines.append((f"FP64 {si(roofs['fp64_flops'], 'FLOP/s')} (measured)", roofs["fp64_flops"]))
    return [Curves("roofline: FLOP/s against arithmetic intensity", "FLOP/byte (arithmetic intensity)", "FLOP/s",
                   series, lines)]
