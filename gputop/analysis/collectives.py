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
from gputop.analysis.rules.stalled import ADVICE
from gputop.analysis.rules.stalled import describe as describe_stall
from gputop.analysis.rules.stalled import gpu_names as _gpus
from gputop.analysis.rules.throttled import THERMAL_SAMPLE_FRACTION
from gputop.analysis.verdict import Verdict

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
)


# -- the job's GPUs together ----------------------------------------------------------------------------------

def verdict_field(v, key):
    """One field of a verdict, a :class:`Verdict` or a document's dict (by the dict's names: "class")."""
    if isinstance(v, Verdict):
        return {"class": v.cls, "subclass": v.subclass, "evidence": v.evidence, "notes": v.notes, "job": v.job,
                "evidence_text": v.evidence_text, "mixed": v.mixed, "t_start": v.t_start, "t_end": v.t_end}.get(key)
    if key in ("t_start", "t_end"):
        return (v.get("window") or {}).get(key)
    if key in ("notes", "job"):
        return v.setdefault(key, [] if key == "notes" else {})
    return v.get(key)


def set_verdict(v, **kw) -> None:
    """Set fields of a verdict, a :class:`Verdict` or a document's dict (by the dict's names)."""
    if isinstance(v, Verdict):
        for k, val in kw.items():
            setattr(v, {"class": "cls"}.get(k, k), val)
    else:
        v.update(kw)


def _stalled_for(v) -> float | None:
    ev = verdict_field(v, "evidence") or {}
    if ev.get("stalled_for_s") is not None:
        return ev["stalled_for_s"]
    by = v.get("time_by_class_s") if isinstance(v, dict) else None
    if by and by.get("stalled") is not None:
        return by["stalled"]
    a, b = verdict_field(v, "t_start"), verdict_field(v, "t_end")
    return b - a if a is not None and b is not None else None


def judge_job(verdicts: list, gpus: list[int] | None = None, timelines: list | None = None) -> list:
    """The verdicts (:class:`Verdict` or their dicts, None for a GPU without one) of one job's GPUs (NVML indices
    ``gpus``, default their positions), looked at together: a stalled collective's waiting, left and idle GPUs,
    and a straggler. ``timelines``: each GPU's timeline segments (a run's document: the GPUs its command used):
    what the other GPUs did while the stall lasted is read there (a run's verdict of a GPU that left is its work
    before it left). Without them (the TUI, --export: the node's GPUs, ``job["basis"]`` "node") an idle GPU may
    be another job's, and the sentence says so.
    Annotates the verdicts in place (once); returns them."""
    gpus = list(range(len(verdicts))) if gpus is None else list(gpus)
    lines = dict(zip(gpus, timelines)) if timelines is not None else {}
    items = [(g, v) for g, v in zip(gpus, verdicts) if v is not None]
    _stalls(items, lines)
    _stragglers(items, "run" if lines else "node")
    return verdicts


def _stall_span(segments: list[dict]) -> tuple[float, float, float] | None:
    """(since, until, seconds) of the stalled segments of a timeline, None without any."""
    st = [s for s in segments or [] if s.get("class") == "stalled"]
    if not st:
        return None
    return st[0]["t_start"], st[-1]["t_end"], sum(s["t_end"] - s["t_start"] for s in st)


def _during(segments: list[dict], a: float, b: float) -> tuple[str | None, dict]:
    """The class (and its evidence) a timeline spent most of [a, b] in."""
    best, got = 0.0, (None, {})
    for s in segments or []:
        overlap = min(b, s["t_end"]) - max(a, s["t_start"])
        if overlap > best:
            best, got = overlap, (s["class"], (s.get("verdict") or {}).get("evidence") or {})
    return got


