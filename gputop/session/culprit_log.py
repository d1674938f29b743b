"""Who held a run up, kept while it ran: the ranks' stacks read during each stall, the culprit named from them, the
flight recorder's dumps, and when each came.

A run's ranks are gone when it ends (a hang is ended by ``--timeout``, Ctrl-C or the user), so what names the
culprit must be read *during* the stall: the monitor's live node (gputop/analysis/live.py's ``LiveNode``, fed on the
sampler's thread) asks its stack reader for the ranks' stacks while a GPU is stalled, and hands each read it names
a culprit from to :meth:`CulpritLog.on_stacks`. The log keeps them with their times, writes each into the
recorded trace (a ``stacks`` row: the read and the culprit records; ``--replay`` reads them back:
:meth:`CulpritLog.from_rows`), and, where the command runs with PyTorch's flight recorder on
(gputop/session/flight_recorder.py), asks the ranks for a dump once each stall is seen and once
``SAMPLE_AT_S`` into a job of two GPUs or more (its collectives' rate and size: are they small?), each kept as a
``flight_recorder`` row.

At the end, :meth:`records` are the culprit records the run document's per-GPU verdicts quote (the first read that
named a culprit: the ranks are where the fault put them, before the end of the run moved them), and :meth:`block`
is the document's job-level ``culprit``: who, what, where, and when it was first named (seconds after the stall
began; ``stall_seen_after_s``: when the live verdict first said "stalled").
"""

from __future__ import annotations

import threading
from dataclasses import replace

from gputop.analysis.live import StacksRead
from gputop.analysis.rank_stacks import judged_again, with_flight_recorder
from gputop.analysis.vocabulary import Cls

SAMPLE_AT_S = 20.0  # a job on two GPUs or more: its flight recorder read once this long after the command started
FR_AFTER_STALL_S = 2.0  # a stall this old asks the ranks for a flight recorder dump (once per stall)
NAMING = ("left", "outside", "mismatch", "gpu")  # the kinds of record that name a culprit


def _strip(records: dict) -> dict:
    """The records without the ranks' stacks (the row holds them once, under ``stacks``)."""
    return {str(g): dict(r, ranks=[{k: v for k, v in x.items() if k != "stack"} for x in r.get("ranks") or []])
            for g, r in records.items()}


def _dress(records: dict, read: dict) -> dict:
    """Rows' records with each rank's stack put back from the read ({pid: {"stack", "rank"}})."""
    out = {}
    for g, r in (records or {}).items():
        ranks = [dict(x, stack=(read.get(str(x.get("pid"))) or read.get(x.get("pid")) or {}).get("stack"))
                 for x in r.get("ranks") or []]
        out[int(g)] = dict(r, ranks=ranks)
    return out


