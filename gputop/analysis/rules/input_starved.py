"""input-starved: the GPU idle between bursts while the feeding process tree is busy on the CPU (or, with
recurring bursts, waits on I/O or sleeps: a lower score), or a workload that reports waiting for its data.

Its score's part "bursts" is damped by launch-bound's launches and PCIe copies in the arbitration table; the part
"report" (a workload's own ``data_wait_fraction``, a hint) is not: :func:`settle` takes the higher. Without the
watched process's CPU% the busiest host core stands in (``NO_FEEDER_CONFIDENCE``). :func:`feeder` (how busy
the feeder is on the CPU, and which evidence says so) is PCIe's test of "pageable" and idle's note too.
References: [HTA] Holistic Trace Analysis / PyTorch profiler recommendations: GPU utilisation below 50% is "low";
time in the DataLoader above 5% of the step means the input pipeline is a bottleneck. [DECK] the seed deck "GPU
workload design": num_workers and pin_memory for starvation.
"""

from __future__ import annotations

from gputop.analysis.evidence import Key, declare, number
from gputop.analysis.rules.base import TRACES, Example, Rule, Score, has_gpm, pct_text as _p, ramp
from gputop.analysis.rules.host_bound import host_detail
from gputop.analysis.vocabulary import Cls

# The GPU is under-used: kernel duty cycle below 50% is "low" [HTA]; at 30% it clearly is.
STARVED_UTIL_PCT = (40.0, 80.0)
# The feeding process tree is busy on the CPU: CPU% is per core (100 = one core), summed over the
# process and its children. A DataLoader with num_workers=0 and a heavy transform reads ~100%.
FEEDER_CPU_PCT = (30.0, 70.0)
# A feeder that is not busy on the CPU (blocked on disk or network I/O, a sleep, a lock) still starves
# the GPU when the GPU works in recurring bursts (at least 2 separate runs of busy samples in the
# window) with idle time between them; that scores at most this (below a busy feeder's 1.0).
IDLE_FEEDER_SCORE = 0.6
MIN_RECURRING_BURSTS = 2
# Without a watched process, the busiest host core is a weak stand-in (some process is CPU-bound).
HOST_CORE_BUSY_PCT = (70.0, 95.0)
# A workload's own report: time waiting for data above 5% of the step is a bottleneck [HTA]; at 15%
# it is the main one.
DATA_WAIT_FRACTION = (0.05, 0.15)
# Input-starved judged without the feeding process's CPU%, only from the busiest host core.
NO_FEEDER_CONFIDENCE = 0.7

EVIDENCE = declare(Key("data_wait_fraction", "fraction", "the workload's own report: time waiting for data per step"))


def measure(samples: list[dict], peaks: dict, hints: dict) -> dict:
    dwf = number(hints.get("data_wait_fraction"))
    return {"data_wait_fraction": dwf} if dwf is not None else {}


def feeder(ev: dict) -> tuple[float, str | None]:
    """(0..1 how busy the feeder is on the CPU, whose CPU says so): the watched process tree's ("process"), else
    the busiest host core's ("host"), else (0, None)."""
    if ev.get("feeder_cpu_pct") is not None:
        return ramp(ev["feeder_cpu_pct"], FEEDER_CPU_PCT), "process"
    if ev.get("host_busiest_core_pct") is not None:
        return ramp(ev["host_busiest_core_pct"], HOST_CORE_BUSY_PCT), "host"
    return 0.0, None


def score(ev: dict, hints: dict) -> Score:
    starved = 1 - ramp(ev.get("util_gpu_pct"), STARVED_UTIL_PCT)
    cpu, kind = feeder(ev)
    # The GPU works in bursts and waits between them. With the feeder busy on the CPU any work in the
    # window counts; with the feeder idle (waiting on I/O, a sleep, a lock) the bursts must recur.
    active = (ev.get("busy_sample_pct") or 0) > 0
    recurring = (ev.get("bursts") or 0) >= MIN_RECURRING_BURSTS
    fed = max(cpu, IDLE_FEEDER_SCORE if recurring else 0.0) if active else 0.0
    parts = {"bursts": starved * fed}
    facts = {"feeder": kind, "feeder_idle": active and recurring and cpu < IDLE_FEEDER_SCORE, "reported": False}
    if ev.get("data_wait_fraction") is not None:
        parts["report"] = ramp(ev["data_wait_fraction"], DATA_WAIT_FRACTION)
        facts["reported"] = parts["report"] > 0
    return Score(max(parts.values()), parts=parts, facts=facts)


