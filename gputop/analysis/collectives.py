"""The GPUs of one job looked at together: a stalled collective, and a straggler.

Pure (no NVML). Two parts:

* **stalled** (a class of its own): NCCL's kernels wait for a peer that never comes. Kernels resident all the
  time (duty cycle 100%), a fixed few SMs busy (one a channel: 24 of an H100's 132 read 18.2%), no pipe, no DRAM,
  no NVLink, no PCIe traffic, power low (and flat, once the first second's decay from the busy level is over).
  :func:`score_stall` scores that fingerprint for one GPU's window
  (the classifier); :func:`judge_job` then looks at the job's other GPUs: which wait in the same stall, which
  left (no process on the GPU any more) or idle (a process that runs nothing), for how long.
  Its own class, not a comms-bound subclass: a stall is no bottleneck (nothing moves, the job makes no
  progress: a fault), an alert fires on ``gputop_bottleneck{class="stalled"} == 1`` alone, the TUI strip shows it
  apart from slow communication, and a run's time by class does not count a hang as communication time.
* **straggler**: when some GPUs of a job wait in collectives (comms-bound "collectives") while a few others work
  (compute- or memory-bound, or throttled), the busy ones are the stragglers; :func:`judge_job` names them and
  says why they are slow: more work (their pipes or DRAM busier than the waiters') or throttled (a lower SM clock
  than the waiters', thermal or power reasons).
"""

from __future__ import annotations

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import number
from gputop.analysis.verdict import Verdict
from gputop.format import si

ADVICE = {
    None: "a kernel has been resident doing nothing: it waits for something that does not come (a collective "
          "whose peers are gone or busy elsewhere, a spin on a flag). py-spy dump --pid PID shows where the "
          "process waits; see the collective advice if it is a distributed job",
    "collective": "a collective is stuck: the GPUs that wait will wait until NCCL's timeout (30 min by default). "
                  "Find the rank that left or never came: PyTorch's flight recorder "
                  "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1, then "
                  "python -m torch.distributed.flight_recorder.fr_trace) lists each rank's last collectives; "
                  "NCCL_DEBUG=INFO logs them. Common causes: ranks that decide to stop on their own clock (a "
                  "time limit, an epoch end or early stopping judged per rank: decide on rank 0 and broadcast), a "
                  "rank that crashed or exits early, data-dependent branches that skip a collective on some ranks",
    "straggler_host": "this GPU waits in every collective for a GPU whose own process is slower (its data pipeline "
                      "or Python loop keeps it idle): give that rank's input pipeline more DataLoader workers, move "
                      "its preprocessing to the GPU or cache it, and look for work only that rank does (logging, "
                      "evaluation, checkpointing on rank 0)",
    "straggler": "this GPU waits for a slower one (the straggler) in every collective: balance the work across "
                 "ranks (equal batch and sequence lengths, the same model shard sizes), and check the straggler's "
                 "clocks, temperature and power limit",
}


PIPES = ("tensor_pct", "fp32_pct", "fp64_pct", "fp16_pct", "int_pct", "dfma_pct", "hmma_pct", "imma_pct")


