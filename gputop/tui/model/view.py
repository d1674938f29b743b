"""What the monitor shows, as plain data: device-panel rows, the GPU summary, the header, processes, and the
fields kept from tick to tick (``Sticky``).

Pure functions of (static facts, peaks, sample): no Textual, so they are unit-tested directly and the widgets only
lay the rows out. The model (its header, its peaks), the header bar, the monitor page and the early frame (drawn
before Textual is imported) read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.analysis.peaks import compute_peaks, with_model_facts
from gputop.format import NA, count, gb, gpm_na, pct, si
from gputop.telemetry.doctor_state import LastDoctor, summary

DOCTOR = LastDoctor()  # each GPU's last gputop --doctor, from its state file (read again at most every 10 s)
DOCTOR_LEVEL = {"ok": "", "degraded": "warn", "failed": "hot"}

# Fields a live source fills only every few ticks (processes; PCIe without GPM): keep the last value.
STICKY = ("processes", "pcie_tx_bps", "pcie_rx_bps")


def peaks_for(static: dict) -> dict:
    """Theoretical peaks of one GPU (None for each peak the static facts cannot give)."""
    return compute_peaks(static)


def shown_statics(statics: list[dict]) -> list[dict]:
    """The GPUs' static facts as the screen shows them: a source's own, else its model's published figures
    (``analysis.peaks.with_model_facts``, as ``--once`` says them)."""
    return [with_model_facts(st) for st in statics]


def na_reasons_for(static: dict, shared: dict[str, str]) -> dict[str, str]:
    """The reasons for one GPU: its static record's own (if it carries them) over the source's."""
    own = static.get("na_reasons")
    return {**shared, **own} if own else shared


class Sticky:
    """Remembers the last non-None value of the STICKY fields per GPU position.

    ``observe`` is a sampler listener (it sees every tick, on the sampler thread); ``apply`` fills
    the gaps of the sample the UI draws.
    """

    def __init__(self):
        self.last: dict[int, dict] = {}

    def observe(self, tick: dict) -> None:
        for pos, s in enumerate(tick.get("gpus", ())):
            keep = self.last.setdefault(pos, {})
            for f in STICKY:
                v = s.get(f)
                if v is not None:
                    keep[f] = v

    def apply(self, pos: int, sample: dict) -> dict:
        keep = self.last.get(pos, {})
        out = dict(sample)
        for f in STICKY:
            if out.get(f) is None and f in keep:
                out[f] = keep[f]
        return out


@dataclass
class Row:
    label: str
    fraction: float | None  # 0..1 for the bar; None: no bar
    text: str
    level: str = ""  # "", "peak" (activity near its peak), "warn", "hot" (capacity), "na"


def _frac(v, peak) -> float | None:
    if v is None or not peak:
        return None
    return max(0.0, min(1.0, v / peak))


def _level(f: float | None) -> str:
    """Capacity (memory, power): yellow from half, red near the limit."""
    if f is None:
        return "na"
    return "hot" if f >= 0.85 else ("warn" if f >= 0.5 else "")


def _activity(f: float | None) -> str:
    """Activity (SMs, DRAM, tensor, PCIe): busy is good; near the peak it is marked as at the roof."""
    if f is None:
        return "na"
    return "peak" if f >= 0.85 else ""


def _n(v, unit: str = "") -> str:
    return NA if v is None else f"{v:.0f}{unit}"


def device_rows(static: dict, peaks: dict, s: dict, na_reasons: dict[str, str] | None = None,
                compact: bool = False) -> list[Row]:
    """The device panel, one Row per metric, in display order (``na_reasons``: why fields are n/a;
    ``compact``: 80x24, related rows merged so that the charts keep their rows)."""
    gpm = bool(static.get("gpm_supported"))
    rows: list[Row] = []

    def gpm_pct(label: str, field: str, extra: str = "") -> None:
        v = s.get(field)
        if not gpm or v is None:
            rows.append(Row(label, None, gpm_na(na_reasons, field, gpm), "na"))
        else:
            rows.append(Row(label, v / 100.0, pct(v) + extra, _activity(v / 100.0)))

    gpm_pct("SM activity", "sm_active_pct")
    gpm_pct("SM occupancy", "sm_occupancy_pct")
    dram_peak = peaks.get("dram_bytes_per_s")
    v = s.get("dram_bw_pct")
    extra = f" {si(v / 100.0 * dram_peak, 'B/s')} of {si(dram_peak, 'B/s')}" if dram_peak and v is not None else ""
    gpm_pct("DRAM bandwidth", "dram_bw_pct", extra)
    gpm_pct("Tensor active", "tensor_pct")
    u = s.get("util_gpu_pct")
    rows.append(Row("Kernel duty", None if u is None else u / 100.0,
                    f"{pct(u)} duty cycle (NVML util)", "" if u is not None else "na"))
    used, total = s.get("mem_used_bytes"), s.get("mem_total_bytes") or static.get("memory_total_bytes")
    f = _frac(used, total)
    rows.append(Row("Memory", f, f"{gb(used)} / {gb(total)} GiB", _level(f)))
    link = peaks.get("pcie_bytes_per_s_per_dir")
    gen, width = static.get("pcie_cur_gen"), static.get("pcie_cur_width")
    link_txt = f" of {si(link, 'B/s')}" if link else ""
    rx, tx = s.get("pcie_rx_bps"), s.get("pcie_tx_bps")
    if compact:  # 80x24: rx and tx on one row, the clocks on one, power and temperature on one
        fs = [f for f in (_frac(rx, link), _frac(tx, link)) if f is not None]
        f = max(fs) if fs else None
        any_v = rx is not None or tx is not None
        rows.append(Row("PCIe rx/tx", f, f"{si(rx, 'B/s')} / {si(tx, 'B/s')}{link_txt if any_v else ''}", _activity(f)))
    else:
        for label, v in (("PCIe rx", rx), ("PCIe tx", tx)):
            f = _frac(v, link)
            rows.append(Row(label, f, f"{si(v, 'B/s')}{link_txt if v is not None else ''}", _activity(f)))
        if gen and width:
            rows[-1].text += f" (gen{gen} x{width})"
    clocks = [(label, s.get(field), static.get(mx)) for label, field, mx in
              (("SM clock", "sm_clock_mhz", "max_sm_clock_mhz"), ("Mem clock", "mem_clock_mhz", "max_mem_clock_mhz"))]
    if compact:
        (_, v, m), (_, mv, mm) = clocks
        rows.append(Row("Clocks SM/mem", _frac(v, m), f"{_n(v)}/{_n(m)}, {_n(mv)}/{_n(mm)} MHz",
                        "" if v is not None else "na"))
    else:
        for label, v, m in clocks:
            rows.append(Row(label, _frac(v, m), f"{_n(v)} / {_n(m)} MHz", "" if v is not None else "na"))
    p, lim = s.get("power_w"), static.get("power_limit_w")
    f = _frac(p, lim)
    t = s.get("temp_c")
    hot = t is not None and t >= 85
    if compact:
        rows.append(Row("Power, temp", f, f"{_n(p)} / {_n(lim)} W, {_n(t, ' °C')}", "hot" if hot else _level(f)))
    else:
        rows.append(Row("Power", f, f"{_n(p)} / {_n(lim)} W", _level(f)))
        rows.append(Row("Temperature", None, _n(t, " °C"), "hot" if hot else ("na" if t is None else "")))
    rows.append(throttle_row(s.get("clock_reasons")))
    last = summary(DOCTOR.get(static.get("uuid")))
    if last:
        rows.append(Row("Doctor", None, last[1], DOCTOR_LEVEL.get(last[0], "na")))
    return rows


def throttle_row(reasons) -> Row:
    if reasons is None:
        return Row("Clock events", None, NA, "na")
    if not reasons:
        return Row("Clock events", None, "none (full clocks allowed)")
    bad = [r for r in reasons if r not in ("idle", "applications clocks setting", "sync boost", "display clock setting")]
    return Row("Clock events", None, ", ".join(reasons), "hot" if bad else "")


def gpu_title(static: dict) -> str:
    cc = ".".join(map(str, static["compute_capability"])) if static.get("compute_capability") else NA
    published = " (published)" if static.get("published_facts") else ""  # the model's published figures
    return (f"GPU {static.get('index')}  {static.get('name') or NA}  {static.get('architecture') or ''} "
            f"cc {cc}  {static.get('sm_count') or NA} SMs{published}").replace("  ", " ", 1)


def summary_line(static: dict, s: dict | None) -> str:
    """One GPU's numbers in one line (the GPU summary on top, with several GPUs)."""
    name = (static.get("name") or NA).replace("NVIDIA ", "")
    if s is None:
        return f"GPU{static.get('index')} {name}  (no sample yet)"
    gpm = static.get("gpm_supported")
    g = (lambda f: pct(s.get(f))) if gpm else (lambda f: NA)
    return (f"GPU{static.get('index')} {name[:22]:<22} SM {g('sm_active_pct'):>4} DRAM {g('dram_bw_pct'):>4} "
            f"TC {g('tensor_pct'):>4} duty {pct(s.get('util_gpu_pct')):>4} "
            f"mem {gb(s.get('mem_used_bytes'))}/{gb(s.get('mem_total_bytes'))}G "
            f"{_n(s.get('power_w'), 'W')} {_n(s.get('temp_c'), '°C')}")


