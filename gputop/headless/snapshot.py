"""Headless telemetry commands: ``gputop --once [--json]`` and ``gputop --record FILE``.

``--record`` ends after ``--seconds``, or on SIGINT, SIGTERM or SIGHUP: that is its normal end (the trace
is complete), so it exits 0 then.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timezone

from gputop import exitcodes
from gputop.analysis.peaks import compute_peaks, with_model_facts
from gputop.documents import check_writable, emit, header, once_error_document, writable
from gputop.exitcodes import fail
from gputop.runner.stop_signals import StopSignals
from gputop.format import gb, gpm_na, pct, si
from gputop.telemetry.errors import NoGpu, SourceError
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.source import SourceSpec, check_gpus, open_source
from gputop.telemetry.trace import Recorder

GPM_WINDOW_S = 0.25  # --once: GPM counters are rates over a window between two reads


def snapshot(spec: SourceSpec) -> dict:
    """The --once document (raises SourceError)."""
    spec = dataclasses.replace(spec, loop=False, process_every=1)  # one sample, with the GPU processes in it
    src = open_source(spec, need_gpu=True)
    try:
        static = src.static()
        positions = check_gpus(spec.gpus, static)
        tick = src.read()
        if src.kind == "live":
            time.sleep(GPM_WINDOW_S)
            tick = src.read()
        elif src.kind == "replay":  # the first tick that has GPM numbers, else the first
            while tick is not None and tick["gpus"] and tick["gpus"][0].get("sm_active_pct") is None:
                tick = src.read()
            if tick is None:
                src = open_source(spec, need_gpu=True)
                tick = src.read()
        gpus = []
        for pos in positions:
            sample = dict(tick["gpus"][pos])
            sample.pop("t", None)
            gpus.append({"static": static[pos], "peaks": compute_peaks(static[pos]), "sample": sample})
        host = dict(tick.get("host", {}))
        host.pop("procs", None)
        doc = {
            **header("once"),
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": {"kind": src.kind, "path": src.path,
                       **({"truncated": src.truncated} if src.kind == "replay" else {})},
            "host": {"hostname": src.hostname, **host},
            "gpus": gpus,
            "na_reasons": dict(src.na_reasons),
            "exit_code": exitcodes.OK,
            "errors": [],
        }
        return doc
    finally:
        src.close()


def main_once(spec: SourceSpec, *, json_mode: bool = False, output: str | None = None) -> int:
    """``--once``: the snapshot of ``spec``'s source on stdout (``json_mode``: its document), and in ``output`` too;
    where none can be taken, one line on stderr and (``json_mode``, ``output``) the error document, so that stdout
    holds exactly one document in every outcome."""
    def refuse(code: int, kind: str, message: str) -> int:
        exitcodes.say(message)
        if json_mode or output:
            source = {"kind": "replay" if spec.recorded else spec.kind, "path": spec.path}
            emit(once_error_document(kind, message, code, source), json_mode=json_mode,
                 output=output if writable(output) else None)
        return code

    try:
        check_writable(output, "--output")
        doc = snapshot(spec)
    except exitcodes.Failure as exc:
        return refuse(exc.code, exc.kind, str(exc))
    except NoGpu as exc:  # what works here without a GPU: the same snapshot of a recorded trace
        return refuse(exitcodes.NO_GPU, "no_gpu", f"{exc}; without a GPU: gputop --once --demo (or --replay FILE)")
    except SourceError as exc:
        code = exitcodes.code_for(exc)
        return refuse(code, "unreachable" if code == exitcodes.NO_GPU else "bad_source", str(exc))
    if doc["source"].get("truncated"):
        exitcodes.say(f"{doc['source']['path']}: {doc['source']['truncated']}; read up to its last complete line")
    ok = emit(doc, json_mode=json_mode, output=output, render_text=render_text)
    return exitcodes.OK if ok else exitcodes.FAILED


def render_text(doc: dict) -> str:
    lines = [f"gputop {doc['gputop_version']}  {doc['source']['kind']}"
             + (f" {doc['source']['path']}" if doc["source"].get("path") else "")
             + f"  host {doc['host'].get('hostname')}  CPU {pct(doc['host'].get('cpu_pct'))}"]
    for g in doc["gpus"]:
        st, pk, s = with_model_facts(g["static"]), g["peaks"], g["sample"]  # (the TUI's answer too)
        lines.append("")
        lines.append(f"GPU {st['index']}  {_known(st.get('name'))}{_device_facts(st)}  "
                     f"driver {_known(st.get('driver_version'))}  CUDA {_known(st.get('cuda_driver_version'))}")
        gpm = "" if st.get("gpm_supported") else "  (" + gpm_na(doc.get("na_reasons"), "sm_active_pct", False) + ")"
        dram_peak = pk.get("dram_bytes_per_s")
        lines.append(f"  SM activity {pct(s.get('sm_active_pct'))}  SM occupancy {pct(s.get('sm_occupancy_pct'))}  "
                     f"DRAM bandwidth {pct(s.get('dram_bw_pct'))} of {si(dram_peak, 'B/s')}  "
                     f"tensor {pct(s.get('tensor_pct'))}{gpm}")
        lines.append(f"  pipes: FP32 {pct(s.get('fp32_pct'))}  FP16 {pct(s.get('fp16_pct'))}  "
                     f"FP64 {pct(s.get('fp64_pct'))}  INT {pct(s.get('int_pct'))}  "
                     f"HMMA {pct(s.get('hmma_pct'))}  IMMA {pct(s.get('imma_pct'))}  DFMA {pct(s.get('dfma_pct'))}")
        lines.append(f"  duty cycles (NVML \"util\"): kernel active {pct(s.get('util_gpu_pct'))}  "
                     f"memory controller {pct(s.get('util_mem_pct'))}")
        reasons = ", ".join(s["clock_reasons"]) if s.get("clock_reasons") else ("none" if s.get("clock_reasons") == [] else "n/a")
        lines.append(f"  clocks: SM {_n(s.get('sm_clock_mhz'))}/{_n(st.get('max_sm_clock_mhz'))} MHz  "
                     f"memory {_n(s.get('mem_clock_mhz'))}/{_n(st.get('max_mem_clock_mhz'))} MHz  "
                     f"clock events: {reasons}")
        lines.append(f"  power {_n(s.get('power_w'), '.0f')}/{_n(st.get('power_limit_w'), '.0f')} W  "
                     f"temperature {_n(s.get('temp_c'))} C  memory {gb(s.get('mem_used_bytes'))}/"
                     f"{gb(s.get('mem_total_bytes'))} GiB  PCIe rx {si(s.get('pcie_rx_bps'), 'B/s')} "
                     f"tx {si(s.get('pcie_tx_bps'), 'B/s')} of {si(pk.get('pcie_bytes_per_s_per_dir'), 'B/s')} "
                     f"({_link(st)})")
        tensor = pk.get("tensor_dense_flops") or {}
        lines.append(f"  peaks: DRAM {si(dram_peak, 'B/s')}  FP32 {si(pk.get('fp32_flops'), 'FLOP/s')}  "
                     f"FP64 {si(pk.get('fp64_flops'), 'FLOP/s')}  BF16 dense {si(tensor.get('bf16'), 'FLOP/s')}")
        if pk.get("nvlink_bytes_per_s_per_dir"):
            lines.append(f"  NVLink rx {si(s.get('nvlink_rx_bps'), 'B/s')} tx {si(s.get('nvlink_tx_bps'), 'B/s')} of "
                         f"{si(pk['nvlink_bytes_per_s_per_dir'], 'B/s')} a direction: {pk.get('nvlink_peak_source')}")
        procs = s.get("processes")
        if procs:
            lines.append("  processes: " + "; ".join(
                f"{p['pid']} {p.get('name') or '?'} ({p.get('user') or '?'}) {gb(p.get('gpu_memory_bytes'))} GiB"
                for p in procs))
    na = doc.get("na_reasons") or {}
    if na:
        lines.append("")
        lines.append("n/a: " + ", ".join(f"{k} ({v})" for k, v in sorted(na.items())))
    return "\n".join(lines) + "\n"


def _known(v) -> str:
    """A fact the source reports, or one word saying it does not."""
    return "unknown" if v is None or v == "" else str(v)


def _device_facts(st: dict) -> str:
    """``  (Hopper, cc 9.0, 132 SMs, 16896 CUDA cores)`` from the source's facts, else from the model's published
    figures (``st`` from ``with_model_facts``; said so: a dcgm-exporter names the model alone); nothing where neither
    knows."""
    known, f = st.get("published_facts"), st
    cc = f.get("compute_capability")
    parts = [f.get("architecture"), f"cc {'.'.join(map(str, cc))}" if cc else None,
             f"{f['sm_count']} SMs" if f.get("sm_count") else None,
             f"{f['cuda_cores']} CUDA cores" if f.get("cuda_cores") else None]
    parts = [p for p in parts if p]
    if not parts:
        return ""
    return "  (" + ", ".join(parts) + ("; the model's published figures" if known else "") + ")"


def _link(st: dict) -> str:
    """``gen5 x16`` (the link as it is now), or one phrase where the source does not say."""
    gen, width = st.get("pcie_cur_gen"), st.get("pcie_cur_width")
    return f"gen{gen} x{width}" if gen is not None and width is not None else "link unknown"


def _n(v, fmt: str = "d") -> str:
    if v is None:
        return "n/a"
    if fmt == "d":
        return str(int(v))
    return format(v, fmt)


def main_record(spec: SourceSpec, path: str, seconds: float | None = None) -> int:
    """Record the live telemetry of ``spec``'s GPUs, at its rate, to a trace at ``path`` until ``seconds`` pass
    (--seconds) or Ctrl-C."""
    try:
        src = open_source(spec, need_gpu=True)
    except NoGpu as exc:  # --record records this machine's GPUs: nothing else to suggest
        return fail(exitcodes.NO_GPU, f"{exc}; --record needs this machine's GPUs (NVML)")
    except SourceError as exc:
        return fail(exitcodes.code_for(exc), str(exc))
    if src.kind != "live":
        src.close()
        return fail(exitcodes.USAGE, "--record records live NVML; it does not take --replay or --demo")
    try:
        rec = Recorder(path, src.static(), rate_hz=spec.rate_hz)
    except OSError as exc:
        src.close()
        return fail(exitcodes.USAGE, f"cannot write {path}: {exc.strerror}")
    sampler = Sampler(src, rate_hz=spec.rate_hz)
    sampler.listeners.append(rec)
    exitcodes.say(f"recording {len(src.indices)} GPU(s) at {spec.rate_hz:g} Hz to {path}"
                  + (f" for {seconds:g} s" if seconds else " until Ctrl-C"))
    stops = StopSignals(lambda signum: None)
    try:
        with stops:
            sampler.start()
            end = time.monotonic() + seconds if seconds else None
            while not stops.first and (end is None or time.monotonic() < end):
                time.sleep(0.05)
    finally:
        sampler.stop()
        rec.close()
        src.close()
    if rec.error is not None:  # a full disk: the trace holds less than was sampled
        return fail(exitcodes.FAILED, rec.why_failed())
    exitcodes.say(f"wrote {rec.ticks} samples to {path}")
    return exitcodes.OK
