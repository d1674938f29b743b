"""Live and finished workload results as text: a lesson's own view, the roofline plot, or throughput bars.

Pure (Rich ``Text`` only). Reads the run document's ``points`` / ``results`` / ``device.peaks``. A workload
with a view of its own (:mod:`gputop.tui.results.lessons`, by its name) is drawn by it; any other whose points look
like a roofline's (FLOP/byte and FLOP/s) by the roofline lesson's view; the rest as bars. The field names
workloads use are matched by the small tables below, so a new workload shows up as bars without TUI changes.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from gputop.analysis.verdict import display_name
from gputop.format import si
from gputop.lessons.report_lines import quantity, words
from gputop.tui.results import lessons
from gputop.tui.widgets import charts

CONSOLE = Console(width=400, color_system=None, file=None, legacy_windows=False)
# Unit multipliers recognised in key names (checked in order).
_SCALE = (("tflop", 1e12), ("gflop", 1e9), ("mflop", 1e6), ("tb_per_s", 1e12), ("tbps", 1e12), ("tb_s", 1e12),
          ("gb_per_s", 1e9), ("gbps", 1e9), ("gb_s", 1e9), ("mb_per_s", 1e6), ("mbps", 1e6))
X_KEYS = ("arithmetic_intensity", "intensity", "ai_flop_per_byte", "flop_per_byte", "ai")
LABEL_KEYS = ("phase", "mode", "name", "label", "variant", "precision", "dtype", "batch_size", "batch",
              "num_workers", "workers", "k", "size")
VALUE_KEYS = ("throughput", "samples_per_s", "items_per_s", "images_per_s", "tokens_per_s", "it_per_s",
              "steps_per_s", "launches_per_s", "tflops", "tflop_per_s", "gflops", "gflop_per_s", "flops",
              "flop_per_s", "bytes_per_s", "gb_per_s", "gbps", "us_per_kernel", "step_ms", "speedup")
LOWER_IS_BETTER = ("us_per_kernel", "step_ms")
LOWER_NOTE = ", lower is better"
# what makes two points runs of different models ("% of best" compares only the runs of one): cudagraphs' MLPs
MODEL_KEYS = ("part", "layers", "width")


def scaled(key: str, value):
    """``value`` in base units (FLOP/s, bytes/s) judging by the unit in ``key``."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    k = key.lower()
    for part, mul in _SCALE:
        if part in k:
            return float(value) * mul
    return float(value)


def _first(d: dict, keys) -> tuple[str | None, object]:
    for k in keys:
        if k in d and d[k] is not None:
            return k, d[k]
    return None, None


def _flops_key(d: dict) -> str | None:
    for k, v in d.items():
        kl = k.lower()
        if "flop" in kl and "per_byte" not in kl and "peak" not in kl and "pct" not in kl and isinstance(v, (int, float)):
            return k
    return None


def roofline_points(points: list[dict]) -> list[tuple[float, float]]:
    """(FLOP/byte, FLOP/s) of every point that has both."""
    out = []
    for p in points:
        xk, x = _first(p, X_KEYS)
        yk = _flops_key(p)
        if xk is None or yk is None:
            continue
        y = scaled(yk, p[yk])
        if isinstance(x, (int, float)) and y:
            out.append((float(x), y))
    return out


def measured_roof(results: dict) -> tuple[float | None, float | None]:
    """(bytes/s, FLOP/s) of the measured roofs in a roofline run's results, if there."""
    bw = flops = None
    for k, v in results.items():
        kl = k.lower()
        if isinstance(v, dict):
            b, f = measured_roof(v)
            bw, flops = bw or b, flops or f
            continue
        if not isinstance(v, (int, float)) or "pct" in kl or "theoretical" in kl:
            continue
        if bw is None and ("bandwidth" in kl or kl.startswith("bw") or "_bw" in kl or "bytes_per_s" in kl):
            bw = scaled(k, v)
        elif flops is None and "flop" in kl and "per_byte" not in kl and ("peak" in kl or "roof" in kl or "measured" in kl):
            flops = scaled(k, v)
    return bw, flops


# What tells apart the points of one phase (allreduce: a size per point of "bus bandwidth", a mode per "ddp step")
TELL_APART = ("mode", "size_bytes", "batch_size", "batch", "k", "size", "name", "variant", "precision", "dtype",
              "num_workers", "workers")


