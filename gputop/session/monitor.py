"""The monitor of one watched process (tree): sample every GPU while it runs, find the GPUs it uses, and
diagnose each (per-GPU timelines and verdicts, and the run's verdict).

Used alike by the headless ``--run -- CMD`` / ``--watch PID`` and by the TUI's command view, through
:func:`open_monitor` and :class:`Monitor`'s public methods.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from gputop import exitcodes
from gputop.analysis import thresholds as T
from gputop.analysis.collectives import shared_gpus, small_collectives
from gputop.analysis.comms import group_comms
from gputop.analysis.live import LiveNode
from gputop.analysis.evidence import Evidence, Key, declare
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.rules import advise
from gputop.analysis.summary import summarize
from gputop.analysis.timeline import Segment, overall, timeline
from gputop.analysis.verdict import RunVerdict, Verdict, display_name
from gputop.analysis.vocabulary import Cls, Sub
from gputop.session.culprit_log import CulpritLog, telemetry_block
from gputop.session.finder import GpuFinder, TickStore
from gputop.session.stacks import StackWatch
from gputop.telemetry.errors import SourceError
from gputop.telemetry.sampler import DEFAULT_RATE_HZ, Sampler
from gputop.telemetry.source import SourceSpec, open_source
from gputop.telemetry.trace import Recorder

# NVML's process list every 2nd sample (5 Hz at 10 Hz) rather than the live view's every 10th: the moment
# the command first shows up on a GPU ends its "startup" segment, so it should not lag by a second.
PROCESS_EVERY = 2
OOM_MARK = "oom: the command reported out of memory"
declare(Key("gpus_watched", "count", "GPUs gputop watched while the command ran (its verdict when it used none)"))


@dataclass
class GpuDiagnosis:
    """One GPU of a monitored run: its timeline (segments) and verdict over the run (None: nothing to judge)."""

    index: int
    name: str | None
    used: bool
    first_seen_s: float | None
    timeline: list[Segment]
    verdict: RunVerdict | None
    summary: dict

    def to_dict(self) -> dict:
        return {"index": self.index, "name": self.name, "used": self.used, "first_seen_s": self.first_seen_s,
                "timeline": [s.to_dict() for s in self.timeline],
                "verdict": self.verdict.to_dict() if self.verdict else None, "summary": self.summary}


@dataclass
class Diagnosis:
    """A monitored run diagnosed: each GPU's, the run's verdict (of the used GPU with the most busy time), how its
    GPUs were found, notes and the sampling's facts: the "diagnosis" part of its document (``to_dict``)."""

    gpus_used: list[int]
    gpu_detection: str
    gpus: list[GpuDiagnosis]
    verdict: Verdict
    notes: list[str]
    sampling: dict
    culprit: dict | None = None  # who held the job up (CulpritLog.block), where a stall's stacks were read
    collectives: dict | None = None  # the job's collectives, as its flight recorder showed them

    def to_dict(self) -> dict:
        return {"gpus_used": self.gpus_used, "gpu_detection": self.gpu_detection,
                "gpus": [g.to_dict() for g in self.gpus], "verdict": self.verdict.to_dict(), "notes": self.notes,
                "sampling": self.sampling, "culprit": self.culprit, "collectives": self.collectives}


def check_live_args(spec: SourceSpec, what: str) -> None:
    """A monitored run diagnoses live GPUs: raise a usage Failure for --replay/--demo."""
    if spec.recorded:
        raise exitcodes.Failure(exitcodes.USAGE, f"{what} diagnoses live GPUs; it does not take --replay or --demo")


def open_monitor(spec: SourceSpec, note: str, record: str | None = None, active_ok: bool = False) -> "Monitor":
    """The live source ``spec`` names, sampled at its rate under a new Monitor (``record``: a trace file to write);
    raises Failure (3 without NVML, 2 for bad input)."""
    try:
        src = open_source(dataclasses.replace(spec, process_every=PROCESS_EVERY), need_gpu=True)
    except SourceError as exc:
        raise exitcodes.failure_for(exc) from None
    try:
        return Monitor(src, rate_hz=spec.rate_hz, record=record, note=note, active_ok=active_ok, culprit=True)
    except OSError as exc:
        src.close()
        raise exitcodes.Failure(exitcodes.USAGE, f"cannot write {record}: {exc.strerror}") from None


