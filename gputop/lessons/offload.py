"""The offload run's analysis: where the GPU starts to win (the crossovers), a verdict per size and per op,
the first call apart, and the CSV rows: ``analyze(doc)`` and ``csv_rows(doc)``, which gputop runs on the run
document of ``workloads/offload.py`` (and that script, run on its own, through ``gputop.workload.util.print_verdicts``).

Per size, the GPU-with-copies call is judged: latency-bound when its copies cost little more than the
copies of the smallest size (the fixed cost of a copy: set-up, a synchronize) and the GPU loses;
transfer-bound (pcie-bound) when the copies move real bytes and are most of its time; otherwise the GPU's
own work sets the pace (compute-bound matmul, memory-bound sine)."""

from __future__ import annotations

import statistics

from gputop.analysis.verdict import Verdict
from gputop.lessons.docs import (
    by_key, is_number, phase_points, phase_window, points_with, tele_numbers, tele_text, throttle_warnings)
from gputop.lessons.figures import Curves

OPS = ["matmul", "sin"]
CURVES = {"with_copies": "gpu_copies_ms", "without_copies": "gpu_ms", "naive": "gpu_naive_ms"}

COPY_SHARE = 0.5  # copies at least half the GPU time: transfer-bound
FIXED_COST_FACTOR = 2.0  # copies under twice the smallest size's copies are mostly fixed cost: latency-bound
SMALL_COPY_BYTES = 1 << 20  # with a single size to judge (no fixed cost to compare with): under 1 MiB is "small"

ADVICE = {
    "latency-bound": "at this size the fixed cost of a launch, a synchronize and two copies outweighs the work: "
                     "keep small work on the CPU, or batch many small ops into one GPU call",
    "pcie-bound": "the copies dominate: keep the data on the GPU across ops, copy from pinned memory and overlap "
                  "copies with compute (see the transfer workload)",
    "compute-bound": "the GPU wins: the work (n^3) grows faster than the data copied (n^2)",
    "memory-bound": "the GPU's kernels win but are memory-bound: fusing the four sines cuts the traffic (see the "
                    "fusion workload)",
}
FRESH_NOTE = ("x.cpu() allocates fresh host memory on every call, and the download then pays a page fault on the "
              "first touch of every page: gpu+copies copies into a host buffer allocated once; the fresh-memory "
              "figures (gpu_copies_fresh_ms, d2h_fresh_ms) are kept apart")


# -- crossovers (in the run and here) -------------------------------------------------------------------

def crossover(points: list[dict], key: str) -> int | None:
    """The smallest n from which the GPU (``key``) stays faster than the CPU at every larger size measured;
    None if it loses at the largest size."""
    pts = sorted((q for q in points if q.get(key) is not None and q.get("cpu_ms") is not None), key=lambda q: q["n"])
    best = None
    for q in reversed(pts):
        if q[key] < q["cpu_ms"]:
            best = q["n"]
        else:
            break
    return best


def crossovers(points: list[dict]) -> dict:
    return {name: crossover(points, key) for name, key in CURVES.items()}


def wins_at(points: list[dict], key: str = "gpu_copies_ms") -> list[int]:
    """Every size at which the GPU (``key``) beat the CPU, whether or not it kept winning."""
    return sorted(q["n"] for q in points if q.get(key) is not None and q.get("cpu_ms") is not None
                  and q[key] < q["cpu_ms"])


# -- the verdicts ---------------------------------------------------------------------------------------

def copy_ms(q: dict) -> float:
    return (q.get("h2d_ms") or 0) + (q.get("d2h_ms") or 0)


def fixed_copy_ms(points: list[dict]) -> float | None:
    """The copies' fixed cost for one op: the median copy time of its three smallest sizes (a few bytes
    each); None with fewer than four sizes, too few to tell the fixed cost from the rest."""
    pts = sorted((q for q in points if q.get("gpu_copies_ms") is not None and copy_ms(q) > 0), key=lambda q: q["n"])
    return statistics.median(copy_ms(q) for q in pts[:3]) if len(pts) >= 4 else None