def header_parts(statics: list[dict], mode: str, rate_hz: float, hostname: str | None, paused: bool,
                 source_label: str = "") -> list[str]:
    """host, GPU name(s), driver, CUDA, sampling rate, mode (in display order)."""
    names: dict[str, int] = {}
    for st in statics:
        n = (st.get("name") or NA).replace("NVIDIA ", "")
        names[n] = names.get(n, 0) + 1
    gpus = ", ".join(f"{c}x {n}" if c > 1 else n for n, c in names.items()) or "no GPU (host only)"
    st0 = statics[0] if statics else {}
    parts = [f"host {hostname or NA}", gpus]
    if statics:
        parts += [f"driver {st0.get('driver_version') or NA}", f"CUDA {st0.get('cuda_driver_version') or NA}"]
    parts.append(f"{rate_hz:g} Hz")
    m = mode.upper() + (f" {source_label}" if source_label and mode != "live" else "")
    parts.append(m + (" (PAUSED)" if paused else ""))
    return parts


def source_header(source, statics: list[dict], rate_hz: float, hostname: str | None, paused: bool) -> list[str]:
    """The header's parts for ``source`` (a replay shows its recorded rate; the demo is a looping replay; a
    finished replay says so): the app's header and the early frame's alike."""
    mode = "demo" if source.kind == "replay" and source.loop else source.kind
    if source.kind == "replay":
        rate_hz = source.header.get("rate_hz") or rate_hz
    parts = header_parts(statics, mode, rate_hz, hostname, paused, source.label)
    if source.finished:
        parts[-1] += " (finished)"
    return parts


