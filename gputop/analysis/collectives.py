"""The GPUs of one job looked at together: a stalled collective, and a straggler.

Pure (no NVML). :func:`judge_job` takes the verdicts of a job's GPUs (the classifier's, one window or a run each):

* **a stalled collective**: where some GPUs are stalled (gputop/analysis/rules/stalled.py: NCCL's kernels waiting
  for a peer that never comes), which of the job's other GPUs wait in the same stall, which left (no process on
  the GPU any more) or idle (a process that runs nothing), for how long: the stalled GPUs become "collective".
* **a straggler**: when some GPUs of a job wait in collectives (comms-bound "collectives") while a few others work
  (compute- or memory-bound, or throttled), the busy ones are the stragglers; :func:`judge_job` names them and
  says why they are slow: more work (their pipes or DRAM busier than the waiters') or throttled (a lower SM clock
  than the waiters', thermal or power reasons); or, where the others are host- or input-bound, their host.
"""

from __future__ import annotations

from gputop.analysis.evidence import Key, declare
from gputop.analysis.rules.comms_bound import ADVICE as COMMS_ADVICE
from gputop.analysis.rules.comms_bound import STRAGGLER_HOST_ADVICE
from gputop.analysis.rules.culprit import CULPRIT_MIN_STALL_S, blame
from gputop.analysis.rules.stalled import ADVICE
from gputop.analysis.rules.stalled import describe as describe_stall
from gputop.analysis.rules.stalled import gpu_names as _gpus
from gputop.analysis.rules.throttled import THERMAL_SAMPLE_FRACTION
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import Cls, Sub

# A straggler: a GPU of the job that works (compute- or memory-bound) while the others wait in collectives, with
# its busiest unit this much busier than the same unit on the waiters (more work: the 4-H100 straggler, 3x
# the matmuls, reads tensor 89% against 22%), or its SM clock at most this share of theirs (throttled).
STRAGGLER_WORK_RATIO = 1.5
STRAGGLER_WORK_MARGIN_PCT = 10.0
STRAGGLER_CLOCK_RATIO = 0.9

EVIDENCE = declare(
    Key("straggler_busiest_pct", "%", "the straggler's busiest unit (a pipe or DRAM)"),
    Key("waiters_busiest_pct", "%", "the same unit on the GPUs that wait for it, mean"),
    Key("straggler_sm_clock_mhz", "MHz", "the straggler's SM clock"),
    Key("waiters_sm_clock_mhz", "MHz", "the SM clock of the GPUs that wait for it, mean"),
    Key("straggler_util_pct", "%", "the straggler's kernel duty cycle (slowed by its host)"),
    Key("waiters_util_pct", "%", "the kernel duty cycle of the GPUs that wait for it, mean"),
    Key("straggler_score", "0-1", "this GPU's rank's relative performance score: the fastest rank's time on its own "
        "work over this rank's (1: the fastest; 0.5: twice as slow), estimated from the GPUs' busy time"),
    Key("collectives_per_s", "1/s", "collectives a second the job's ranks issued (their flight recorder)"),
    Key("collective_median_bytes", "B", "the median size of those collectives"),
)


# -- the job's GPUs together ----------------------------------------------------------------------------------

def _stalled_for(v: Verdict) -> float | None:
    if v.evidence.get("stalled_for_s") is not None:
        return v.evidence["stalled_for_s"]
    by = getattr(v, "time_by_class_s", None)  # a run's verdict: its time stalled
    if by and by.get(Cls.STALLED) is not None:
        return by[Cls.STALLED]
    return v.t_end - v.t_start if v.t_start is not None and v.t_end is not None else None