def settle(parts: dict, own: Score) -> tuple[float, None]:
    return (max(parts["bursts"], parts["report"]) if "report" in parts else parts["bursts"]), None


def trust(ev: dict, own: Score) -> float:
    return NO_FEEDER_CONFIDENCE if own.facts["feeder"] != "process" and not own.facts["reported"] else 1.0


def describe(sub, ev: dict) -> str:
    sm = f" (SMs {_p(ev.get('sm_active_pct'))})" if has_gpm(ev) else ""
    cpu = (f"the process tree used {_p(ev['feeder_cpu_pct'])} CPU" if ev.get("feeder_cpu_pct") is not None
           else f"the busiest CPU core was {_p(ev.get('host_busiest_core_pct'))} busy")
    text = (f"kernels active {_p(ev.get('util_gpu_pct'))}{sm}, GPU busy in "
            f"{_p(ev.get('busy_sample_pct'))} of samples ({ev.get('bursts', 0):.0f} bursts), while {cpu}")
    if ev.get("data_wait_fraction") is not None:
        text += f"; the workload waited for data {_p(100 * ev['data_wait_fraction'])} of the step"
    return text


ADVICE = {
    None:
        "the GPU waits for its input: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
        "prefetch_factor), move preprocessing to the GPU, cache decoded data; if the busy CPU time is the "
        "training loop itself (Python and kernel launches, no data work), use a larger batch, CUDA graphs or "
        "torch.compile instead",
}


def missing(ev: dict, board) -> list[str]:
    own = board.own_score(Cls.INPUT_STARVED)
    if (own.facts["feeder"] != "process" and (1 - ramp(ev.get("util_gpu_pct"), STARVED_UTIL_PCT)) >= 0.5
            and not own.facts["reported"]):
        return ["CPU% of the command's process tree (no process watched): input starvation judged "
                + ("from the busiest host core" if own.facts["feeder"] == "host" else "without CPU evidence")]
    return []


def notes(ev: dict, board, main) -> list[str]:
    """What told input-starved from launch-bound (they share a GPU that is not busy)."""
    if main != Cls.INPUT_STARVED:
        return []
    ratio, busy = ev.get("sm_active_per_util"), ev.get("busy_sample_pct")
    fill = f", the kernels filled the SMs ({_p(100 * ratio)} of their time)" if ratio is not None else ""
    return [f"decided by: the GPU idled between {ev.get('bursts', 0):.0f} bursts (busy in {_p(busy)} of the "
            f"samples){fill}{host_detail(ev)}: it waits for input, not on launches (launch-bound scored "
            f"{board.scores.get(Cls.LATENCY_BOUND, 0):.2f})"]


def footnotes(ev: dict, board, main) -> list[str]:
    if main == Cls.INPUT_STARVED and board.own_score(Cls.INPUT_STARVED).facts["feeder_idle"]:
        return ["the feeding process was not busy on the CPU: it waited on I/O, a sleep, a lock or another "
                "process between the GPU's bursts"]
    return []


EXAMPLES = (
    Example(TRACES + "wl_dataloader_h200.jsonl.gz", 0, 16.0, 20.0, True,
            "the dataloader lesson: bursts of work between waits for data, its process tree busy"),
    Example(TRACES + "wl_batchsize_h200.jsonl.gz", 0, 8.0, 12.0, True, "small batches fed by a busy process"),
    Example(TRACES + "corpus_h200_hf_gpt2_generate.jsonl.gz", 0, 20.0, 24.0, False,
            "decoding: kernels in every sample, no gap: launch-bound (the table damps input-starved)"),
    Example(TRACES + "dataloader_starved.input-starved.jsonl.gz", 0, 4.0, 8.0, False,
            "the GPU idle nearly all the time while its process is at a core: host-bound"),
)

RULE = Rule(Cls.INPUT_STARVED, score, describe, ADVICE, EVIDENCE, EXAMPLES, measure=measure, settle=settle,
            notes=notes, footnotes=footnotes, missing=missing, trust=trust)
