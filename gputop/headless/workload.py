"""``gputop --run NAME``: run a workload without the TUI; a readable summary, or one JSON document.

Everything is checked before launch (workload name, parameters, the GPU, the output paths): bad input
is one line on stderr and exit 2 (no GPU: exit 3). With ``--json`` stdout holds exactly one document
even then (an error document). SIGINT, SIGTERM and SIGHUP stop the workload through the one supervisor
(SIGINT, then SIGKILL to its group after the grace period; a second signal kills at once); the partial
document says ``"interrupted": true`` and which signal, and gputop exits 128+N. A progress bar goes to
stderr only when stderr is a terminal.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gputop import exitcodes
from gputop.analysis.verdict import display_name
from gputop.documents import check_writable, emit, run_error_document, writable
from gputop.format import count, pct, si
from gputop.lessons import figures
from gputop.lessons.report_lines import cell, result_lines, table, verdict_lines
from gputop.runner.stop_signals import StopSignals
from gputop.runner.document import csv_columns, write_csv
from gputop.runner.params import format_value, parse_given, resolve
from gputop.runner.recording import RunRecorder, save_recording
from gputop.runner.run import drive
from gputop.runner.registry import MissingWorkloadDependency, Registry, UnknownWorkload
from gputop.runner.workload_run import WorkloadRun
from gputop.telemetry.source import SourceSpec
from gputop.workload.params import ParamError

Failure = exitcodes.Failure


@dataclass(frozen=True)
class WorkloadOptions:
    """``--run NAME`` as cli hands it down: the workload, its ``--param K=V`` words, where and how long it runs, the
    source (its GPU and rate) and the files it writes besides the report."""

    name: str
    spec: SourceSpec
    params: tuple[str, ...] = ()
    device: str = "cuda"
    quick: bool = False
    timeout: float | None = None
    grace_s: float | None = None
    csv: str | None = None  # --csv FILE: the result points
    record: str | None = None  # --record FILE: the run's telemetry as a trace
    record_run: str | None = None  # --record-run FILE: the whole run, to replay


def pick_gpu(opts: WorkloadOptions):
    """(nvml, NVML index) for a CUDA run; raises Failure (exit 3 without NVML, 2 for a bad --gpu)."""
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.static import device_count, read_static

    nvml = Nvml()
    if not nvml.available():
        raise Failure(exitcodes.NO_GPU, f"{nvml.error}; run the workload on the CPU instead: "
                                        f"gputop --run {opts.name} --device cpu", "no_gpu")
    gpus = opts.spec.gpus
    if len(gpus) > 1:
        raise Failure(exitcodes.USAGE, "--run uses one GPU: give one --gpu N")
    index = gpus[0] if gpus else 0
    n = device_count(nvml)
    if index >= n:
        names = ", ".join(f"{i} ({read_static(nvml, i)['name']})" for i in range(n))
        raise Failure(exitcodes.USAGE, f"--gpu {index}: no such GPU (valid: {names})")
    return nvml, index


def prepare(opts: WorkloadOptions, output: str | None = None):
    """(spec, values, nvml, index) of the run ``opts`` ask for (``output``: the report's file, checked too);
    raises Failure with why not."""
    if opts.spec.recorded:
        raise Failure(exitcodes.USAGE, "--run measures live; it does not take --replay or --demo")
    if opts.record and opts.device == "cpu":
        raise Failure(exitcodes.USAGE, "--record FILE records the GPU's telemetry, which a --device cpu run has none "
                                       "of (--record-run FILE records the whole run)")
    check_writable(opts.csv, "--csv")
    check_writable(output, "--output")
    check_writable(opts.record, "--record")
    check_writable(opts.record_run, "--record-run")
    try:
        spec = Registry().get(opts.name)
    except MissingWorkloadDependency as exc:
        raise Failure(exitcodes.MISSING_DEPENDENCY, str(exc), "missing_dependency") from None
    except UnknownWorkload as exc:
        raise Failure(exitcodes.USAGE, str(exc), "unknown_workload") from None
    try:
        values = resolve(spec, parse_given(list(opts.params)), opts.device, opts.quick)
    except ParamError as exc:
        raise Failure(exitcodes.USAGE, str(exc), "bad_param") from None
    nvml, index = pick_gpu(opts) if opts.device == "cuda" else (None, None)
    return spec, values, nvml, index


def main_run(opts: WorkloadOptions, *, json_mode: bool = False, output: str | None = None,
             no_color: bool = False) -> int:
    """``gputop --run NAME``: the run's report on stdout (``json_mode``: its document), and in ``output`` too."""
    def refuse(code, kind, message, signum=None):
        exitcodes.say(message)
        if json_mode or output:
            status = "interrupted" if signum else ("missing_dependency" if kind == "missing_dependency" else "error")
            doc = run_error_document(opts.name, kind, message, code, device=opts.device, status=status, signum=signum)
            emit(doc, json_mode=json_mode, output=output if writable(output) else None)
        return code

    stops = StopSignals(lambda signum: None)
    with stops:  # a signal before the launch: nothing to stop, one document all the same
        try:
            spec, values, nvml, index = prepare(opts, output)
        except Failure as exc:
            return refuse(exc.code, exc.kind, str(exc))
    if stops.first:
        return refuse(exitcodes.for_signal(stops.first), "interrupted",
                      f"{exitcodes.signal_name(stops.first)} before the workload started", stops.first)

    progress = Progress(sys.stderr) if sys.stderr.isatty() else None
    on_event = progress.on_event if progress else None
    recorder = RunRecorder(opts.record_run, on_event) if opts.record_run else None
    run = WorkloadRun(spec, values, device=opts.device, nvml_index=index, nvml=nvml, timeout=opts.timeout,
                      grace_s=opts.grace_s, rate_hz=opts.spec.rate_hz,
                      on_event=recorder.on_event if recorder else on_event)
    if recorder is not None:  # --record-run FILE: written as the run goes (a killed gputop leaves what it saw)
        recorder.attach(run)

    try:
        drive(run, "stopping the workload (again to kill it now)")
    finally:
        if progress:
            progress.clear()
    doc = run.document()
    code = doc["exit_code"]
    if opts.record and not _record(opts.record, run, doc):
        code = code or exitcodes.FAILED
    if recorder is not None and not save_recording(opts.record_run, recorder, run, doc):
        code = code or exitcodes.FAILED
    if opts.csv:
        try:
            write_csv(csv_rows(spec, doc), opts.csv)
        except OSError as exc:
            exitcodes.say(f"cannot write {opts.csv}: {exc.strerror}")
            code = code or exitcodes.FAILED
    text = lambda d: render_text(d, no_color=no_color)  # noqa: E731
    if not emit(doc, json_mode=json_mode, output=output, render_text=text):
        code = code or exitcodes.FAILED
    if doc["status"] != "ok" or doc["interrupted"]:
        first = doc["errors"][0]["message"] if doc["errors"] else ""
        exitcodes.say(f"{doc['workload']} {'interrupted' if doc['interrupted'] else doc['status']}"
                      + (f": {first}" if first else "") + f" ({len(doc['points'])} point(s) kept)")
    return code


def _record(path: str, run, doc: dict) -> bool:
    """--record FILE with --run NAME: the run's telemetry as a trace, each phase a mark; False where it could not be
    written whole (said on stderr)."""
    ticks = run.ticks_copy()
    if not ticks or run.static is None:
        exitcodes.say(f"--record: no GPU telemetry in this run, {path} not written")
        return False
    from gputop.telemetry.trace import write_trace

    marks = [(p["t_start"], p["name"]) for p in run.events.copy()["phases"]]
    try:
        n = write_trace(path, [run.static], ticks, marks, rate_hz=run.rate_hz,
                        note=f"gputop --run {doc['workload']} ({doc['status']})")
    except OSError as exc:
        exitcodes.say(f"cannot write {path}: {exc.strerror or exc}; the trace is incomplete")
        return False
    exitcodes.say(f"wrote {n} samples and {len(marks)} phase marks to {path}")
    return True


def csv_rows(spec, doc: dict) -> list[dict]:
    """The rows of ``--csv``: the workload's ``csv_rows(doc)`` if it has one (its own column order), else the points."""
    fn = spec.csv_rows
    if fn is not None:
        try:
            return list(fn(doc))
        except Exception as exc:
            exitcodes.say(f"{spec.name}.csv_rows failed ({type(exc).__name__}: {exc}); writing the raw points")
    return doc["points"]


class Progress:
    """A one-line progress bar on a terminal (stderr)."""

    def __init__(self, stream, width: int = 30):
        self.stream, self.width = stream, width
        self.shown = False

    def on_event(self, ev: dict) -> None:
        kind = ev.get("event")
        if kind == "progress" and ev.get("total"):
            frac = max(0.0, min(1.0, float(ev.get("done") or 0) / float(ev["total"])))
            bar = "#" * int(frac * self.width)
            self.stream.write(f"\r[{bar:<{self.width}}] {ev.get('done')}/{ev['total']} {str(ev.get('message') or '')[:40]:<40}")
            self.stream.flush()
            self.shown = True
        elif kind in ("warning", "error"):
            self.clear()
            self.stream.write(f"gputop: {kind}: {ev.get('message')}\n")
        elif kind == "phase":
            self.clear()
            self.stream.write(f"gputop: phase {ev.get('name')}\n")

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * (self.width + 52) + "\r")
            self.stream.flush()
            self.shown = False