MODES = ("LIVE", "REPLAY", "DEMO", "DCGM-EXPORTER")


def fit_parts(parts: list[str], width: int) -> str:
    """Join ``parts`` with separators; to fit ``width`` drop driver, then host, then CUDA, then the name
    of the file a replay plays, then the rate, then "(finished)" (the GPU names, the mode and the phase
    always stay: the phase is what the screen shows now)."""
    parts = list(parts)
    text = " │ ".join(parts)
    for prefix in ("driver ", "host ", "CUDA ", "file", "rate", "finished"):
        if len(text) <= width:
            break
        if prefix == "file":  # "REPLAY demo.jsonl.gz (PAUSED)" -> "REPLAY (PAUSED)"
            parts = [_mode_only(p) for p in parts]
        elif prefix == "rate":  # "10 Hz"
            parts = [p for p in parts if not (p.endswith(" Hz") and p.split(" ")[0].replace(".", "").isdigit())]
        elif prefix == "finished":  # "REPLAY (finished)" -> "REPLAY"
            parts = [p.replace(" (finished)", "") if p.split(" ")[0] in MODES else p for p in parts]
        else:
            parts = [p for p in parts if not p.startswith(prefix)]
        text = " │ ".join(parts)
    return text


def _mode_only(part: str) -> str:
    words = part.split(" ")
    if words[0] not in MODES or len(words) < 2:
        return part
    rest = [w for w in words[1:] if w.startswith("(")]
    return " ".join([words[0], *rest])


def process_rows(procs: list[dict] | None, own_pids: set[int],
                 tags: dict[int, str] | None = None) -> list[tuple[str, str, str, str, str]]:
    """(pid, user, name, GPU memory, tag) per process, biggest memory first; tag marks gputop's workload,
    or says ``tags[pid]`` (the command gputop --tui --run started, its children, a --watch pid)."""
    if not procs:
        return []
    rows = []
    for p in sorted(procs, key=lambda p: -(p.get("gpu_memory_bytes") or 0)):
        tag = "◀ gputop workload" if p.get("pid") in own_pids else (tags or {}).get(p.get("pid"), "")
        mem = p.get("gpu_memory_bytes")
        rows.append((str(p.get("pid")), p.get("user") or "?", p.get("name") or "?",
                     f"{gb(mem)} GiB" if mem is not None else NA, tag))
    return rows


def host_line(host: dict | None, recorded_on: str | None = None) -> str:
    """The host's CPU and RAM; ``recorded_on``: the host a replayed trace was recorded on (its numbers, not
    this machine's)."""
    where = f"host {recorded_on or NA} (recorded): " if recorded_on is not None else ""
    if not host:
        return f"{where or 'host: '}n/a"
    cores = host.get("cpu_per_core_pct") or []
    return (f"{where}CPU {pct(host.get('cpu_pct'))} of {count(len(cores), 'core') if cores else NA + ' cores'}  "
            f"RAM {gb(host.get('ram_used_bytes'))} / {gb(host.get('ram_total_bytes'))} GiB")
