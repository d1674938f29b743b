"""A workload's results and verdict as a person reads them: labelled lines and tables, never a dict's repr, and
never a field's name for a unit (:func:`label`: ``busbw_gbps`` is "busbw (GB/s)", ``step_ms`` "step (ms)").

``gputop --run NAME`` (without ``--json``) and ``python workloads/NAME.py`` write them alike, around the
key figure (:mod:`.figures`); the TUI's results panel puts a verdict's fields in :func:`words` too, and its bars
say their values with :func:`quantity`.
"""

from __future__ import annotations

import re

from gputop.analysis.verdict import display_name


# a field's unit, by the end of its name (checked in order: the longest first)
UNITS = (("_gb_per_s", "GB/s"), ("_tflops", "TFLOP/s"), ("_gflops", "GFLOP/s"), ("_gbps", "GB/s"), ("_bytes", "bytes"),
         ("_mhz", "MHz"), ("_pct", "%"), ("_ms", "ms"), ("_us", "us"), ("_ns", "ns"), ("_s", "s"), ("_w", "W"))


def unit_of(key: str) -> tuple[str, str | None]:
    """(what, unit) of a field's name: ``busbw_gbps`` -> ("busbw", "GB/s"); ``samples_per_s`` -> ("samples/s",
    None) (a rate is its own unit); a name without a unit -> (its words, None)."""
    k = str(key)
    if k.endswith("_per_s"):
        return k[:-len("_per_s")].replace("_", " ") + "/s", None
    if re.search(r"_per_[a-z]+$", k):  # a rate in words: "spin cycles per us"
        return k.replace("_", " "), None
    for end, unit in UNITS:
        if k.endswith(end) and len(k) > len(end):
            return k[:-len(end)].replace("_", " "), unit
    return k.replace("_", " "), None


def label(key) -> str:
    """A field's name for people: "busbw (GB/s)", "step (ms)", "samples/s", "speedup vs eager"."""
    what, unit = unit_of(key)
    return f"{what} ({unit})" if unit else what


def quantity(key, v: float) -> str:
    """A value with its unit and what it is: "36.81 ms step", "47.2 GB/s busbw", "1234 samples/s"."""
    what, unit = unit_of(key)
    return f"{v:.4g} {unit} {what}" if unit else f"{v:.4g} {what}"


def cell(v) -> str:
    """A value as the text report writes it: n/a, 4 significant digits, yes/no, a list joined by commas."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(cell(x) for x in v) or "none"
    return str(v)


def table(rows: list[dict], cols: list[str], indent: str = "  ") -> list[str]:
    """Rows under a header of their columns (labelled for people: :func:`label`), right-aligned."""
    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    heads = [label(c) for c in cols]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(heads)]
    out = [indent + "  ".join(h.rjust(w) for h, w in zip(heads, widths))]
    out += [indent + "  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return out


def _flat(v) -> bool:
    """A dict of plain values (no dict or list in it)."""
    return isinstance(v, dict) and bool(v) and not any(isinstance(x, (dict, list, tuple)) for x in v.values())


def _named_table(rows: dict[str, dict], cols: list[str], indent: str, corner: str = "") -> list[str]:
    """A table whose rows have names (the first column, left-aligned) and whose columns are labelled."""
    names = [str(n) for n in rows]
    first = max([len(corner)] + [len(n) for n in names])
    body = table([rows[n] for n in rows], cols, "")
    return [indent + f"{corner:<{first}}  " + body[0]] + \
        [indent + f"{n:<{first}}  " + line for n, line in zip(names, body[1:])]


def result_lines(results: dict, indent: str = "  ") -> list[str]:
    """A workload's results, one labelled line per value: a short dict of values on its key's line; dicts of
    values that share their keys (fusion's speed-up, kernels per call and first call, each by variant) as one table
    with a row per shared key, and a dict of such dicts (cudagraphs' MLPs) as a table with a row per dict; other
    dicts indented under their key, lists of dicts as tables, lists of values joined. Names are labelled for
    people (:func:`label`)."""
    out = []
    flat = {k: v for k, v in results.items() if _flat(v)}
    rows = list(dict.fromkeys(r for v in sorted(flat.values(), key=len, reverse=True) for r in v))  # the fullest's order
    shared = len(flat) >= 2 and all(len(set(v) & set(rows)) * 2 >= len(rows) for v in flat.values())
    tabled = False
    for key, v in results.items():
        if shared and key in flat:  # the dicts of values that share their keys: one table, where the first was
            if not tabled:
                cols = list(flat)
                out += _named_table({r: {c: flat[c].get(r) for c in cols} for r in rows}, cols, indent)
                tabled = True
            continue
        line = f"{indent}{label(key)}: " + ", ".join(f"{k} {cell(x)}" for k, x in v.items()) if _flat(v) else ""
        if _flat(v) and len(line) <= 100:
            out.append(line)
        elif isinstance(v, dict) and len(v) >= 2 and all(_flat(x) for x in v.values()):
            cols = list(dict.fromkeys(c for x in v.values() for c in x))
            out.append(f"{indent}{label(key)}:")
            out += _named_table({str(n): x for n, x in v.items()}, cols, indent + "  ")
        elif isinstance(v, dict):
            out.append(f"{indent}{label(key)}:" + ("" if v else " none"))
            out += result_lines(v, indent + "  ")
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(k for x in v for k, y in x.items() if not isinstance(y, (dict, list))))
            out.append(f"{indent}{label(key)}:")
            out += table(list(v), cols, indent + "  ")
        elif isinstance(v, (list, tuple)) and any(isinstance(x, (dict, list)) for x in v):
            out.append(f"{indent}{label(key)}:")
            out += [line for i, x in enumerate(v) for line in result_lines({f"#{i + 1}": x}, indent + "  ")]
        else:
            out.append(f"{indent}{label(key)}: {cell(v)}")
    return out


def words(v) -> str:
    """A verdict field in words: a list joined with '; ', a dict as 'key value' pairs (the keys labelled)."""
    if isinstance(v, (list, tuple)):
        return "; ".join(words(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{label(k)} {cell(x)}" for k, x in v.items())
    return cell(v)


def verdict_lines(v: dict | None) -> list[str]:
    """A verdict: its class, evidence, notes and advice, one labelled line each."""
    if not v:
        return []
    conf = f" (confidence {v['confidence']:.2f})" if v.get("confidence") is not None else ""
    lines = [f"verdict: {display_name(v)}{conf}", f"  evidence: {words(v.get('evidence_text')) or 'n/a'}"]
    lines += [f"  note: {words(n)}" for n in v.get("notes") or []]
    if v.get("advice"):
        lines.append(f"  advice: {words(v['advice'])}")
    return lines
