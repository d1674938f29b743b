"""The report of a monitored run (``--run -- CMD`` / ``--watch PID``): the document, its text, and how it goes out
(:func:`write_report`, for both frontends).

Schema: ``gputop/schema/monitor.schema.json``. ``exit_code`` is gputop's own exit code (the command's,
or 6 after --timeout, or 128+N when signal N stopped gputop); ``command_exit_code`` is the command's
as a shell reports it.
"""

from __future__ import annotations

import platform
import shlex

from gputop import exitcodes
from gputop.analysis.attribution import apply_window, discount_profiler_idle, window_for_gpu
from gputop.analysis.idle import idle_line
from gputop.analysis.timeline import format_timeline
from gputop.analysis.verdict import display_name
from gputop.analysis.vocabulary import Cls
from gputop.documents import emit, header, signal_fields
from gputop.format import gb, pct


def build_document(mode: str, monitor, facts: dict, command: list[str] | None, started_at: str,
                   log: str | None = None, attribution: dict | None = None,
                   exclude: list[tuple[float, float]] | None = None) -> dict:
    """The monitor document of a finished run: ``facts`` from :meth:`gputop.session.command.Session.facts`;
    ``attribution``: the profiler windows of ``--profile`` (:meth:`gputop.session.profiling.ProfileWindows.result`),
    whose last finding the run's verdict takes in (:func:`gputop.analysis.attribution.apply_window`).
    ``exclude``: the spans (the monitor's clock) the profiler held the program: left out of the timelines."""
    diag = monitor.diagnose(exclude=exclude)
    if attribution:
        attribution = dict(attribution, windows=[discount_profiler_idle(w, diag.verdict) if w.get("finding")
                                                 else w for w in attribution.get("windows", [])])
    found = [w for w in (attribution or {}).get("windows", []) if w.get("status") == "ok" and w.get("finding")]
    pids = monitor.pids_by_gpu() if attribution and attribution.get("windows") else {}
    if found:
        w, gpu = found[-1], getattr(diag.verdict, "gpu", None)
        if w.get("per_process") and gpu is not None:  # a job: the window of the rank on the run verdict's GPU
            w = discount_profiler_idle(window_for_gpu([w], pids.get(gpu, set())) or w, diag.verdict)
        diag.verdict = apply_window(diag.verdict, w)
    if pids:  # each GPU with the window of a process that held it
        for g in diag.gpus:
            w = window_for_gpu(attribution["windows"], pids.get(g.index, set()))
            if w is not None and g.verdict:
                g.verdict = apply_window(g.verdict, discount_profiler_idle(w, g.verdict))
    src = monitor.source
    return {
        **header("monitor"),
        "mode": mode,
        "status": facts.get("status"),
        "command": command,
        "pid": facts.get("pid"),
        "exit_code": facts.get("exit_code"),
        "command_exit_code": facts.get("command_exit_code"),
        "ended": facts.get("ended"),
        **signal_fields(facts.get("signal")),
        "started_at": started_at,
        "wall_s": facts.get("wall_s"),
        "log": log,
        "source": {"kind": src.kind, "path": src.path},
        "host": {"hostname": platform.node()},
        "errors": facts.get("errors") or [],
        **diag.to_dict(),
        "attribution": attribution,
    }