def _told_apart(p: dict, same_phase: list[dict]) -> str:
    """The phase of ``p``, with the first key whose value differs among the points of that phase."""
    for k in TELL_APART:
        if len({repr(q.get(k)) for q in same_phase}) > 1 and p.get(k) is not None:
            return f"{p['phase']} {si(p[k], 'B') if k == 'size_bytes' else p[k]}"
    return str(p["phase"])


def bar_items(points: list[dict]) -> list[tuple[str, float | None, str, float | None, tuple]]:
    """(label, value, value key, peak or None, group) per point; value None for an OOM / skipped point. The group: the
    value key and the point's ``MODEL_KEYS``: the points one "% of best" compares."""
    items = []
    phases: dict[str, list[dict]] = {}
    for p in points:
        if p.get("phase"):
            phases.setdefault(str(p["phase"]), []).append(p)
    for p in points:
        label = _told_apart(p, phases[str(p["phase"])]) if p.get("phase") else " ".join(
            f"{k}={p[k]}" for k in LABEL_KEYS if k in p and p[k] is not None) or f"#{len(items) + 1}"
        if p.get("oom") or p.get("skipped"):
            items.append((label, None, "out of memory" if p.get("oom") else "skipped", None, ()))
            continue
        vk, v = _first(p, VALUE_KEYS)
        if vk is None:
            vk = next((k for k, x in p.items() if isinstance(x, (int, float)) and not isinstance(x, bool)
                       and k not in LABEL_KEYS), None)
            v = p.get(vk) if vk else None
        if vk is None or not isinstance(v, (int, float)):
            continue
        peak = None
        for pk in (f"{vk}_peak", f"peak_{vk}"):
            if isinstance(p.get(pk), (int, float)):
                peak = float(p[pk])
                break
        items.append((label, float(v), vk, peak, (vk, *(repr(p.get(k)) for k in MODEL_KEYS))))
    return items


def bars_view(doc: dict, width: int, height: int) -> list[Text]:
    """One bar per point (phase / mode / batch size) against its peak, or against the best run of the same model
    (its group: :func:`bar_items`), its value with its unit (``report_lines.quantity``)."""
    items = bar_items(doc.get("points") or [])
    if not items:
        return [Text("no results yet", style="dim")]
    label_w = min(28, max(len(i[0]) for i in items))
    by_group: dict[tuple, list[float]] = {}
    for _, v, _, _, group in items:
        if v is not None:
            by_group.setdefault(group, []).append(v)
    rows = []
    for label, v, key, peak, group in items[-max(1, height):]:
        if v is None:
            rows.append((label, None, key, "", ""))
            continue
        same = by_group[group]
        best = min(same) if key in LOWER_IS_BETTER else max(same)
        ref = peak or max(same)
        if peak:
            note = f" ({100 * v / peak:.0f}% of peak {peak:.4g})"
        elif key in LOWER_IS_BETTER:
            note = f" ({best / v:.0%} of best{LOWER_NOTE})" if v else ""
        else:
            note = f" ({v / best:.0%} of best)" if best else ""
        rows.append((label, v / ref if ref else 0.0, "cyan" if peak else "green", f" {quantity(key, v)}", note))
    # the bars take what the labels and the longest value + note leave, so no note is cut; where that leaves
    # under 4 columns, the notes lose "lower is better", then the labels shrink
    longest = max(len(r[3]) + len(r[4]) for r in rows)
    if width - label_w - 1 - longest < 4:
        rows = [(lb, f, st, val, note.replace(LOWER_NOTE, "")) for lb, f, st, val, note in rows]
        longest = max(len(r[3]) + len(r[4]) for r in rows)
        label_w = max(6, min(label_w, width - 5 - longest))
    bar_w = max(4, width - label_w - 1 - longest)
    lines = []
    for label, fraction, style, value, note in rows:
        t = Text(f"{label[:label_w]:<{label_w}} ")
        if fraction is None:
            t.append(style, style="bold red")  # (for an OOM / skipped point: its word)
        else:
            t.append(charts.hbar(fraction, bar_w), style=style)
            t.append(value)
            t.append(note, style="dim")
        lines.append(t)
    return lines