def _stalls(items: list, lines: dict) -> None:
    spans = {g: _stall_span(lines.get(g)) for g, _ in items}
    stalled = [g for g, v in items if verdict_field(v, "class") == "stalled" or (spans[g] and verdict_field(v, "class") != "idle")]
    if not stalled:
        return
    a = min((spans[g][0] for g in stalled if spans[g]), default=None)
    b = max((spans[g][1] for g in stalled if spans[g]), default=None)
    state = {}
    for g, v in items:
        if g in stalled:
            continue
        cls, ev = _during(lines[g], a, b) if g in lines and a is not None else (verdict_field(v, "class"), verdict_field(v, "evidence"))
        state[g] = (cls, ev)
    gone = {g for g, (_, ev) in state.items()
            if ev.get("processes_on_gpu") is not None and ev["processes_on_gpu"] < 0.5}  # no process on it
    left = [g for g, (cls, _) in state.items() if cls == "idle" and g in gone]
    idle = [g for g, (cls, _) in state.items() if cls in ("idle", "host-bound", "input-starved") and g not in left]
    for g, v in items:
        ev = verdict_field(v, "evidence")
        job = verdict_field(v, "job")
        if g in stalled and "waiting" not in job:
            job.update({"waiting": stalled, "left": left, "idle": idle, "basis": "run" if lines else "node"})
            ev.update({"job_gpus_waiting": len(stalled), "job_gpus_left": len(left), "job_gpus_idle": len(idle),
                       "stalled_for_s": spans[g][2] if spans[g] else _stalled_for(v)})
            if spans[g]:
                ev["stalled_since_s"] = spans[g][0]
            sub = "collective" if len(stalled) > 1 or left or idle else verdict_field(v, "subclass")
            for seg in lines.get(g) or []:  # the timeline says it too
                if seg.get("class") == "stalled" and sub:
                    seg["subclass"] = seg["verdict"]["subclass"] = sub
                    seg["verdict"]["advice"] = ADVICE[sub]
            if verdict_field(v, "class") == "stalled":
                set_verdict(v, subclass=sub, evidence_text=describe_stall(sub, ev, job), advice=ADVICE[sub])
            else:  # a run that stalled after its work: the stall is said first, in the stalled segment's numbers
                st = max((x for x in lines.get(g) or [] if x.get("class") == "stalled"),
                         key=lambda x: x["t_end"] - x["t_start"])
                sev = dict((st.get("verdict") or {}).get("evidence") or {}, stalled_for_s=ev["stalled_for_s"])
                verdict_field(v, "notes").insert(0, f"stalled for {ev['stalled_for_s']:.0f} s from "
                                           f"{ev['stalled_since_s']:.1f} s: " + describe_stall(sub, sev, job))
                if isinstance(v, dict) and "stalled" not in v.setdefault("mixed", []):
                    v["mixed"].insert(0, "stalled")
        elif g in left + idle and "stalled" not in job:
            job["stalled"] = stalled
            how = "left the job (no process on it any more)" if g in left else "ran nothing"
            verdict_field(v, "notes").insert(0, f"this GPU {how} while {_gpus(stalled)} waited in a collective: "
                                       "the stall is likely its doing")


def _busiest(ev: dict) -> tuple[str, float]:
    units = {k[:-4]: ev.get(k) or 0.0 for k in ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "dram_bw_pct")}
    name = max(units, key=units.get)
    return name, units[name]


def _stragglers(items: list, basis: str) -> None:
    waiters = [(g, v) for g, v in items if verdict_field(v, "class") == "comms-bound" and verdict_field(v, "subclass")
               in ("collectives", "straggler")]
    busy = [(g, v) for g, v in items if verdict_field(v, "class") in ("compute-bound", "memory-bound", "throttled")]
    host = [(g, v) for g, v in items if verdict_field(v, "class") in HOST_CLASSES]
    if waiters and not busy and host and len(host) <= len(waiters):
        _host_stragglers(waiters, host, basis)
        return
    if not waiters or not busy or len(busy) > len(waiters):
        return
    wev = [verdict_field(v, "evidence") for _, v in waiters]
    ratio_w = [r for e in wev if (r := e.get("sm_clock_ratio")) is not None]
    for g, v in busy:
        ev, job = verdict_field(v, "evidence"), verdict_field(v, "job")
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
            _name_straggler(g, v, waiters, why, nums, basis, COMMS_ADVICE["straggler"])


def _name_straggler(g, v, waiters: list, why: list[str], nums: dict, basis: str, advice: str, **job_facts) -> None:
    """GPU ``g`` (verdict ``v``) is the straggler ``waiters`` wait for, ``why``: said on its verdict and theirs."""
    waiting = [w for w, _ in waiters]
    verdict_field(v, "job").update({"straggler": g, "why": why, "waiting": waiting, "basis": basis, **job_facts})
    verdict_field(v, "evidence").update(nums)
    who = "the straggler of its job" if basis == "run" else "likely a straggler (if of their job)"
    set_verdict(v, evidence_text=verdict_field(v, "evidence_text") + f"; {who}: {_gpus(waiting)} wait in collectives ({'; '.join(why)})")
    for w, wv in waiters:
        wjob = verdict_field(wv, "job")
        if g in wjob.setdefault("waits_for", []):
            continue
        wjob["waits_for"].append(g)
        verdict_field(wv, "evidence").update(nums)
        set_verdict(wv, subclass="straggler", advice=advice,
             evidence_text=verdict_field(wv, "evidence_text") + f"; it waits for {_gpus([g])}, the straggler ({'; '.join(why)})")


HOST_CLASSES = ("input-starved", "host-bound")


def _host_stragglers(waiters: list, host: list, basis: str) -> None:
    """GPUs that wait in collectives for one whose own process keeps it idle (its data pipeline or its Python loop
    is slower): that GPU is the straggler, slowed by its host, not by its GPU."""
    wev = [verdict_field(v, "evidence") for _, v in waiters]
    theirs = sum((e.get("util_gpu_pct") or 0.0) for e in wev) / len(wev)
    for g, v in host:
        mine = verdict_field(v, "evidence").get("util_gpu_pct")
        if "why" in verdict_field(v, "job") or mine is None or mine >= theirs:
            continue
        why = [f"its host: kernels active {mine:.0f}% vs {theirs:.0f}% on the others, its GPU waits for its "
               f"process ({verdict_field(v, 'class')})"]
        _name_straggler(g, v, waiters, why, {"straggler_util_pct": mine, "waiters_util_pct": theirs}, basis,
                        STRAGGLER_HOST_ADVICE, slowed_by="host")


def _mean_clock(evs: list[dict]) -> float:
    c = [e["sm_clock_mhz"] for e in evs if e.get("sm_clock_mhz") is not None]
    return sum(c) / len(c) if c else 0.0
