"""The ``gputop --doctor`` document as text, readable at 80 columns: the node's status, a table of each GPU's
figures with what a healthy card of its model reaches, every finding other than ok (wrapped, with where its
expectation comes from), the pairs' copy bandwidths, and one line naming what was ok."""

from __future__ import annotations

import textwrap

from gputop.analysis.doctor_findings import DEGRADED, FAILED, NA, OK

WIDTH = 80
# (figure, header, unit line, scale, format)
COLUMNS = (("dram_bytes_per_s", "DRAM", "TB/s", 1e12, "{:.2f}"), ("fp32_flops", "FP32", "TFLOP/s", 1e12, "{:.1f}"),
           ("bf16_flops", "bf16", "TFLOP/s", 1e12, "{:.0f}"), ("bf16_sustained_flops", "bf16 sus", "TFLOP/s", 1e12,
                                                               "{:.0f}"),
           ("sm_clock_loaded_mhz", "SM load", "MHz", 1, "{:.0f}"), ("h2d_bytes_per_s", "H2D", "GB/s", 1e9, "{:.1f}"),
           ("d2h_bytes_per_s", "D2H", "GB/s", 1e9, "{:.1f}"))
COL_W = 9


def _cell(v, scale: float, fmt: str) -> str:
    return "-" if v is None else fmt.format(v / scale)


def _wrap(first: str, text: str, indent: int = 12) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first.ljust(indent), subsequent_indent=" " * indent,
                         break_on_hyphens=False) or [first]


def header_lines(doc: dict) -> list[str]:
    names: dict[str, int] = {}
    for g in doc["gpus"]:
        n = (g.get("name") or "n/a")
        names[n] = names.get(n, 0) + 1
    gpus = ", ".join(f"{c}x {n}" for n, c in names.items()) or "no GPU"
    g0 = doc["gpus"][0] if doc["gpus"] else {}
    lines = _wrap("", f"gputop --doctor ({doc['mode']}) on {doc['hostname']}: {gpus}, driver "
                      f"{g0.get('driver_version') or 'n/a'}, CUDA {g0.get('cuda_driver_version') or 'n/a'}", 0)
    c = doc.get("counts") or {}
    status = (doc.get("status") or "n/a").upper() if doc.get("status") != OK else "HEALTHY"
    stop = f", stopped by {doc['signal']}" if doc.get("interrupted") else ""
    lines.append(f"{status} in {doc['wall_s']:.0f} s{stop}: {c.get(FAILED, 0)} failed, {c.get(DEGRADED, 0)} degraded, "
                 f"{c.get(OK, 0)} ok, {c.get(NA, 0)} not checked (exit {doc['exit_code']})")
    return lines


def table_lines(doc: dict) -> list[str]:
    rows = [g for g in doc["gpus"] if (g.get("active") or {}).get("figures")]
    if not rows:
        return []
    out = ["", "GPU status    " + "".join(h.rjust(COL_W) for _, h, _, _, _ in COLUMNS),
           " " * 14 + "".join(u.rjust(COL_W) for _, _, u, _, _ in COLUMNS)]
    for g in rows:
        f = g["active"]["figures"]
        out.append(f"{g['index']:<3} {g['status']:<9} " + "".join(_cell(f.get(k), s, fmt).rjust(COL_W)
                                                              for k, _, _, s, fmt in COLUMNS))
    expected: dict[str, dict] = {}
    for f in doc["findings"]:
        for r in f.get("references") or []:
            if r["kind"] == "model" and f.get("gpu") is not None:
                name = next((g.get("name") for g in doc["gpus"] if g["index"] == f["gpu"]), "")
                expected.setdefault(name or "", {}).setdefault(f["check"], r["expected"])
    for name, figs in expected.items():
        out.append(f"{'healthy':<13} " + "".join(_cell(figs.get(k), s, fmt).rjust(COL_W)
                                                  for k, _, _, s, fmt in COLUMNS))
        out += _wrap("", f"(healthy: what a healthy {name} reached with the same kernels; the sources are in "
                         "--json)", 2)
    return out


def finding_lines(doc: dict) -> list[str]:
    out = []
    node = [f for f in doc["findings"] if f.get("gpu") is None and not f.get("gpus") and f["status"] != OK]
    for f in node:
        out += _wrap(f"  {f['status']}", f["message"])
    for g in doc["gpus"]:
        mine = [f for f in doc["findings"] if f.get("gpu") == g["index"] and f["status"] in (FAILED, DEGRADED, NA)]
        if not mine and g["status"] == OK:
            continue
        out += ["", f"GPU {g['index']} {g.get('name') or ''} ({g.get('pci_bus_id') or 'n/a'}): {g['status']}"]
        for f in sorted(mine, key=lambda f: (f["status"] != FAILED, f["status"] != DEGRADED)):
            out += _wrap(f"  {f['status']}", f["message"])
            if f["status"] in (FAILED, DEGRADED) and f.get("source") and f.get("references"):
                out += _wrap("", f"expected from: {f['source']}")
    return out


def pair_lines(doc: dict) -> list[str]:
    pairs = doc.get("pairs") or []
    if not pairs:
        return []
    idx = sorted({i for p in pairs for i in p["gpus"]})
    bw = {tuple(p["gpus"]): p.get("bytes_per_s") for p in pairs}
    kinds = {}
    for p in pairs:
        kinds.setdefault(p.get("kind") or "n/a", p.get("peak_bytes_per_s"))
    links = ", ".join(f"{k}, peak {v / 1e9:.0f}" if v else k for k, v in sorted(kinds.items()))
    out = ["", *_wrap("", f"GPU to GPU copies, GB/s (row: from, column: to; {links}):", 0),
           "     " + "".join(f"{j:>7}" for j in idx)]
    for i in idx:
        out.append(f"{i:>4} " + "".join(f"{'-':>7}" if i == j else f"{_cell(bw.get((i, j)), 1e9, '{:.0f}'):>7}"
                                         for j in idx))
    bad = [f for f in doc["findings"] if f.get("gpus") and f["status"] in (FAILED, DEGRADED)]
    for f in bad:
        out += _wrap(f"  {f['status']}", f["message"])
    return out


def ok_lines(doc: dict) -> list[str]:
    checks = sorted({f["check"] for f in doc["findings"] if f["status"] == OK})
    return ["", *_wrap("", f"ok: {len([f for f in doc['findings'] if f['status'] == OK])} findings ("
                       + ", ".join(checks) + "); --json has every number and its source", 0)] if checks else []


def doctor_text(doc: dict) -> str:
    """The whole report."""
    if doc.get("status") is None:
        return "gputop --doctor: " + "; ".join(e["message"] for e in doc.get("errors") or []) + "\n"
    lines = header_lines(doc) + table_lines(doc) + finding_lines(doc) + pair_lines(doc) + ok_lines(doc)
    for e in doc.get("errors") or []:
        lines += _wrap("  error", e["message"])
    if doc.get("state_files"):
        lines += ["", *_wrap("", f"kept for --export and the TUI: {', '.join(doc['state_files'])}", 0)]
    return "\n".join(lines) + "\n"