def judge_job(verdicts: list, gpus: list[int] | None = None, timelines: list | None = None,
              stacks: dict | None = None) -> list:
    """The :class:`Verdict`s (None for a GPU without one) of one job's GPUs (NVML indices ``gpus``, default their
    positions), looked at together: a stalled collective's waiting, left and idle GPUs, and a straggler.
    ``timelines``: each GPU's timeline (its :class:`gputop.analysis.timeline.Segment`s: a run's, the GPUs its
    command used): what the other GPUs did while the stall lasted is read there (a run's verdict of a GPU that left
    is its work before it left), and its stalled segments say the stall's subclass too. Without them (the TUI,
    --export: the node's GPUs, ``job["basis"]`` "node") an idle GPU may be another job's, and the sentence says so.
    A GPU of the job that was not in the stall becomes its culprit (gputop/analysis/rules/culprit.py); ``stacks``:
    {GPU: the culprit record of its rank (gputop/analysis/rank_stacks.py)} where the ranks' stacks were read.
    Annotates the verdicts (and segments) in place, once: a live verdict judged again each frame says it once;
    returns the verdicts."""
    gpus = list(range(len(verdicts))) if gpus is None else list(gpus)
    lines = dict(zip(gpus, timelines)) if timelines is not None else {}
    items = [(g, v) for g, v in zip(gpus, verdicts) if v is not None]
    _stalls(items, lines, stacks)
    _held_by_stacks(items, stacks, "run" if lines else "node")
    _stragglers(items, "run" if lines else "node")
    return verdicts


def _stall_span(segments: list) -> tuple[float, float, float] | None:
    """(since, until, seconds) of the stalled segments of a timeline, None without any."""
    st = [s for s in segments or [] if s.cls == Cls.STALLED]
    if not st:
        return None
    return st[0].t_start, st[-1].t_end, sum(s.t_end - s.t_start for s in st)


def _during(segments: list, a: float, b: float) -> tuple[Cls | None, dict]:
    """The class (and its evidence) a timeline spent most of [a, b] in."""
    best, got = 0.0, (None, {})
    for s in segments or []:
        overlap = min(b, s.t_end) - max(a, s.t_start)
        if overlap > best:
            best, got = overlap, (s.cls, s.verdict.evidence)
    return got


def _stalls(items: list, lines: dict, stacks: dict | None = None) -> None:
    spans = {g: _stall_span(lines.get(g)) for g, _ in items}
    stalled = [g for g, v in items if v.cls == Cls.STALLED or (spans[g] and v.cls != Cls.IDLE)]
    if not stalled:
        return
    a = min((spans[g][0] for g in stalled if spans[g]), default=None)
    b = max((spans[g][1] for g in stalled if spans[g]), default=None)
    state = {}
    for g, v in items:
        if g in stalled:
            continue
        state[g] = _during(lines[g], a, b) if g in lines and a is not None else (v.cls, v.evidence)
    gone = {g for g, (_, ev) in state.items()
            if ev.get("processes_on_gpu") is not None and ev["processes_on_gpu"] < 0.5}  # no process on it
    left = [g for g, (cls, _) in state.items() if cls == Cls.IDLE and g in gone]
    idle = [g for g, (cls, _) in state.items() if cls in (Cls.IDLE, Cls.HOST_BOUND, Cls.INPUT_STARVED)
            and g not in left]
    for g, v in items:
        ev, job = v.evidence, v.job
        if g in stalled and "waiting" not in job:
            job.update({"waiting": stalled, "left": left, "idle": idle, "basis": "run" if lines else "node"})
            ev.update({"job_gpus_waiting": len(stalled), "job_gpus_left": len(left), "job_gpus_idle": len(idle),
                       "stalled_for_s": spans[g][2] if spans[g] else _stalled_for(v)})
            if spans[g]:
                ev["stalled_since_s"] = spans[g][0]
            sub = Sub.COLLECTIVE if len(stalled) > 1 or left or idle else v.subclass
            for seg in lines.get(g) or []:  # the timeline says it too
                if seg.cls == Cls.STALLED and sub:
                    seg.verdict.subclass, seg.verdict.advice = sub, ADVICE[sub]
            record = (stacks or {}).get(g)
            if record:  # who holds it up, from the ranks' stacks (gputop/analysis/rank_stacks.py)
                job["culprit"] = record
                v.notes.insert(0, "from the ranks' stacks: " + record["sentence"])
            if v.cls == Cls.STALLED:
                v.subclass, v.evidence_text, v.advice = sub, describe_stall(sub, ev, job), ADVICE[sub]
            else:  # a run that stalled after its work: the stall is said first, in the stalled segment's numbers
                st = max((x for x in lines.get(g) or [] if x.cls == Cls.STALLED), key=lambda x: x.t_end - x.t_start)
                sev = dict(st.verdict.evidence, stalled_for_s=ev["stalled_for_s"])
                v.notes.insert(0, f"stalled for {ev['stalled_for_s']:.0f} s from {ev['stalled_since_s']:.1f} s: "
                                  + describe_stall(sub, sev, job))
                if Cls.STALLED not in v.mixed:
                    v.mixed.insert(0, Cls.STALLED)
        if (g in stalled and v.cls == Cls.STALLED and (stacks or {}).get(g, {}).get("where")
                and (stacks or {})[g].get("kind") in ("mismatch", "outside") and len(stalled) > 1
                and (_stalled_for(v) or 0.0) >= CULPRIT_MIN_STALL_S):
            # its own GPU waits too, but its rank is the odd one: in another collective than its peers'
            others = [w for w in stalled if w != g]
            blame(v, others, Cls.STALLED, False, "run" if lines else "node", _stalled_for(v), v.confidence,
                  stacks[g])
        elif (g in left + idle or _named_by_stacks(g, stacks)) and "stalled" not in job and v.cls != Cls.CULPRIT:
            waited = (max((spans[w][2] for w in stalled if spans[w]), default=None)
                      or max((_stalled_for(wv) or 0.0 for w, wv in items if w in stalled), default=0.0))
            if waited < CULPRIT_MIN_STALL_S:  # the job's ranks finishing apart: teardown, not a hang
                job["stalled"] = stalled
            elif lines or g not in left or (stacks or {}).get(g, {}).get("where"):
                # a node's GPU with no process may be no rank of this job at all, unless its rank's stack says so
                record = (stacks or {}).get(g)
                gone = g in left and not (record and record.get("where") and record.get("kind") != "left")
                conf = min((wv.confidence for w, wv in items if w in stalled and wv.confidence is not None),
                           default=None)
                blame(v, stalled, state[g][0], gone, "run" if lines else "node", waited, conf, record)
            else:
                job["stalled"] = stalled
                v.notes.insert(0, f"this GPU has no process while {_gpus(stalled)} wait in a collective: if its rank "
                                  "was of their job, it left the job")


