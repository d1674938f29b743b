"""Roofline maths: ridge point, attainable performance, and the bound class of a measured point.

Pure functions on plain numbers (FLOP/s, bytes/s, FLOP/byte); no NVML, no GPU. The roofline of a
machine with compute roof ``P`` (FLOP/s) and memory roof ``B`` (bytes/s) says a kernel of arithmetic
intensity ``AI`` (FLOP per byte moved to and from memory) can reach at most ``min(P, AI * B)``. The
*ridge point* ``P / B`` separates the memory-bound side (left) from the compute-bound side (right).

A point is classified against one or more sets of roofs (``"measured"``: what this machine reached in
the same run; ``"theoretical"``: the datasheet-style peaks). Above a roof by more than a few percent is
not physics but a measurement bug (bad timing, wrong FLOP/byte count, data served from a cache), so
it is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.analysis.vocabulary import Cls

ABOVE_TOLERANCE = 0.05  # a point more than 5% above a roof is flagged
BELOW_FRACTION = 0.10  # a point under 10% of what its roofs allow is "below both roofs"

MEMORY_BOUND = Cls.MEMORY_BOUND
COMPUTE_BOUND = Cls.COMPUTE_BOUND
BELOW_BOTH = "below both roofs"

HINTS = {
    MEMORY_BOUND: "left of the ridge: the kernel waits on memory. More FLOPs per byte (fusing kernels, "
                  "reusing data from registers or shared memory, smaller data types) moves it right; "
                  "faster math does not help.",
    COMPUTE_BOUND: "right of the ridge: the kernel waits on arithmetic. Only cheaper or faster math helps "
                   "(FMA instead of a multiply and an add, tensor cores, lower precision).",
    BELOW_BOTH: "far below both roofs: neither memory bandwidth nor arithmetic is the limit. Look for "
                "latency: too little work in flight (low occupancy, long dependent chains), launch "
                "overhead of short kernels, or the host stalling the device.",
}


@dataclass(frozen=True)
class Roofs:
    """One compute roof (FLOP/s) and one memory roof (bytes/s); either may be None (n/a)."""

    flops: float | None
    bw: float | None

    @property
    def complete(self) -> bool:
        return _pos(self.flops) is not None and _pos(self.bw) is not None

    @property
    def ridge(self) -> float | None:
        return ridge(self.flops, self.bw)

    def attainable(self, ai: float) -> float | None:
        return attainable(ai, self.flops, self.bw)


def _pos(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def ridge(peak_flops: float | None, peak_bw: float | None) -> float | None:
    """The arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
    f, b = _pos(peak_flops), _pos(peak_bw)
    return f / b if f and b else None


def attainable(ai: float, peak_flops: float | None, peak_bw: float | None) -> float | None:
    """The most FLOP/s a kernel of intensity ``ai`` can reach under these roofs: min(P, AI * B)."""
    f, b, a = _pos(peak_flops), _pos(peak_bw), _pos(ai)
    if f is None or b is None or a is None:
        return None
    return min(f, a * b)


def binding_roof(ai: float, peak_flops: float | None, peak_bw: float | None) -> str | None:
    """"memory" left of the ridge, "compute" at or right of it (None when a roof is n/a)."""
    r = ridge(peak_flops, peak_bw)
    if r is None or _pos(ai) is None:
        return None
    return "memory" if ai < r else "compute"


def pct_of_roof(ai: float, flops: float, peak_flops: float | None, peak_bw: float | None) -> float | None:
    """Achieved FLOP/s as a percentage of the binding roof at this intensity."""
    att = attainable(ai, peak_flops, peak_bw)
    if att is None or not isinstance(flops, (int, float)):
        return None
    return 100.0 * flops / att


def at_clock(peak: float | None, clock_mhz: float | None, max_clock_mhz: float | None) -> float | None:
    """A compute peak quoted at ``max_clock_mhz`` scaled to the clock the SMs actually ran at."""
    p, c, m = _pos(peak), _pos(clock_mhz), _pos(max_clock_mhz)
    return p * c / m if p and c and m else None


