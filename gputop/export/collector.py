"""The Prometheus collector of ``gputop --export``: reads the sampler's latest tick when scraped.

Per tick, on the sampler's thread: the live verdicts (and the last process list a tick carried). A scrape
judges nothing: it turns the newest tick into dcgm-exporter's series (:mod:`.dcgm_names`) and gputop's own
(``gputop_bottleneck``, ``gputop_verdict_confidence``, the theoretical peaks, per-process GPU memory; beside
``--run --profile -- CMD``, the latest profiler window's: :mod:`.attribution_series`).
The verdicts are the TUI's (:class:`gputop.analysis.live.LiveNode`, one per exporter: each GPU's current regime
of the work since its last change, at most ``thresholds.LIVE_MAX_S``, judged again once a second of ticks and at
once on a change, the node's jobs together), so Prometheus sees what the screen shows, however often it scrapes;
``gputop_verdict_window_seconds`` is the length of the window the verdict judged.

A replay (``--replay FILE``, ``--demo``) adds ``gputop_replay{trace,loop}``: 1 while it plays, 0 once a replay that
does not loop has ended. From then on no GPU series is exported at all (no sample, verdict, peak or process): they
go stale in Prometheus as a stopped exporter's do, rather than the last verdict standing beside the last tick's
numbers for ever. The demo loops (``loop="true"``) and never ends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gputop.analysis.live import LiveNode
from gputop.analysis.vocabulary import CLASSES, Cls
from gputop.export.attribution_series import attribution_families
from gputop.export.dcgm_names import GPU_LABELS, JOB_LABEL, SERIES, value
from gputop.export.doctor_series import doctor_families
from gputop.export.jobs import GpuJobs
from gputop.session.stacks import RecordedStacks, StackWatch
from gputop.telemetry.doctor_state import LastDoctor

CMDLINE_MAX = 200  # characters of a command line kept in a label
WHERE_MAX = 200  # characters of a culprit's place kept in a label

PEAKS = (  # (series, peaks key, help)
    ("gputop_peak_dram_bytes_per_second", "dram_bytes_per_s", "Theoretical DRAM bandwidth (bytes/s)."),
    ("gputop_peak_fp32_flops", "fp32_flops", "Theoretical FP32 (non-tensor) FLOP/s at the max SM clock."),
    ("gputop_peak_fp64_flops", "fp64_flops", "Theoretical FP64 (non-tensor) FLOP/s at the max SM clock."),
    ("gputop_peak_fp16_flops", "fp16_flops", "Theoretical FP16 (non-tensor) FLOP/s at the max SM clock."),
    ("gputop_peak_pcie_bytes_per_second", "pcie_bytes_per_s_per_dir",
     "Theoretical PCIe bandwidth per direction at the current link (bytes/s)."),
    ("gputop_peak_nvlink_bytes_per_second", "nvlink_bytes_per_s_per_dir",
     "NVLink bandwidth per direction of the GPU's active links (bytes/s): NVML's common link speed, else each "
     "link's speed field, else the NVLink version's payload rate (gputop --once says which)."),
)


@dataclass
class ExportedGpu:
    """One GPU as exported: its position in the source's ticks, static facts, peaks and labels."""

    pos: int
    static: dict
    peaks: dict
    labels: dict  # GPU_LABELS -> value


@dataclass
class ExportOptions:
    cmdline: bool = False  # per-process command lines as a label (may hold secrets)
    job_map: str | None = None  # a dcgm-exporter-style HPC job mapping directory
    slurm_job: str | None = None  # the exporter's own SLURM_JOB_ID: its GPUs' job where their processes name none
    live: bool = True  # False for a replay: its pids are another machine's


def gpu_labels(static: dict, hostname: str) -> dict:
    """dcgm-exporter's labels of one GPU."""
    i = static.get("index", 0)
    return {"gpu": str(i), "UUID": static.get("uuid") or "", "pci_bus_id": static.get("pci_bus_id") or "",
            "device": f"nvidia{i}", "modelName": static.get("name") or "", "Hostname": hostname}