def classify_size(q: dict, fixed_ms: float | None) -> tuple[str, str | None]:
    """(class, subclass) of one size's GPU-with-copies call; ``fixed_ms``: the op's ``fixed_copy_ms``."""
    small = (copy_ms(q) < FIXED_COST_FACTOR * fixed_ms if fixed_ms else q["bytes_copied"] < SMALL_COPY_BYTES)
    if not small and (q.get("copy_share") or 0) >= COPY_SHARE:
        return "pcie-bound", "pageable"
    if q["gpu_copies_ms"] >= q["cpu_ms"]:
        return "latency-bound", "launch"
    return ("compute-bound", "gpu wins") if q["op"] == "matmul" else ("memory-bound", "gpu wins")


def size_verdict(q: dict, fixed_ms: float | None) -> dict:
    cls, sub = classify_size(q, fixed_ms)
    wins = q["gpu_copies_ms"] < q["cpu_ms"]
    ev = {"n": q["n"], "gpu_copies_ms": q["gpu_copies_ms"], "cpu_ms": q["cpu_ms"], "copy_share": q.get("copy_share"),
          "copy_ms": copy_ms(q), "fixed_copy_ms": fixed_ms}
    text = (f"n={q['n']}: the GPU {'wins' if wins else 'loses'} with copies ({q['gpu_copies_ms']:.3f} ms "
            f"vs CPU {q['cpu_ms']:.3f} ms)")
    if q.get("copy_share") is not None:
        text += f"; copies are {100 * q['copy_share']:.0f}% of the GPU time"
    if cls == "latency-bound" and fixed_ms and ev["copy_ms"] < FIXED_COST_FACTOR * fixed_ms:
        text += f"; the copies' {ev['copy_ms']:.3f} ms are near the {fixed_ms:.3f} ms that the smallest copies cost"
    return Verdict(cls, sub, None, ev, text, ADVICE[cls]).to_dict()


def _wins(v) -> str:
    return "never wins" if v is None else f"wins from n={v}"


def op_verdict(ph: dict, pts: list[dict]) -> dict | None:
    gpu = sorted((q for q in pts if q.get("gpu_copies_ms") is not None), key=lambda q: q["n"])
    if not gpu:
        return None
    big, small = gpu[-1], gpu[0]
    fixed = fixed_copy_ms(gpu)
    cross = crossovers(gpu)
    won = wins_at(gpu)
    naive = [q["gpu_naive_ms"] for q in gpu]
    cls, sub = classify_size(big, fixed)
    small_cls, _ = classify_size(small, fixed)
    ev = {"crossover_with_copies_n": cross["with_copies"], "crossover_without_copies_n": cross["without_copies"],
          "largest_n": big["n"], "gpu_copies_ms": big["gpu_copies_ms"], "cpu_ms": big["cpu_ms"],
          "gpu_ms": big["gpu_ms"], "copy_share": big.get("copy_share"), "naive_min_ms": min(naive),
          "naive_max_ms": max(naive), "smallest_n": small["n"]}
    text = f"{big['op']}: with copies the GPU {_wins(cross['with_copies'])}"
    if cross["with_copies"] is None and won:  # it won somewhere and lost again at a larger size
        ev["last_win_with_copies_n"] = won[-1]
        text += f" for good (it won at n={won[-1]}, then lost again)"
    text += (f", without copies it {_wins(cross['without_copies'])}; at n={big['n']} GPU+copies "
             f"{big['gpu_copies_ms']:.3f} ms, GPU alone {big['gpu_ms']:.3f} ms, CPU {big['cpu_ms']:.3f} ms")
    if big.get("copy_share") is not None:
        text += f", copies {100 * big['copy_share']:.0f}% of the GPU time"
    if big.get("d2h_fresh_ms") is not None:
        ev["d2h_ms"], ev["d2h_fresh_ms"] = big["d2h_ms"], big["d2h_fresh_ms"]
        text += (f"; the download takes {big['d2h_ms']:.3f} ms into a reused host buffer, {big['d2h_fresh_ms']:.3f} ms "
                 f"by x.cpu() into fresh memory (page faults)")
    text += (f"; at n={small['n']} {'latency-bound (launch and sync)' if small_cls == 'latency-bound' else small_cls}"
             f"; the naive timing stays between {min(naive):.3f} and {max(naive):.3f} ms at every size: it times "
             f"only the launch, not the work")
    notes = ["gpu naive = perf_counter around the call without torch.cuda.synchronize(): the GPU runs "
             "asynchronously, so the clock stops when the launch returns"] + [FRESH_NOTE] * ("d2h_fresh_ms" in ev)
    return Verdict(cls, sub, None, ev, text, ADVICE[cls], notes=notes, **phase_window(ph)).to_dict()