def _held_by_stacks(items: list, stacks: dict | None, basis: str) -> None:
    """No GPU of the job stalled in a kernel, yet the ranks' stacks (read while two GPUs or more of it sat held: a
    rank that never joined) name a rank outside while its peers wait in a collective's Python call (NCCL's set-up,
    DDP's first broadcast, a barrier: the wait is on the CPU side, the GPUs read host-bound or idle): the culprit's
    verdict tells it, and the waiting GPUs' say whom they wait for (the 4-H100 corpus's `nojoin`)."""
    if any(v.cls in (Cls.STALLED, Cls.CULPRIT) for _, v in items):
        return
    record = next((r for r in (stacks or {}).values() if r.get("kind") in ("outside", "left")
                   and r.get("culprit_gpus") and r.get("sentence")), None)
    if record is None:
        return
    culprits = set(record["culprit_gpus"])
    waiting = sorted({x["gpu"] for x in record.get("ranks") or [] if x.get("place") == "collective"
                      and x.get("gpu") is not None} - culprits)
    if not waiting:
        return
    for g, v in items:
        if g in culprits:
            blame(v, waiting, v.cls, record.get("kind") == "left", basis, None, v.confidence,
                  (stacks or {}).get(g) or record)
        elif g in waiting and "culprit" not in v.job:
            v.job["culprit"] = record
            v.notes.insert(0, "from the ranks' stacks: " + record["sentence"])


def _named_by_stacks(g: int, stacks: dict | None) -> bool:
    """Whether the ranks' stacks name ``g``'s rank the culprit (its GPU at work of its own while its peers wait: a
    collective of another size or kind on 4 H100s read latency-bound, underfilled)."""
    record = (stacks or {}).get(g) or {}
    return bool(record.get("where")) and g in (record.get("culprit_gpus") or [])


def _busiest(ev: dict) -> tuple[str, float]:
    units = {k[:-4]: ev.get(k) or 0.0 for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "dram_bw_pct")}
    name = max(units, key=units.get)
    return name, units[name]