def above_roof_flags(flops: float, bw: float, roofs: Roofs, label: str,
                     tolerance: float = ABOVE_TOLERANCE) -> list[str]:
    """One message for each roof that the point exceeds by more than ``tolerance``."""
    flags = []
    pf, pb = _pos(roofs.flops), _pos(roofs.bw)
    if pf and flops > pf * (1 + tolerance):
        flags.append(f"above the {label} compute roof: {flops / 1e9:.4g} > {pf / 1e9:.4g} GFLOP/s "
                     f"(+{100 * (flops / pf - 1):.0f}%): a measurement bug (timing or FLOP count)")
    if pb and bw > pb * (1 + tolerance):
        flags.append(f"above the {label} memory roof: {bw / 1e9:.4g} > {pb / 1e9:.4g} GB/s "
                     f"(+{100 * (bw / pb - 1):.0f}%): a measurement bug (timing, byte count, or data "
                     f"served from a cache)")
    return flags


def classify_point(ai: float, flops: float, bw: float, roofs: dict[str, Roofs],
                   ceiling_fraction: float = 1.0, tolerance: float = ABOVE_TOLERANCE,
                   below_fraction: float = BELOW_FRACTION) -> dict:
    """Classify one measured point.

    ``ai``: FLOP/byte; ``flops``: achieved FLOP/s; ``bw``: achieved bytes/s. ``roofs``: named roof
    sets, e.g. ``{"measured": Roofs(...), "theoretical": Roofs(...)}``; the class uses the first
    complete set (so put the measured roofs first). ``ceiling_fraction``: the share of the compute
    roof this instruction mix can reach at best (0.5 for a separate multiply and add, which cannot
    use FMA): the class then uses that lower ceiling (which meets the memory roof at
    ``ceiling_ridge``) and ``pct_ceiling`` says how close the point came to it, while ``pct_roof_*``
    stay against the hardware's roofs.

    Returns ``bound`` (memory-bound / compute-bound / below both roofs, or None without roofs),
    ``binding_roof`` (memory / compute), ``basis`` (which roof set decided), ``ridge`` (FLOP/byte,
    of that set), ``pct_roof_<name>`` for every set, ``pct_ceiling``, ``flags`` and ``hint``.
    """
    out: dict = {"bound": None, "binding_roof": None, "basis": None, "ridge": None}
    flags: list[str] = []
    for name, r in roofs.items():
        out[f"pct_roof_{name}"] = _round(pct_of_roof(ai, flops, r.flops, r.bw))
        flags += above_roof_flags(flops, bw, r, name, tolerance)
    basis = next((name for name, r in roofs.items() if r.complete), None) if _pos(ai) else None
    hint = ""
    if basis is not None:
        r = roofs[basis]
        # What this instruction mix can reach: the memory roof, and its share of the compute roof.
        eff = Roofs(r.flops * ceiling_fraction, r.bw)
        side = binding_roof(ai, eff.flops, eff.bw)
        out.update(basis=basis, binding_roof=side, ridge=_round(r.ridge))
        if flops < below_fraction * eff.attainable(ai):
            out["bound"] = BELOW_BOTH
        else:
            out["bound"] = MEMORY_BOUND if side == "memory" else COMPUTE_BOUND
        hint = HINTS[out["bound"]]
        if ceiling_fraction < 1.0:
            out["ceiling_ridge"] = _round(eff.ridge)
            out["pct_ceiling"] = _round(100.0 * flops / eff.attainable(ai))
            if side == "compute":
                hint += (f" This instruction mix can reach at most {100 * ceiling_fraction:.0f}% of the "
                         f"compute roof (a separate multiply and add: 1 FLOP per instruction, not 2), so "
                         f"it turns compute-bound already at {eff.ridge:.3g} FLOP/byte.")
    out["flags"] = flags
    out["hint"] = hint
    return out


def _round(v: float | None, nd: int = 2) -> float | None:
    return round(v, nd) if isinstance(v, float) else v