def read_job_map(directory: str | None) -> dict[str, list[str]]:
    """dcgm-exporter's HPC job mapping: files named by GPU index (``0``, ``1``; ``2.0`` for a MIG
    instance, not exported here), each line a job id. A missing or unreadable directory maps nothing."""
    if not directory:
        return {}
    out: dict[str, list[str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                jobs = [ln.strip() for ln in f if ln.strip()]
        except OSError:  # a directory named 0, or a file removed meanwhile
            continue
        if jobs:
            out[name] = jobs
    return out


class GputopCollector(Collector):
    """``attribution``: a callable that returns the latest profiler window (``--run --profile -- CMD``), or None;
    ``stacks``: the stack reader to share (``--export`` beside ``--run``: the run's), else one of its own."""

    def __init__(self, sampler, gpus: list[ExportedGpu], options: ExportOptions, attribution=None, stacks=None):
        self.sampler, self.gpus, self.options = sampler, gpus, options
        self.attribution = attribution
        self.procs: dict[int, list[dict]] = {}  # position -> the last process list a tick carried
        self.stacks = stacks or (StackWatch() if options.live  # the ranks' stacks while a GPU is stalled; a
                                 else RecordedStacks(sampler.source) if getattr(sampler.source, "extra", None)
                                 else None)  # replay's recorded ones; beside --run, the run's own reader
        self.live = LiveNode([g.pos for g in gpus], [g.static for g in gpus], [g.peaks for g in gpus],
                             [g.static.get("index", g.pos) for g in gpus], stacks=self.stacks).attach(sampler)
        self.scrapes = 0
        self.doctor = LastDoctor()  # each GPU's last gputop --doctor (gputop_doctor_* series)
        hostname = gpus[0].labels["Hostname"] if gpus else ""
        self.jobs = GpuJobs(hostname, options.live, options.slurm_job)  # each GPU's job (export/jobs.py)
        self._resolved: dict = {}
        sampler.listeners.append(self._remember_processes)

    def _remember_processes(self, tick: dict) -> None:  # processes are listed on every n-th tick only
        for pos, g in enumerate(tick["gpus"]):
            if g.get("processes") is not None:
                self.procs[pos] = g["processes"]

    # -- the verdicts ------------------------------------------------------------------------------
    def verdicts(self) -> dict[int, object]:
        """{position: its live verdict, or None}, as the sampler's thread last judged them."""
        return {g.pos: g.verdict for g in self.live.snapshot().gpus}

    # -- a scrape -------------------------------------------------------------------------------------
    def _jobs(self) -> dict[str, list[str]]:
        """{gpu label: its jobs' ids} (export/jobs.GpuJobs: the job map, the processes, the exporter's own)."""
        self._resolved = self.jobs.resolve(self.gpus, dict(self.procs), read_job_map(self.options.job_map))
        return {gpu: [j.job for j in jobs] for gpu, jobs in self._resolved.items()}

    def collect(self):
        self.scrapes += 1
        source = self.sampler.source
        if source.kind == "replay":
            yield self._replay_family(source)
            if source.finished:  # what is left is the end of a recording: no GPU series, no verdict
                return
        tick = self.sampler.latest()
        jobs = self._jobs()
        with_job = bool(jobs)
        names = list(GPU_LABELS) + ([JOB_LABEL] if with_job else [])

        def rows(g: ExportedGpu):  # one label set per job (as dcgm-exporter), or one without a job
            base = [g.labels[k] for k in GPU_LABELS]
            if not with_job:
                return [base]
            return [base + [j] for j in jobs.get(g.labels["gpu"], [""])]

        samples = {g.pos: tick["gpus"][g.pos] for g in self.gpus if tick and g.pos < len(tick["gpus"])}
        for s in SERIES:
            fam = GaugeMetricFamily(s.name, s.help, labels=names)
            for g in self.gpus:
                v = value(s, samples[g.pos]) if g.pos in samples else None
                if v is not None:
                    for labels in rows(g):
                        fam.add_metric(labels, v)
            yield fam
        yield from self._verdict_families(rows, names)
        yield culprit_family(self.verdicts(), self.gpus, rows, names)
        yield from self._peak_families(rows, names)
        yield self._process_family()
        yield from doctor_families(self.doctor, self.gpus, rows, names)
        yield from self.jobs.families(self.gpus, self._resolved, list(GPU_LABELS))
        if self.attribution is not None:
            yield from attribution_families(self.attribution())

    @staticmethod
    def _replay_family(source):
        fam = GaugeMetricFamily("gputop_replay", "A recorded trace played back by gputop --export (not GPUs read "
                                "now): 1 while it plays, 0 once it has ended (a replay that does not loop: its GPU "
                                "series are no longer exported). loop=\"true\": it starts again at its end (the "
                                "demo).", labels=["trace", "loop"])
        fam.add_metric([source.label or "", "true" if source.loop else "false"], 0.0 if source.finished else 1.0)
        return fam

    def _verdict_families(self, rows, names):
        verdicts = self.verdicts()
        bott = GaugeMetricFamily("gputop_bottleneck", "gputop's bottleneck class of the current work (the TUI's live verdict): 1 for "
                                 "the current class, 0 for the others.", labels=names + ["class", "subclass"])
        conf = GaugeMetricFamily("gputop_verdict_confidence", "Confidence (0-1) of gputop's current bottleneck "
                                 "class.", labels=names + ["class"])
        span = GaugeMetricFamily("gputop_verdict_window_seconds", "Length of the window gputop's current verdict "
                                 "judged (the work since its last change of regime, at most 30 s).",
                                 labels=names + ["class"])
        stall = GaugeMetricFamily("gputop_stalled_seconds", "How long the GPU has been stalled: kernels resident "
                                  "doing nothing, no traffic (a collective that never completes when subclass is "
                                  "collective); 0 when it is not stalled. Alert on it: > 60 for a stuck job.",
                                  labels=names + ["subclass"])
        for g in self.gpus:
            v = verdicts.get(g.pos)
            if v is None:
                continue
            for labels in rows(g):
                for c in CLASSES:
                    current = c == v.cls
                    bott.add_metric(labels + [c, (v.subclass or "") if current else ""], 1.0 if current else 0.0)
                if v.confidence is not None:
                    conf.add_metric(labels + [v.cls], float(v.confidence))
                if v.t_start is not None and v.t_end is not None:
                    span.add_metric(labels + [v.cls], float(v.t_end - v.t_start))
                stalled = v.evidence.get("stalled_for_s") if v.cls == Cls.STALLED else 0.0
                stall.add_metric(labels + [(v.subclass or "") if v.cls == Cls.STALLED else ""], float(stalled or 0.0))
        yield bott
        yield conf
        yield span
        yield stall

    def _peak_families(self, rows, names):
        for name, key, help_text in PEAKS:
            fam = GaugeMetricFamily(name, help_text, labels=names)
            for g in self.gpus:
                if g.peaks.get(key) is not None:
                    for labels in rows(g):
                        fam.add_metric(labels, float(g.peaks[key]))
            yield fam
        fam = GaugeMetricFamily("gputop_peak_tensor_flops", "Theoretical dense tensor-core FLOP/s (OP/s for int8) "
                                "per data type.", labels=names + ["dtype"])
        for g in self.gpus:
            for dtype, v in sorted((g.peaks.get("tensor_dense_flops") or {}).items()):
                if v is not None:
                    for labels in rows(g):
                        fam.add_metric(labels + [dtype], float(v))
        yield fam

    def _process_family(self):
        names = ["gpu", "UUID", "pid", "user", "name"] + (["cmdline"] if self.options.cmdline else [])
        fam = GaugeMetricFamily("gputop_process_gpu_memory_bytes", "GPU memory used by a process (bytes).",
                                labels=names)
        for g in self.gpus:
            for p in self.procs.get(g.pos) or []:
                if p.get("gpu_memory_bytes") is None:
                    continue
                labels = [g.labels["gpu"], g.labels["UUID"], str(p["pid"]), p.get("user") or "", p.get("name") or ""]
                if self.options.cmdline:
                    labels.append(self._cmdline(p))
                fam.add_metric(labels, float(p["gpu_memory_bytes"]))
        return fam

    def _cmdline(self, p: dict) -> str:
        if not self.options.live:  # a recording's pids belong to the machine it was recorded on
            return p.get("name") or ""
        try:
            import psutil

            return " ".join(psutil.Process(p["pid"]).cmdline())[:CMDLINE_MAX]
        except Exception:  # gone, another PID namespace, no permission
            return p.get("name") or ""


def _label(text: str, cut: int = WHERE_MAX) -> str:
    """A label value people read in an alert: printable, one line, at most ``cut`` characters."""
    text = "".join(c if c.isprintable() else " " for c in " ".join(str(text).split()))
    return text if len(text) <= cut else text[:cut - 1] + "…"


def culprit_family(verdicts: dict, gpus: list, rows, names: list[str]) -> GaugeMetricFamily:
    """``gputop_culprit_info``: 1 for each GPU whose rank holds its job up (its verdict "culprit": its peers wait
    in a collective it is not in), labelled with its rank and pid where the ranks' stacks were read, the kind
    (left, outside, mismatch) and where the rank is (its function, file:line and source line, or why it is gone):
    what an alert on a stalled job says about who."""
    fam = GaugeMetricFamily("gputop_culprit_info", "The GPU whose rank holds its job up (gputop's class culprit): "
                            "1, labelled with the rank, its pid, the kind (left, outside, mismatch) and where the "
                            "rank is (read from its Python stack while its peers are stalled).",
                            labels=names + ["rank", "pid", "kind", "where"])
    for g in gpus:
        v = verdicts.get(g.pos)
        if v is None or v.cls != Cls.CULPRIT:
            continue
        record = v.job.get("culprit") or {}
        me = g.static.get("index", g.pos)
        rank = next((r for r in record.get("ranks") or [] if r.get("gpu") == me and r.get("pid") in
                     (record.get("culprit_pids") or [])), {})
        where = record.get("where") or v.evidence_text
        for labels in rows(g):
            fam.add_metric(labels + ["" if rank.get("rank") is None else str(rank["rank"]),
                                     "" if rank.get("pid") is None else str(rank["pid"]), v.subclass or "",
                                     _label(where)], 1.0)
    return fam