def _stragglers(items: list, basis: str) -> None:
    waiters = [(g, v) for g, v in items if v.cls == Cls.COMMS_BOUND and v.subclass in (Sub.COLLECTIVES, Sub.STRAGGLER)]
    busy = [(g, v) for g, v in items if v.cls in (Cls.COMPUTE_BOUND, Cls.MEMORY_BOUND, Cls.THROTTLED)]
    host = [(g, v) for g, v in items if v.cls in HOST_CLASSES]
    if waiters and not busy and host and len(host) <= len(waiters):
        _host_stragglers(waiters, host, basis)
        return
    if not waiters or not busy or len(busy) > len(waiters):
        return
    wev = [v.evidence for _, v in waiters]
    ratio_w = [r for e in wev if (r := e.get("sm_clock_ratio")) is not None]
    for g, v in busy:
        ev, job = v.evidence, v.job
        if "why" in job:
            continue
        unit, pct = _busiest(ev)
        theirs = sum((e.get(unit + "_pct") or 0.0) for e in wev) / len(wev)
        name = {"dram_bw": "DRAM"}.get(unit, unit)
        why, nums = [], {}
        if pct >= STRAGGLER_WORK_RATIO * theirs + STRAGGLER_WORK_MARGIN_PCT:
            why.append(f"more work: its {name} {pct:.0f}% busy vs {theirs:.0f}% on the others")
            nums.update({"straggler_busiest_pct": pct, "waiters_busiest_pct": theirs})
        mine = ev.get("sm_clock_ratio")
        thermal = (ev.get("thermal_sample_fraction") or 0) > THERMAL_SAMPLE_FRACTION[0]
        # a lower clock at the power cap is what more work does to a GPU; alone, or with heat, it is the cause
        if (ratio_w and mine is not None and mine <= STRAGGLER_CLOCK_RATIO * (sum(ratio_w) / len(ratio_w))
                and (thermal or not why)):
            why.append(f"throttled: SM clock {ev.get('sm_clock_mhz') or 0:.0f} MHz vs {_mean_clock(wev):.0f} on the "
                       "others" + (" (thermal)" if thermal else ""))
            nums.update({"straggler_sm_clock_mhz": ev.get("sm_clock_mhz"), "waiters_sm_clock_mhz": _mean_clock(wev)})
        if why:
            _name_straggler(g, v, waiters, why, nums, basis, COMMS_ADVICE[Sub.STRAGGLER])
            _scores([(g, v)] + waiters, lambda e, u=unit: e.get(u + "_pct") or 0.0, slower_is_busier=True)


def _name_straggler(g, v, waiters: list, why: list[str], nums: dict, basis: str, advice: str, **job_facts) -> None:
    """GPU ``g`` (verdict ``v``) is the straggler ``waiters`` wait for, ``why``: said on its verdict and theirs."""
    waiting = [w for w, _ in waiters]
    v.job.update({"straggler": g, "why": why, "waiting": waiting, "basis": basis, **job_facts})
    v.evidence.update(nums)
    who = "the straggler of its job" if basis == "run" else "likely a straggler (if of their job)"
    v.evidence_text += f"; {who}: {_gpus(waiting)} wait in collectives ({'; '.join(why)})"
    for w, wv in waiters:
        if g in wv.job.setdefault("waits_for", []):
            continue
        wv.job["waits_for"].append(g)
        wv.evidence.update(nums)
        wv.subclass, wv.advice = Sub.STRAGGLER, advice
        wv.evidence_text += f"; it waits for {_gpus([g])}, the straggler ({'; '.join(why)})"


HOST_CLASSES = (Cls.INPUT_STARVED, Cls.HOST_BOUND)


def _host_stragglers(waiters: list, host: list, basis: str) -> None:
    """GPUs that wait in collectives for one whose own process keeps it idle (its data pipeline or its Python loop
    is slower): that GPU is the straggler, slowed by its host, not by its GPU."""
    wev = [v.evidence for _, v in waiters]
    theirs = sum((e.get("util_gpu_pct") or 0.0) for e in wev) / len(wev)
    for g, v in host:
        mine = v.evidence.get("util_gpu_pct")
        if "why" in v.job or mine is None or mine >= theirs:
            continue
        why = [f"its host: kernels active {mine:.0f}% vs {theirs:.0f}% on the others, its GPU waits for its "
               f"process ({v.cls})"]
        _name_straggler(g, v, waiters, why, {"straggler_util_pct": mine, "waiters_util_pct": theirs}, basis,
                        STRAGGLER_HOST_ADVICE, slowed_by="host")
        _scores([(g, v)] + waiters, lambda e: e.get("util_gpu_pct") or 0.0, slower_is_busier=False)