# -- text output ------------------------------------------------------------------------------------------
def render_text(doc: dict) -> str:
    lines = []
    if doc["mode"] == "run":
        lines.append(f"gputop: `{shlex.join(doc['command'])}` {_ended(doc)} after {doc['wall_s']:.1f} s")
    else:
        lines.append(f"gputop: watched pid {doc['pid']} for {doc['wall_s']:.1f} s ({doc['ended']})")
    for n in doc.get("notes") or []:
        lines.append(f"  note: {n}")
    for g in doc["gpus"]:
        seen = (f"found by {doc['gpu_detection']} at {g['first_seen_s']:.1f} s" if g["used"]
                else "not used by the command")
        lines.append("")
        lines.append(f"GPU {g['index']} ({g.get('name') or 'n/a'}), {seen}")
        if g["timeline"]:
            lines.append("  timeline:")
            lines += ["  " + ln for ln in format_timeline(g["timeline"])]
        v = g["verdict"]
        if v:
            lines += _verdict_lines(v, "  ")
        s = g.get("summary") or {}
        lines.append("  summary: " + _summary_text(s))
    v = doc["verdict"]
    lines.append("")
    host = (doc.get("host") or {}).get("summary")  # no GPU seen: the command's CPU use is what there is to say
    if host:
        lines.append(f"CPU: the command {_mean_max(host.get('workload_cpu_pct'))} (100% = one core; "
                     f"{doc['host'].get('cpu_count')} here), the host {_mean_max(host.get('host_cpu_pct'))}")
    if v is None:
        lines.append("verdict: none (no GPU seen)")
    else:
        lines += _verdict_text(v, doc)
    if doc.get("culprit"):
        lines.append(culprit_line(doc["culprit"]))
    lines += _attribution_lines(doc.get("attribution"))
    if doc["mode"] == "run":
        lines.append(f"exit code {doc['exit_code']}")
    elif doc.get("interrupted"):
        lines.append(f"stopped by {doc['signal']}: exit code {doc['exit_code']}")
    return "\n".join(lines) + "\n"


def culprit_line(c: dict) -> str:
    """The job's culprit in one line: who and where, and how soon it was named."""
    when = (f" (named {c['named_after_s']:g} s after the stall began at {c['stall_began_s']:g} s)"
            if c.get("named_after_s") is not None else "")
    where = c.get("where") or c.get("sentence") or "?"
    if c.get("basis") == "telemetry":
        return f"culprit (from telemetry; no rank's stack was read): {where}"
    if c.get("kind") in ("none", "unreadable"):
        return f"culprit: none named: {c.get('sentence')}{when}"
    return f"culprit: {where}{when}"


def _mean_max(mm: dict | None) -> str:
    mm = mm or {}
    return f"{pct(mm.get('mean'))} on average, {pct(mm.get('max'))} at most"


def _verdict_text(v: dict, doc: dict) -> list[str]:
    lines = []
    lines.append(f"verdict: {display_name(v)} (confidence {v['confidence']:.2f})"
                 + (f" on GPU {v['gpu']}" if v.get("gpu") is not None and len(doc["gpus"]) > 1 else ""))
    if _is_mixed(v):
        lines.append(f"  a mixed run: {_shares(v)}")
    lines.append(f"  {v['evidence_text']}")
    lines.append(f"  advice: {v['advice']}")
    return lines


def _attribution_lines(a: dict | None) -> list[str]:
    """The profiler windows (--profile): one line each, then the top categories, kernels and ops of the last."""
    if not a:
        return []
    out = ["", f"profiler windows ({a['seconds']:g} s each):"]
    if a.get("why_none"):
        out.append(f"  none: {a['why_none']}")
    ok = [w for w in a["windows"] if w["status"] == "ok"]
    for w in a["windows"]:
        if w["status"] != "ok":
            if not a.get("why_none"):
                out.append(f"  window {w['seq']} ({w['asked_because']}): none: {w['why_none']}")
            continue
        busy = (f", GPU busy {pct(100 * w['gpu_busy_share'])} / idle {pct(100 * w['gpu_idle_share'])}"
                if w.get("gpu_busy_share") is not None else "")
        steps = f", {w['steps']} steps" if w.get("steps") else ""
        out.append(f"  window {w['seq']} at {w['asked_at_s']:.1f} s ({w['asked_because']}): {w['wall_s']:.2f} s{busy}{steps}")
        if w.get("finding"):
            out.append(f"    {w['headline']}")
    if ok:
        w = ok[-1]
        unit = "kernel" if w["basis"] == "kernels" else "host op"
        out.append(f"    {unit} time by category: " + ", ".join(
            f"{c['category']} {pct(100 * c['share'])}" for c in w["categories"][:6]))
        for title, rows, key in (("top kernels", w["top_kernels"], "total_us"),
                                 ("top ops", w["top_ops"], "device_us" if w["basis"] == "kernels" else "self_cpu_us")):
            if rows:
                out.append(f"    {title}:")
                out += [f"      {r[key] / 1e3:8.2f} ms  {r['count']:6d}x  mean {r['mean_us']:.1f} us  {r['name'][:70]}"
                        for r in rows[:5]]
        if w.get("kernels_per_step"):
            out.append(f"    {w['kernels_per_step']:.0f} kernels a step")
        if w["basis"] == "kernels":
            out.append(f"    {idle_line(w.get('idle'))}")
    return out


