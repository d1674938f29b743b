"""A workload's results and verdict as a person reads them: labelled lines and tables, never a dict's repr.

``gputop --run NAME`` (without ``--json``) and ``python workloads/NAME.py`` write them alike, around the
key figure (:mod:`.figures`); the TUI's results panel puts a verdict's fields in :func:`words` too.
"""

from __future__ import annotations

from gputop.analysis.verdict import display_name


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
    """Rows under a header of their columns, right-aligned."""
    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    out = [indent + "  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    out += [indent + "  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return out


def result_lines(results: dict, indent: str = "  ") -> list[str]:
    """A workload's results, one labelled line per value: a short dict of values on its key's line, other
    dicts indented under their key, lists of dicts as tables, lists of values joined."""
    out = []
    for key, v in results.items():
        flat = isinstance(v, dict) and v and not any(isinstance(x, (dict, list, tuple)) for x in v.values())
        line = f"{indent}{key}: " + ", ".join(f"{k} {cell(x)}" for k, x in v.items()) if flat else ""
        if flat and len(line) <= 100:
            out.append(line)
        elif isinstance(v, dict):
            out.append(f"{indent}{key}:" + ("" if v else " none"))
            out += result_lines(v, indent + "  ")
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(k for x in v for k, y in x.items() if not isinstance(y, (dict, list))))
            out.append(f"{indent}{key}:")
            out += table(list(v), cols, indent + "  ")
        elif isinstance(v, (list, tuple)) and any(isinstance(x, (dict, list)) for x in v):
            out.append(f"{indent}{key}:")
            out += [line for i, x in enumerate(v) for line in result_lines({f"#{i + 1}": x}, indent + "  ")]
        else:
            out.append(f"{indent}{key}: {cell(v)}")
    return out


def words(v) -> str:
    """A verdict field in words: a list joined with '; ', a dict as 'key value' pairs."""
    if isinstance(v, (list, tuple)):
        return "; ".join(words(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {cell(x)}" for k, x in v.items())
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