def _median(xs: list) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def stall_evidence(samples: list[dict], peaks: dict | None = None) -> dict:
    """The window's numbers the stall fingerprint needs: the medians of its samples' duty cycle, SM activity,
    busiest pipe, DRAM, NVLink and PCIe traffic (PCIe bytes that land in memory: no more than DRAM moves; medians: the window where a stall begins still holds the last
    samples of the work before it), the power it settled at (the median of the window's second half) and whether
    it is falling (the first seconds of a stall decay from the busy level; then it is flat to 0.1%), and how many
    processes the GPU's last process list held (None: no list in the window)."""
    def med(key):
        return _median([number(s.get(key)) for s in samples])

    def flow(s, a, b):
        v = [x for x in (number(s.get(a)), number(s.get(b))) if x is not None]
        return max(v) if v else None

    watts = [p for s in samples if (p := number(s.get("power_w"))) is not None]
    power = watts[len(watts) // 2:]  # the level it settled at: the first seconds of a stall decay from busy
    lists = [s["processes"] for s in samples if isinstance(s.get("processes"), list)]
    pipes = [max((number(s.get(k)) for k in PIPES if number(s.get(k)) is not None), default=None) for s in samples]
    pcie_peak = number((peaks or {}).get("pcie_bytes_per_s_per_dir"))
    dram_peak = number((peaks or {}).get("dram_bytes_per_s"))

    def landed(s):  # PCIe bytes a second that reach the GPU's memory (or leave it): at most DRAM's traffic
        bps, dram = flow(s, "pcie_rx_bps", "pcie_tx_bps"), number(s.get("dram_bw_pct"))
        return min(bps, dram / 100.0 * dram_peak) if bps is not None and dram is not None and dram_peak else bps

    # a kernel that spins on a flag in host memory (NCCL's proxy, a point-to-point receive) reads it over PCIe
    # again and again, gigabytes a second that are never stored: polling, not a transfer
    pcie = _median([landed(s) for s in samples])

    return {"processes_on_gpu": len(lists[-1]) if lists else None,
            "stall_util_median_pct": med("util_gpu_pct"), "stall_sm_median_pct": med("sm_active_pct"),
            "stall_pipe_median_pct": _median(pipes), "stall_dram_median_pct": med("dram_bw_pct"),
            "stall_nvlink_median_bps": _median([flow(s, "nvlink_rx_bps", "nvlink_tx_bps") for s in samples]),
            "stall_pcie_median_fraction": pcie / pcie_peak if pcie is not None and pcie_peak else None,
            "stall_power_median_w": _median(power),
            "stall_power_falling": (1.0 if watts and watts[-1] <= T.STALL_POWER_FALLING * max(watts) else 0.0)
            if watts else None}


def score_stall(ev: dict, ramp) -> float:
    """0..1: the window looks like a kernel that waits and does nothing (module doc), on the medians of its
    samples (:func:`stall_evidence`). Needs GPM (SM activity and the pipes); a window with real work, memory or
    link traffic in most of its samples scores 0."""
    util, sm, pipe = ev.get("stall_util_median_pct"), ev.get("stall_sm_median_pct"), ev.get("stall_pipe_median_pct")
    if sm is None or pipe is None or util is None:
        return 0.0
    limit = ev.get("power_limit_w")
    power = ev["stall_power_median_w"] / limit if ev.get("stall_power_median_w") is not None and limit else None
    low = 1.0 if ev.get("stall_power_falling") else 1 - ramp(power, T.STALL_POWER_FRACTION)  # low, or on its way down
    return (ramp(util, T.STALL_UTIL_PCT)
            * ramp(sm, T.STALL_SM_ACTIVE_PCT[0]) * (1 - ramp(sm, T.STALL_SM_ACTIVE_PCT[1]))
            * (1 - ramp(pipe, T.STALL_PIPE_PCT))
            * (1 - ramp(ev.get("stall_dram_median_pct"), T.STALL_DRAM_PCT))
            * (1 - ramp(ev.get("stall_nvlink_median_bps"), T.STALL_LINK_BYTES_PER_S))
            * (1 - ramp(ev.get("stall_pcie_median_fraction"), T.STALL_PCIE_FRACTION))
            * low)


def describe_stall(sub: str | None, ev: dict, job: dict | None = None) -> str:
    """The evidence sentence of a stalled GPU (with the job's story where :func:`judge_job` added it)."""
    nvlink = max((v for v in (ev.get("nvlink_rx_bps"), ev.get("nvlink_tx_bps")) if v is not None), default=None)
    text = (f"kernels active {ev.get('util_gpu_pct') or 0:.0f}%, SMs {ev.get('sm_active_pct') or 0:.1f}% busy, "
            f"no pipe at work, DRAM {ev.get('dram_bw_pct') or 0:.2f}%, NVLink {si(nvlink or 0, 'B/s')}, "
            f"PCIe {si(max(ev.get('pcie_rx_bps') or 0, ev.get('pcie_tx_bps') or 0), 'B/s')}, power low "
            f"({ev.get('power_w') or 0:.0f} W): a kernel waits and nothing moves")
    if sub == "collective":
        text = "a collective is stuck: " + text
    job = job or {}
    waiting, left, idle = job.get("waiting"), job.get("left"), job.get("idle")
    if waiting:
        text += f"; {_gpus(waiting)} wait in it"
        if ev.get("stalled_for_s") is not None:
            text += f" for {ev['stalled_for_s']:.0f} s"
    node = job.get("basis") == "node"  # the node's GPUs, not a run's: an idle GPU may be another job's or none
    if left:
        text += f"; {_gpus(left)} " + ("has no process (left the job, or not of it)" if node
                                       else "left (no process on it any more)")
    if idle:
        text += f"; {_gpus(idle)} idle (" + ("if of this job: " if node else "") + "its process runs nothing)"
    return text


def _gpus(xs) -> str:
    """'GPU0, GPU2' (as nvidia-smi topo names them; a GPU's index is a name, not a measured number)."""
    return ", ".join(f"GPU{x}" for x in xs)


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
        if pct >= T.STRAGGLER_WORK_RATIO * theirs + T.STRAGGLER_WORK_MARGIN_PCT:
            why.append(f"more work: its {name} {pct:.0f}% busy vs {theirs:.0f}% on the others")
            nums.update({"straggler_busiest_pct": pct, "waiters_busiest_pct": theirs})
        mine = ev.get("sm_clock_ratio")
        thermal = (ev.get("thermal_sample_fraction") or 0) > T.THERMAL_SAMPLE_FRACTION[0]
        # a lower clock at the power cap is what more work does to a GPU; alone, or with heat, it is the cause
        if (ratio_w and mine is not None and mine <= T.STRAGGLER_CLOCK_RATIO * (sum(ratio_w) / len(ratio_w))
                and (thermal or not why)):
            why.append(f"throttled: SM clock {ev.get('sm_clock_mhz') or 0:.0f} MHz vs {_mean_clock(wev):.0f} on the "
                       "others" + (" (thermal)" if thermal else ""))
            nums.update({"straggler_sm_clock_mhz": ev.get("sm_clock_mhz"), "waiters_sm_clock_mhz": _mean_clock(wev)})
        if why:
            _name_straggler(g, v, waiters, why, nums, basis, ADVICE["straggler"])


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
                        ADVICE["straggler_host"], slowed_by="host")


def _mean_clock(evs: list[dict]) -> float:
    c = [e["sm_clock_mhz"] for e in evs if e.get("sm_clock_mhz") is not None]
    return sum(c) / len(c) if c else 0.0