def status_line(doc: dict, progress: dict | None = None, recorded_on: str | None = None) -> Text:
    """``recorded_on``: the host a replayed recording was made on (its GPU is named, not this machine's)."""
    status = doc.get("status", "?")
    style = {"running": "bold cyan", "ok": "bold green", "pending": "dim"}.get(status, "bold red")
    t = Text.assemble((f"{doc.get('workload')} ", "bold"))
    t.append(status, style=style)
    t.append(f"  {doc.get('wall_time_s', 0):.1f} s")
    dev = doc.get("device") or {}
    where = "CPU" if dev.get("kind") == "cpu" else f"GPU {dev.get('nvml_index')}"
    if recorded_on is not None:  # a recording: its machine's GPU (or CPU), not this one's
        gpu = ((dev.get("static") or {}).get("name") or "?").replace("NVIDIA ", "")
        where += ("" if dev.get("kind") == "cpu" else f" ({gpu})") + f" of host {recorded_on or '?'}, recorded"
    t.append(f"  on {where}")
    phases = doc.get("phases") or []
    if phases:
        t.append(f"  phase: {phases[-1]['name']}")
    if progress and progress.get("total"):
        t.append(f"  {progress.get('done')}/{progress.get('total')}")
        if progress.get("message"):
            t.append(f" {progress['message']}", style="dim")
    for e in (doc.get("errors") or [])[-1:]:
        t.append(f"  error: {e.get('message')}", style="red")
    return t


CUT = "… (v)"  # a verdict line cut short: v shows the whole verdict in the plot's place


def _wrapped(label: str, text: str, width: int, n: int, style: str = "") -> list[Text]:
    """``label: text`` in at most ``n`` lines of ``width``, the last one cut with … (v) when it runs over."""
    t = Text.assemble((label, "bold"), (text, style))
    lines = list(t.wrap(CONSOLE, max(20, width), overflow="fold"))
    if len(lines) > n:
        lines = lines[:max(1, n)]
        lines[-1].truncate(max(1, width - len(CUT)))
        lines[-1].append(CUT, style="dim")
    return lines


def results_lines(doc: dict, width: int, height: int, whole_verdict: bool = False) -> list[Text]:
    """The whole results panel for one run: a status line, then the plot or the bars, then the verdict
    as short lines: class, evidence, advice. ``whole_verdict`` (key v): the verdict alone, wrapped whole, in the
    plot's place (at 80x24 the plot leaves it a few rows)."""
    body_h = max(0, height - 1)
    verdict = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else None
    tail: list[Text] = []
    if verdict and whole_verdict:
        out = _wrapped("verdict: ", display_name(verdict) if verdict.get("class") else "", width, body_h, "bold yellow")
        out += _wrapped("evidence: ", words(verdict.get("evidence_text") or verdict.get("evidence")), width, body_h)
        if verdict.get("advice"):
            out += _wrapped("advice: ", words(verdict["advice"]), width, body_h, "italic")
        out.append(Text("v: the plot again", style="dim"))
        return out[:body_h]
    if verdict and (verdict.get("evidence_text") or verdict.get("evidence")):
        small = body_h < 18  # 80x24: the plot first, a line each
        name = display_name(verdict) if verdict.get("class") else ""
        # the class wraps like the monitor's verdict panel (a roofline's names its ridge and both sides)
        tail = _wrapped("verdict: ", name, width, 3, "bold yellow")
        # 80x24: evidence and advice wrap into the rows the plot spares above its least (7), cut only past them
        spare = max(2, body_h - 7 - len(tail)) if small else 4
        evidence = _wrapped("evidence: ", words(verdict.get("evidence_text") or verdict.get("evidence")), width,
                            min(spare - 1, 3) if verdict.get("advice") else spare)
        tail += evidence
        if verdict.get("advice"):
            tail += _wrapped("advice: ", words(verdict["advice"]), width, spare - len(evidence) if small else 2,
                             "italic")
    room = max(0, body_h - len(tail))
    own = lessons.view(doc.get("workload"))
    if own is None and roofline_points((doc.get("points") or [])[:5]):
        own = lessons.view("roofline")  # points of FLOP/byte and FLOP/s: plotted against the roofs
    body = own(doc, width, room) if own is not None else bars_view(doc, width, room)
    return (body[:room] + tail)[:body_h]