def _is_mixed(v: dict) -> bool:
    return v.get("share") is not None and v["share"] < 0.5 and bool(v.get("mixed"))


def _shares(v: dict) -> str:
    busy = {c: d for c, d in (v.get("time_by_class_s") or {}).items() if c != Cls.IDLE}
    total = sum(busy.values()) or 1.0
    return ", ".join(f"{c} {pct(100 * d / total)}" for c, d in sorted(busy.items(), key=lambda x: -x[1]))


def _ended(doc):
    if doc.get("interrupted"):
        return f"was stopped by gputop's {doc['signal']} (its code {doc.get('command_exit_code')})"
    if doc["ended"] == "exited":
        return f"exited with code {doc['exit_code']}"
    if doc["ended"] == "timeout":
        return "was stopped at its timeout"
    return f"ended ({doc['ended']}, code {doc['exit_code']})"


def _verdict_lines(v: dict, ind: str) -> list[str]:
    share = ""
    if v.get("share") is not None:
        share = f", {pct(100 * v['share'])} of the {'run' if v['class'] == Cls.IDLE else 'busy time'}"
    out = [f"{ind}verdict: {display_name(v)}, confidence {v['confidence']:.2f}{share}",
           f"{ind}  evidence: {v['evidence_text']}",
           f"{ind}  advice: {v['advice']}"]
    if _is_mixed(v):
        out.append(f"{ind}  a mixed run (busy time): {_shares(v)}")
    elif v.get("mixed"):
        out.append(f"{ind}  also: {', '.join(v['mixed'])}")
    for n in v.get("notes") or []:
        out.append(f"{ind}  note: {n}")
    for m in v.get("missing") or []:
        out.append(f"{ind}  missing: {m}")
    return out


def _summary_text(s: dict) -> str:
    def mm(key, unit="%"):
        v = s.get(key) or {}
        if not isinstance(v, dict) or v.get("mean") is None:
            return "n/a"
        if unit == "%":
            return f"{v['mean']:.0f}/{v['max']:.0f}%"
        return f"{v['mean']:.0f}/{v['max']:.0f} {unit}"

    parts = [f"mean/max SM active {mm('sm_active_pct')}", f"kernels {mm('util_gpu_pct')}",
             f"DRAM {mm('dram_bw_pct')}", f"tensor {mm('tensor_pct')}", f"power {mm('power_w', 'W')}"]
    if isinstance(s.get("sm_clock_mhz"), dict):
        parts.append(f"SM clock {mm('sm_clock_mhz', 'MHz')}")
    if isinstance(s.get("mem_used_bytes"), dict) and s["mem_used_bytes"].get("max") is not None:
        parts.append(f"memory max {gb(s['mem_used_bytes']['max'])} GiB")
    if s.get("clock_reasons_seen"):
        parts.append("clock events: " + ", ".join(s["clock_reasons_seen"]))
    if isinstance(s.get("workload_cpu_pct"), dict) and s["workload_cpu_pct"].get("mean") is not None:
        parts.append(f"process CPU {mm('workload_cpu_pct')}")
    return ", ".join(parts)


def write_report(doc: dict, *, json_mode: bool = False, output: str | None = None) -> int:
    """The report out (``output`` first, then stdout as JSON or text); gputop's exit code."""
    if not emit(doc, json_mode=json_mode, output=output, render_text=render_text):
        return doc["exit_code"] or exitcodes.FAILED
    return doc["exit_code"]