def _mean_clock(evs: list[dict]) -> float:
    c = [e["sm_clock_mhz"] for e in evs if e.get("sm_clock_mhz") is not None]
    return sum(c) / len(c) if c else 0.0


SCORE_FLOOR_PCT = 1.0  # a unit less busy than this counts as this busy (a ratio of two near-zero numbers means nothing)


def _scores(items: list, busy, slower_is_busier: bool) -> None:
    """Each GPU's straggler score, NVIDIA's resiliency extension's relative performance score (the fastest rank's
    section time over this rank's: 1 the fastest, 0.5 twice as slow), estimated from telemetry: a rank that does
    more work or runs at a lower clock spends more of each step busy on its busiest unit (``slower_is_busier``: its
    time on its own work is in proportion to that unit's busy share, and the fastest rank's is the least busy); a
    rank slowed by its host keeps its GPU idle longer (its duty cycle lower: the score is its duty cycle over the
    busiest's). On each verdict's evidence and ``job["straggler_scores"]`` ({GPU: score}) of every GPU named."""
    vals = {g: max(SCORE_FLOOR_PCT, float(busy(v.evidence))) for g, v in items}
    best = min(vals.values()) if slower_is_busier else max(vals.values())
    scores = {g: round(best / x if slower_is_busier else x / best, 2) for g, x in vals.items()}
    for g, v in items:
        v.evidence["straggler_score"] = scores[g]
        v.job["straggler_scores"] = dict(scores)
    for g, v in items:
        if "straggler" in v.job and v.job["straggler"] == g and "straggler score" not in v.evidence_text:
            v.evidence_text += f"; straggler score {scores[g]:.2f} (1: as fast as the fastest rank)"


def small_collectives(verdicts: list, info: dict | None) -> None:
    """A job whose ranks issue many small collectives (their flight recorder's entries: gputop/analysis/fr_dumps.py's
    ``collective_rate``, "small") is paying NCCL's latency, not moving bytes: said on every GPU of the job, whatever
    each GPU's own class (the issue's metric all-reduced every step read input-starved on one GPU, latency-bound on
    the other). Telemetry alone cannot say it: NVML and GPM count no collectives."""
    if not info or not info.get("small"):
        return
    ops = ", ".join(f"{n} {op}" for op, n in sorted(info.get("ops", {}).items(), key=lambda kv: -kv[1])[:3])
    b = info["median_bytes"]
    size = f"{b} B" if b < 1024 else f"{b / 1024:.3g} KiB" if b < 1 << 20 else f"{b / (1 << 20):.3g} MiB"
    text = (f"{info['per_s']:.0f} collectives a second of {size} (median; {ops} in the "
            f"flight recorder's last {info['span_s']:.2f} s): latency, not bandwidth: each pays NCCL's launch and "
            "synchronisation; batch them (all-reduce once per N steps, or one flattened tensor), and do not read "
            "their results on the host every step")
    for v in verdicts:
        if v is None or "collectives" in v.job:
            continue
        v.job["collectives"] = dict(info)
        v.evidence.update({"collectives_per_s": info["per_s"], "collective_median_bytes": info["median_bytes"]})
        v.notes.insert(0, text)


def shared_gpus(verdicts: list, gpus: list[int], others: dict[int, list[dict]]) -> None:
    """GPUs of a run's job that also ran another job's processes (``others``: {GPU: [{"pid", "name"}]}, processes
    NVML listed there that are not of the command's tree): said on each, and a straggler's why names it (a rank
    that shares its GPU falls behind its peers, and its GPU reads busier than theirs: not its own work)."""
    for g, v in zip(gpus, verdicts):
        procs = others.get(g) or []
        if v is None or not procs or "shared_with" in v.job:
            continue
        words = ", ".join(f"pid {p.get('pid')} ({p.get('name') or '?'})" for p in procs[:3])
        v.job["shared_with"] = [{"pid": p.get("pid"), "name": p.get("name")} for p in procs]
        if v.job.get("straggler") == g:
            v.job.setdefault("why", []).append(f"its GPU is shared with another job's process: {words}")
            v.evidence_text += f"; its GPU is shared with another job's process ({words}): part of its load is not its own"
        else:
            v.notes.insert(0, f"this GPU also ran another job's process: {words}")
