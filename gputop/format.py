"""Small formatters shared by the text outputs and the TUI ("n/a" for None)."""

from __future__ import annotations

NA = "n/a"


def pct(v: float | None, digits: int = 0) -> str:
    return NA if v is None else f"{v:.{digits}f}%"


def si(v: float | None, unit: str = "", digits: int = 3) -> str:
    """3 significant digits with an SI prefix: si(4.8e12, 'B/s') -> '4.80 TB/s'."""
    if v is None:
        return NA
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{v:.{digits}g} {unit}".rstrip()


def gb(v: float | None) -> str:
    """Bytes as GiB with one decimal."""
    return NA if v is None else f"{v / 2**30:.1f}"