# -- the readable summary ------------------------------------------------------------------------

def telemetry_line(s: dict | None) -> str:
    if not s:
        return "n/a"
    mm = lambda k: s.get(k) or {}  # noqa: E731
    parts = []
    if s.get("gpu_samples"):
        parts += [f"SM active {pct(mm('sm_active_pct').get('mean'))} (max {pct(mm('sm_active_pct').get('max'))})",
                  f"DRAM BW {pct(mm('dram_bw_pct').get('mean'))}", f"tensor {pct(mm('tensor_pct').get('mean'))}",
                  f"SM clock {cell(mm('sm_clock_mhz').get('mean'))} MHz",
                  f"power {cell(mm('power_w').get('mean'))} W (max {cell(mm('power_w').get('max'))})"]
        reasons = s.get("clock_reasons_seen")
        parts.append("clock events: " + (", ".join(reasons) if reasons else ("none" if reasons == [] else "n/a")))
    parts.append(f"host CPU {pct(mm('host_cpu_pct').get('mean'))}")
    parts.append(f"workload CPU {pct(mm('workload_cpu_pct').get('mean'))}")
    return "  ".join(parts) + f"  ({count(s.get('samples', 0), 'sample')})"


def render_text(doc: dict, stream=None, no_color: bool = False) -> str:
    """The run as a person reads it: what ran, the points as a table, the results as labelled lines, the
    telemetry, then the workload's key figure (sized to ``stream``, stdout by default) and the verdict under it."""
    stream = sys.stdout if stream is None else stream
    dev = doc["device"]
    where = dev["kind"]
    name = (dev.get("static") or {}).get("name") or (dev.get("reported") or {}).get("name")
    if name:
        where += f" ({name})"
    if dev.get("nvml_index") is not None:
        where += f", GPU {dev['nvml_index']}"
    state = "interrupted" if doc["interrupted"] else doc["status"]
    lines = [f"{doc['workload']}: {state} in {doc['wall_time_s']:.1f} s on {where}",
             "params: " + " ".join(f"{k}={format_value(v)}" for k, v in doc["params"].items())]
    pts = doc["points"]
    if pts:
        cols = [c for c in csv_columns(pts) if all(not isinstance(p.get(c), (dict, list)) for p in pts)][:9]
        lines += ["", f"points ({len(pts)}):"] + table(pts, cols)
    if doc["results"]:
        lines += ["", "results:"] + result_lines(doc["results"])
    lines += ["", "telemetry: " + telemetry_line(doc["telemetry"])]
    for ph in doc["phases"]:
        verdict = f"  -> {display_name(ph['verdict'])}" if ph.get("verdict") else ""
        lines.append(f"  {ph['name']} ({ph['duration_s']:.1f} s): {telemetry_line(ph['telemetry'])}{verdict}")
    for w in doc["warnings"]:
        lines.append(f"warning ({w['code']}): {w['message']}")
    for e in doc["errors"]:
        lines.append(f"error ({e['kind']}): {e['message']}")
        if e.get("detail"):
            lines += ["    " + d for d in e["detail"].splitlines()[-8:]]
    if dev.get("peaks"):
        pk = dev["peaks"]
        lines.append(f"peaks: DRAM {si(pk.get('dram_bytes_per_s'), 'B/s')}  FP32 {si(pk.get('fp32_flops'), 'FLOP/s')}")
    width, height = figures.size_for(stream)
    drawing = figures.figures_text(doc, width, height, figures.wants_color(stream, no_color))
    if drawing:
        lines += ["", drawing]
    verdict = verdict_lines(doc["verdict"])
    if verdict:
        lines += [""] + verdict
    return "\n".join(lines) + "\n"