class CulpritLog:
    """The culprit records and flight recorder dumps of one run (module doc). ``recorder``: the trace being written
    (None: none); ``flight``: the command's :class:`gputop.session.flight_recorder.FlightRecorder` (None: not ours);
    ``live``: the monitor's live node (its snapshot says when a stall is seen)."""

    def __init__(self, recorder=None, flight=None):
        self.recorder, self.flight, self.live = recorder, flight, None
        self.reads: list[StacksRead] = []
        self.dumps: list[tuple[float, dict, bool | set | None]] = []  # (tick time, FlightRecorder.dump()'s result,
        # the GPUs (NVML indices) stalled when it was taken; older traces: whether any GPU of the node was, or None)
        self.t_first_gpu: float | None = None  # when the command was first seen on two GPUs
        self.mine: set | None = None  # the command's GPUs (NVML indices) as seen so far (None: none yet)
        self._lock = threading.Lock()
        self._asked_stall: float | None = None  # the stall (its start) a dump was asked for
        self._sampled = False
        self._fr_seen: float | None = None
        self.stalls_seen: list[tuple[float, float]] = []  # (tick time a stalled verdict was first live, its start)

    # -- fed while the run goes (the sampler's thread) ---------------------------------------------------------------
    def on_stacks(self, got: StacksRead) -> None:
        with self._lock:
            self.reads.append(got)
        seen = self._seen(got.since)
        if self.recorder is not None:
            rel = self.recorder.rel
            self.recorder.row({"type": "stacks", "t": rel(got.t), "since": rel(got.since),
                               "seen": rel(seen) if seen is not None else None, "stalled": got.stalled,
                               "stacks": {str(p): v for p, v in got.read.items()}, "records": _strip(got.records)})

    def _seen(self, since: float) -> float | None:
        """When the stall begun at ``since`` was first judged stalled live (None: not seen as a stall)."""
        return next((t for t, s in self.stalls_seen if abs(s - since) <= 2.0), None)

    def __call__(self, tick: dict) -> None:
        """A sampler listener: notes when a stall is first judged live, asks for flight recorder dumps (a stall
        seen; a job's collectives), keeps their results."""
        t = tick["t"]
        snap = self.live.snapshot() if self.live is not None else None
        names = self.live.names if self.live is not None else []
        node = [(g, v) for g, v in zip(names, snap.verdicts() if snap else []) if v is not None and v.cls == Cls.STALLED]
        # a neighbour's job stalled on the node is not this command's stall (its dumps say nothing of it)
        stalled = [v for g, v in node if self.mine is None or g in self.mine]
        since = min(t - (v.evidence.get("stalled_for_s") or 0.0) for v in stalled) if stalled else None
        if since is not None and self._seen(since) is None:
            self.stalls_seen.append((t, since))
        if self.flight is None:
            return
        res, at = self.flight.latest, self.flight.read_at
        if res is not None and at != self._fr_seen:
            self._fr_seen = at
            stalled_gpus = sorted(g for g, _ in node)
            with self._lock:
                self.dumps.append((t, res, set(stalled_gpus)))
            if self.recorder is not None:
                self.recorder.row({"type": "flight_recorder", "t": self.recorder.rel(t), "result": res,
                                   "stalled": bool(stalled), "stalled_gpus": stalled_gpus})
        if stalled:
            old = t - since >= FR_AFTER_STALL_S
            if old and (self._asked_stall is None or since > self._asked_stall + 1.0) and self.flight.dump_async():
                self._asked_stall = since
        elif not self._sampled and self.t_first_gpu is not None and t - self.t_first_gpu >= SAMPLE_AT_S:
            self._sampled = self.flight.dump_async()

    def seen_on_gpus(self, t: float, gpus: set) -> None:
        """The command was seen on ``gpus`` (NVML indices) by tick time ``t``: its stalls are theirs, and a job on
        two GPUs or more has collectives worth a sample."""
        self.mine = set(gpus)
        if len(gpus) >= 2 and self.t_first_gpu is None:
            self.t_first_gpu = t

    # -- read back from a trace -------------------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: list[dict]) -> "CulpritLog":
        """The log a recorded run kept (its ``stacks`` and ``flight_recorder`` rows, trace time), each read's
        culprit judged again from its ranks and stacks (rank_stacks.judged_again)."""
        log = cls()
        for r in rows:
            if r.get("type") == "stacks":
                read = {int(p): v for p, v in (r.get("stacks") or {}).items()}
                records = judged_again(_dress(r.get("records"), read), read)  # by this gputop's judge
                log.reads.append(StacksRead(r["t"], r.get("since", r["t"]), read, records,
                                            r.get("stalled", True) is not False))
                if r.get("seen") is not None:
                    log.stalls_seen.append((r["seen"], r.get("since", r["t"])))
            elif r.get("type") == "flight_recorder" and isinstance(r.get("result"), dict):
                gpus = r.get("stalled_gpus")
                log.dumps.append((r["t"], r["result"], set(gpus) if isinstance(gpus, list) else r.get("stalled")))
        return log

    # -- the document -----------------------------------------------------------------------------------------------
    def _naming(self, gpus: set | None = None) -> StacksRead | None:
        """The first read that named a culprit, else the last of a stall; ``gpus``: the run's GPUs (NVML indices):
        only its job's records count (a neighbour's job on the node, stalled too, is not the run's)."""
        with self._lock:
            reads = list(self.reads)
        if gpus is not None:
            reads = [replace(r, records={g: rec for g, rec in r.records.items() if g in gpus}) for r in reads]
            reads = [r for r in reads if r.records]
        named = [r for r in reads if _kind(r.records) in NAMING]
        stalls = [r for r in reads if r.stalled]  # a read of a job held idle that names no one says nothing
        return named[0] if named else (stalls[-1] if stalls else None)

    def _mismatch(self, since: float | None = None, gpus: set | None = None) -> tuple[float, dict] | None:
        """The first dump taken during a stall that names a mismatch (of the stall begun at ``since``, where
        given; a stall of the run's ``gpus``, where given and the dump says which GPUs were stalled: a neighbour
        job's stall is not the run's). A dump of a job that runs says nothing of a hang: its ranks' buffers are read
        moments apart, so one rank is often a collective behind the others."""
        with self._lock:
            dumps = list(self.dumps)
            stalls = [s for _, s in self.stalls_seen] + [r.since for r in self.reads if r.stalled]
        for t, res, stalled in dumps:
            if isinstance(stalled, set):
                during = bool(stalled & gpus) if gpus is not None else bool(stalled)
            else:  # older traces: whether any GPU of the node was stalled, or no flag at all
                during = stalled if stalled is not None else any(s <= t for s in stalls)
            if res.get("mismatch") and during and (since is None or t >= since):
                return t, res["mismatch"]
        return None

    def records(self, gpus: set | None = None) -> dict | None:
        """{GPU: its culprit record} for the run document's verdicts (the flight recorder's mismatch merged in where
        the stacks named none), of the run's ``gpus`` where given; None where no stack was read during a stall."""
        got = self._naming(gpus)
        if got is None:
            return None
        fr = self._mismatch(got.since, gpus)
        return with_flight_recorder(got.records, fr[1]) if fr else got.records

    def collectives(self) -> dict | None:
        """The job's collectives as its flight recorder showed them (rate, size, small), the latest dump's."""
        with self._lock:
            got = [res["collectives"] for _, res, _ in self.dumps if res.get("collectives")]
        return got[-1] if got else None

    def block(self, t0: float, gpus: set | None = None) -> dict | None:
        """The run document's job-level ``culprit`` (module doc; times in seconds since ``t0``, the run's start), of
        the run's ``gpus`` where given; None where no stall's stacks were read and no dump names a mismatch."""
        got = self._naming(gpus)
        fr = self._mismatch(got.since if got else None, gpus)
        if got is None and fr is None:
            return None
        out = {"basis": "stacks" if got is not None else "flight recorder",
               "kind": None, "sentence": None, "culprit_ranks": [], "culprit_pids": [], "culprit_gpus": [],
               "where": None, "stall_began_s": None, "named_at_s": None, "named_after_s": None,
               "stall_seen_after_s": None,
               "reads": len(self.reads), "flight_recorder": fr[1] if fr else None,
               "flight_recorder_at_s": round(fr[0] - t0, 1) if fr else None}
        if got is not None:
            records = with_flight_recorder(got.records, fr[1]) if fr else got.records
            rec = next(iter(records.values()))
            where = next((r["where"] for r in records.values() if r.get("where")), None)
            out.update({k: rec.get(k) for k in ("kind", "sentence", "culprit_ranks", "culprit_pids", "culprit_gpus")})
            seen = self._seen(got.since)
            out.update({"where": where, "stall_began_s": round(got.since - t0, 1), "named_at_s": round(got.t - t0, 1),
                        "named_after_s": round(got.t - got.since, 1),
                        "stall_seen_after_s": round(seen - got.since, 1) if seen is not None else None})
        else:
            out.update({"kind": "mismatch", "sentence": "from the flight recorder: " + fr[1]["sentence"],
                        "culprit_ranks": fr[1]["culprit_ranks"]})
        return out


def _kind(records: dict) -> str | None:
    return next(iter(records.values())).get("kind") if records else None


def telemetry_block(job: list) -> dict | None:
    """The job-level ``culprit`` where no stack was read (no py-spy, not Python, a trace recorded without them): the
    GPUs whose run verdict is "culprit" from telemetry alone (a GPU with no process, or idle, while its peers stall),
    their ranks unknown. ``job``: the run's GpuDiagnosis of the job's GPUs. None where no GPU is a culprit."""
    hit = [g for g in job if g.verdict is not None and g.verdict.cls == Cls.CULPRIT]
    if not hit:
        return None
    v = hit[0].verdict
    return {"basis": "telemetry", "kind": v.subclass, "culprit_ranks": [], "culprit_pids": [],
            "culprit_gpus": [g.index for g in hit], "where": None,
            "sentence": "; ".join(f"GPU {g.index}: {g.verdict.evidence_text}" for g in hit),
            "stall_began_s": None, "named_at_s": None, "named_after_s": None, "stall_seen_after_s": None,
            "reads": 0, "flight_recorder": None, "flight_recorder_at_s": None}