def first_call_verdict(ph: dict, pts: list[dict]) -> dict | None:
    ctx = next((q for q in pts if q.get("what") == "cuda context"), None)
    ops = [q for q in pts if q.get("op")]
    if ctx is None:
        return None
    ev = {"context_ms": ctx["first_ms"]}
    parts = [f"the CUDA context took {ctx['first_ms']:.0f} ms"]
    for q in ops:
        ev[f"{q['op']}_first_ms"], ev[f"{q['op']}_warm_ms"] = q["first_ms"], q["warm_ms"]
        parts.append(f"the first {q['op']} {q['first_ms']:.2f} ms against {q['warm_ms']:.3f} ms warm")
    advice = "warm up (a few untimed calls) before timing or serving: the first call pays context and kernel load"
    return Verdict("latency-bound", "startup", None, ev, "; ".join(parts), advice, **phase_window(ph)).to_dict()


def analyze(doc: dict) -> dict:
    """A verdict on every measured size (``point["verdict"]``), on each phase, and on the run."""
    by_phase = phase_points(doc)
    for op in OPS:
        pts = [q for q in doc.get("points") or [] if q.get("op") == op and q.get("gpu_copies_ms") is not None
               and q.get("cpu_ms") is not None]
        fixed = fixed_copy_ms(pts)
        for q in pts:
            q["verdict"] = size_verdict(q, fixed)
    verdicts = {}
    for ph in doc.get("phases") or []:
        pts = by_phase.get(ph.get("name")) or []
        v = first_call_verdict(ph, pts) if ph.get("name") == "first call" else op_verdict(ph, pts)
        if v and tele_text(ph):
            v["evidence"].update(tele_numbers(ph))
            v["evidence_text"] += "; GPU " + tele_text(ph)
        ph["verdict"] = v
        if v and ph.get("name") in OPS:
            verdicts[ph["name"]] = v
    throttle_warnings(doc)
    pcie = [v for v in verdicts.values() if v["class"] == "pcie-bound"]
    overall = pcie[0] if pcie else verdicts.get("matmul") or next(iter(verdicts.values()), None)
    doc["verdict"] = dict(overall, window=None) if overall else None
    return doc


def csv_rows(doc: dict) -> list[dict]:
    """One row per op and size: the four curves, the copy split, and the fresh-memory figures."""
    cols = ("op", "log2", "n", "cpu_ms", "gpu_copies_ms", "gpu_ms", "gpu_naive_ms", "h2d_ms", "compute_ms", "d2h_ms",
            "copy_share", "gpu_copies_fresh_ms", "d2h_fresh_ms")
    return [{c: q.get(c) for c in cols} for q in doc.get("points") or [] if q.get("cpu_ms") is not None]


# -- the key figure of its text report (gputop --run without --json, the script on its own) ------------

FIGURE_CURVES = (("CPU", "cpu_ms"), ("GPU + copies", "gpu_copies_ms"), ("GPU alone", "gpu_ms"),
                 ("GPU naive (no sync)", "gpu_naive_ms"))


def figures(doc: dict) -> list[Curves]:
    """Per op, time against size on the CPU and the GPU (with and without the copies): where the GPU wins."""
    crossings = (doc.get("results") or {}).get("crossover_n") or {}
    figs = []
    for op, qs in by_key(points_with(doc, "n", "cpu_ms"), "op").items():
        series = [(label, [(q["n"], q[key]) for q in qs if is_number(q.get(key), True)])
                  for label, key in FIGURE_CURVES]
        cross = crossings.get(op) or {}
        title = f"{op}: ms against n" + (" (n x n)" if op == "matmul" else " (elements)")
        if cross:
            title += (f"; GPU wins from n={cross.get('with_copies') or 'never'} with copies, "
                      f"{cross.get('without_copies') or 'never'} without")
        figs.append(Curves(title, "n", "ms", [s for s in series if s[1]]))
    return figs
