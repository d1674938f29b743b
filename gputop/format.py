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


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 GPU', '2 GPUs', '0 GPUs' (``plural``: where adding an s is wrong: '1 process', '3 processes')."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def span_text(seconds: float) -> str:
    """A chart's time span for people: '60 s', '90 s' (under two minutes), '2 min 54 s', '15 min', '2 h', '2 h 30 min'."""
    s = round(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        m, s = divmod(s, 60)
        return f"{m} min" + (f" {s} s" if s else "")
    h, m = divmod(round(s / 60), 60)
    return f"{h} h" + (f" {m} min" if m else "")


def scale_text(v: float) -> str:
    """A chart's scale end as a person writes it: 100, 700, 140 (140.401 GiB), 79.6 (79.6465 GiB), 2.5, 0.25."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    text = f"{v:.1f}" if abs(v) >= 10 else f"{v:.2g}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gb(v: float | None) -> str:
    """Bytes as GiB with one decimal."""
    return NA if v is None else f"{v / 2**30:.1f}"


# -- why a field is n/a ------------------------------------------------------------------------------
GPM_NA = "n/a (needs Hopper+ GPM)"  # only where NVML recorded no reason of its own
# NVML calls a GPM metric depends on (Nvml.na_reasons keys), after the metric's own field.
GPM_CALLS = ("gpm_metrics", "gpm_sample", "gpm_alloc", "gpm_supported")
REASON_W = 24  # a recorded reason is cut to this many characters (the device panel fits 80x24)


def na_text(reasons: dict[str, str] | None, fields: tuple[str, ...], default: str = NA) -> str:
    """"n/a (NVML: <reason>)" for the first of ``fields`` with a recorded reason, else ``default``."""
    for f in fields:
        why = (reasons or {}).get(f)
        if why:
            why = str(why)
            return f"n/a (NVML: {why if len(why) <= REASON_W else why[:REASON_W - 1] + '…'})"
    return default


def gpm_na(reasons: dict[str, str] | None, field: str, gpm_supported: bool) -> str:
    """Why a GPM metric is n/a: NVML's recorded reason (for the metric, else for the GPM calls), else
    the generic GPM_NA on a GPU without GPM (plain n/a on one with it)."""
    return na_text(reasons, (field, *GPM_CALLS), NA if gpm_supported else GPM_NA)