class Monitor:
    """Samples a source while one process (tree) runs, then diagnoses each GPU it used.

    ``source``: a LiveSource (opened by :func:`open_monitor` to list GPU processes every ``PROCESS_EVERY``-th
    tick), or a ReplaySource (tests, offline diagnosis). ``culprit``: judge the node live while it runs (``live``,
    a :class:`LiveNode` over the sampler whose stack reader reads the ranks' stacks while a GPU is stalled), and
    keep who held a stall up in ``culprits`` (gputop/session/culprit_log.py) for the document; the TUI's command
    view reads the same live node.
    """

    def __init__(self, source, rate_hz: float = DEFAULT_RATE_HZ, record: str | None = None, note: str = "",
                 window_s: float = T.WINDOW_S, tree=None, active_ok: bool = False, culprit: bool = False):
        self.source = source
        self.static = source.static()
        self.peaks = [compute_peaks(s) for s in self.static]
        self.window_s = window_s
        self.sampler = Sampler(source, rate_hz=rate_hz)
        self.store = TickStore()
        self.finder = GpuFinder(tree=tree, active_ok=active_ok)
        self.recorder = Recorder(record, self.static, rate_hz=rate_hz, note=note) if record else None
        self.sampler.listeners += [self.finder, self.store] + ([self.recorder] if self.recorder else [])
        self.pid: int | None = None
        self.t0: float | None = None
        self.oom_times: list[float] = []
        self._marked: set[tuple[int, str]] = set()  # (position, how found)
        self.stacks, self.live, self.flight = None, None, None
        self.culprits: CulpritLog | None = None
        if culprit:
            self.stacks, self.culprits = StackWatch(), CulpritLog(self.recorder)
            self.live = LiveNode(list(range(len(self.static))), self.static, self.peaks, watched_pid=lambda: self.pid,
                                 stacks=self.stacks, on_stacks=self.culprits.on_stacks).attach(self.sampler)
            self.culprits.live = self.live
            self.sampler.listeners.append(self.culprits)
        elif getattr(source, "extra", None):  # a recorded run: the culprit as it was named while it ran
            self.culprits = CulpritLog.from_rows(source.extra)

    def use_flight_recorder(self):
        """The command's flight recorder (gputop/session/flight_recorder.py): its ``env`` switches it on; dumps are
        asked for while a stall lasts and once into a job of two GPUs or more."""
        from gputop.session.flight_recorder import FlightRecorder

        if self.flight is None and self.culprits is not None:
            self.flight = self.culprits.flight = FlightRecorder()
        return self.flight

    def baseline(self) -> None:
        """One tick before the process starts (the "before" of the rise detection)."""
        self.sampler.step()

    def watch(self, pid: int) -> None:
        self.pid = pid
        self.finder.set_pid(pid)
        self.source.watch(pid)
        last = self.sampler.latest()
        self.t0 = last["t"] if last else None
        self.mark("started")

    def start(self) -> None:
        self.sampler.start()

    def mark(self, label: str, t: float | None = None) -> None:
        """A labelled moment in the recorded trace: ``t`` (the ticks' clock), else the latest tick's time."""
        if self.recorder is not None:
            last = self.sampler.latest()
            self.recorder.mark(label, t if t is not None else last["t"] if last else None)

    def poll_marks(self) -> None:
        """Record "on GPU n" marks as the finder sees the tree appear (for traces)."""
        first, how = self.finder.result()
        if self.culprits is not None and first:  # (the second GPU's time: when it became a job of two)
            self.culprits.seen_on_gpus(sorted(first.values())[min(1, len(first) - 1)],
                                       {self.static[p].get("index", p) for p in first})
        for pos, t in first.items():
            if (pos, how) not in self._marked:  # a rise seen first, then the process list: both marked
                self._marked.add((pos, how))
                if self.recorder is not None:
                    self.recorder.mark(f"on GPU {self.static[pos].get('index', pos)} ({how})", t)

    def note_oom(self) -> None:
        last = self.sampler.latest()
        t = last["t"] if last else time.monotonic()
        self.oom_times.append(t)
        if self.recorder is not None:
            self.recorder.mark(OOM_MARK, t)

    def stop(self) -> None:
        if self.stacks is not None:  # the ranks are gone or going: what was read during the run stands
            self.stacks.close()
        self.sampler.stop()
        self.poll_marks()
        if self.recorder is not None:
            self.recorder.close()

    def close(self) -> None:
        self.source.close()
        if self.flight is not None:
            self.flight.close()

    def _hints(self, a: float, b: float) -> dict:
        return {"oom": True} if any(a <= t < b + self.window_s for t in self.oom_times) else {}

    def pids_by_gpu(self) -> dict[int, set[int]]:
        """{NVML index: the pids NVML listed on that GPU in any stored tick} (whose profiler window is whose)."""
        out: dict[int, set[int]] = {}
        for tick in self.store.snapshot():
            for pos, s in enumerate(tick.get("gpus") or []):
                for p in s.get("processes") or []:
                    out.setdefault(self.static[pos].get("index", pos), set()).add(p.get("pid"))
        return out

    def _foreign(self, ticks: list[dict]) -> dict[int, list[dict]]:
        """{NVML index: processes NVML listed on it that are not of the watched tree} (another job's), live only
        (a replay's pids are another machine's: its finder knows none of them)."""
        if self.source.kind != "live" or self.pid is None:
            return {}
        with self.finder.lock:
            ours = set(self.finder.known)
        out: dict[int, dict[int, dict]] = {}
        for tick in ticks[::max(1, len(ticks) // 200)]:
            for pos, smp in enumerate(tick.get("gpus") or []):
                for p in smp.get("processes") or []:
                    if p.get("pid") is not None and p["pid"] not in ours:
                        out.setdefault(self.static[pos].get("index", pos), {})[p["pid"]] = p
        return {g: list(ps.values()) for g, ps in out.items()}

    def analyze(self, exclude: list[tuple[float, float]] | None = None) -> dict:
        """:meth:`diagnose` as its document's part."""
        return self.diagnose(exclude).to_dict()

    def diagnose(self, exclude: list[tuple[float, float]] | None = None) -> Diagnosis:
        """Per-GPU timelines and verdicts, and the run's overall verdict. ``exclude``: spans of the monitor's
        clock left out (a profiler window and the stop after it: the program slowed by gputop)."""
        ticks = self.store.snapshot()
        t0 = self.t0 if self.t0 is not None else (ticks[0]["t"] if ticks else 0.0)
        ticks = [t for t in ticks if t["t"] >= t0 and not any(a <= t["t"] <= b for a, b in exclude or ())]
        first, how = self.finder.result()
        used = sorted(first)
        positions = used or list(range(len(self.static)))
        gpus = []
        for pos in positions:
            segs = timeline(ticks, pos, self.static[pos], self.peaks[pos], window_s=self.window_s,
                            watched_pid=self.pid, hints=self._hints, t_on_gpu=first.get(pos), t0=t0)
            ov = overall(segs)
            if self.oom_times and ov is not None and ov.cls != Cls.MEMORY_CAPACITY:
                ov = _oom_overall(ov)
            gpus.append(GpuDiagnosis(self.static[pos].get("index", pos), self.static[pos].get("name"), pos in first,
                                     round(first[pos] - t0, 3) if pos in first else None, segs, ov,
                                     summarize(ticks, pos, self.pid)))
        job = [g for g in gpus if g.used]  # one job's GPUs: comms, a stalled collective, a straggler, together
        log = self.culprits
        mine = {g.index for g in job} or None  # the run's GPUs: a neighbour's job on the node is not judged here
        records, collectives = (log.records(mine), log.collectives()) if log is not None else (None, None)
        group_comms([g.verdict for g in job], [g.index for g in job], [g.timeline for g in job], stacks=records)
        if len(job) >= 2:
            small_collectives([g.verdict for g in job], collectives)
        shared_gpus([g.verdict for g in job], [g.index for g in job], self._foreign(ticks))
        notes = []
        if how == "memory/activity rise":
            notes.append("the command's pids are not in NVML's process list (another PID namespace?); its GPUs "
                         "were picked by a rise in memory use or activity after it started")
        elif how == "none":
            notes.append("the command did not appear on any GPU gputop watched (no pid in NVML's process list, "
                         "no rise in memory use or activity)")
        if self.oom_times:
            notes.append("the command reported an out-of-memory error on its stderr")
        sampling = {"rate_hz": self.sampler.rate_hz, "ticks": len(ticks), "stride": self.store.stride,
                    "sampler_errors": self.sampler.errors}
        if self.stacks is not None:  # what reading the ranks' stacks cost (each read: all of them, on its thread)
            sampling["stack_reads_s"] = list(self.stacks.read_s)
        block, told = (log.block(t0, mine) if log is not None else None), telemetry_block(job)
        if told is not None and (block is None or block["kind"] in ("none", "unreadable")):
            # the stacks named nobody (unreadable, or all at one kind of place): the telemetry's culprit GPUs stand
            block = told if block is None else dict(block, **{k: told[k] for k in ("basis", "kind", "culprit_gpus")},
                                                    sentence=f"{told['sentence']}; the stacks: {block['sentence']}")
        return Diagnosis([self.static[p].get("index", p) for p in used], how, gpus, _run_verdict(gpus, how), notes,
                         sampling, block, collectives)


def _oom_overall(ov: RunVerdict) -> RunVerdict:
    return ov.copy(cls=Cls.MEMORY_CAPACITY, subclass=Sub.OOM, advice=advise(Cls.MEMORY_CAPACITY, Sub.OOM),
                   mixed=[ov.cls] + [c for c in ov.mixed if c != Cls.MEMORY_CAPACITY],
                   evidence_text=f"the command reported an out-of-memory error; before it, {display_name(ov)}: "
                                 + ov.evidence_text)


def _run_verdict(gpus: list[GpuDiagnosis], how: str) -> Verdict:
    """The run's verdict: that of the used GPU with the most non-idle time; idle when none was used."""
    used = [g for g in gpus if g.used and g.verdict]
    if not used:
        ev = Evidence(gpus_watched=len(gpus))
        text = ("the command used no GPU gputop could see" if how == "none"
                else "no samples while the command ran on its GPU")
        return Verdict(Cls.IDLE, None, 0.9 if how == "none" else 0.3, ev, text, advise(Cls.IDLE, None))

    def busy_time(g):
        return sum(d for c, d in g.verdict.time_by_class_s.items() if c != Cls.IDLE)

    best = max(used, key=busy_time)
    return best.verdict.copy(gpu=best.index)
