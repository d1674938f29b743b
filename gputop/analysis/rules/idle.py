"""idle: the GPU did no work. Subclass "waiting": the watched process holds a CUDA context on it but uses little
CPU (it sleeps, waits on I/O or a lock); "startup": the command had not reached the GPU yet (a run's timeline,
gputop/analysis/timeline.py). Damped by PCIe copies and by host-bound in the arbitration table.
"""

from __future__ import annotations

from gputop.analysis.rules import host_bound
from gputop.analysis.rules.base import MULTI2, TRACES, Example, Rule, Score, has_gpm, pct_text as _p, ramp
from gputop.analysis.rules.input_starved import feeder
from gputop.analysis.vocabulary import Cls, Sub

# NVML's kernel duty cycle (util_gpu_pct) reads 0 on an idle GPU; a few % is background (the display
# driver, another process's occasional kernel). Above 5% something is running.
IDLE_UTIL_PCT = (1.0, 5.0)
# GPM SM activity of an idle GPU is 0.0x%; above 2% kernels are doing work.
IDLE_SM_ACTIVE_PCT = (0.5, 2.0)


def score(ev: dict, hints: dict) -> Score:
    util = ev.get("util_gpu_pct")
    idle = 1 - ramp(util, IDLE_UTIL_PCT)
    if has_gpm(ev):
        idle *= 1 - ramp(ev.get("sm_active_pct"), IDLE_SM_ACTIVE_PCT)
    held = host_bound.holder(ev, hints)
    waiting = bool(held and held["context"] and ev.get("feeder_cpu_pct") is not None and held["cpu_busy"] < 0.5)
    return Score(idle if util is not None or has_gpm(ev) else 0.0, Sub.WAITING if waiting else None)


def describe(sub, ev: dict) -> str:
    if sub == Sub.STARTUP:
        return "the command had not created a CUDA context on this GPU yet"
    text = f"kernels active {_p(ev.get('util_gpu_pct'))}"
    if has_gpm(ev):
        text += f", SMs {_p(ev.get('sm_active_pct'))} busy"
    if ev.get("feeder_cpu_pct") is not None:
        text += f", process tree CPU {_p(ev['feeder_cpu_pct'])}"
    if sub == Sub.WAITING:
        text += " while it holds a CUDA context: it waits (sleep, I/O, a lock), not computing on the CPU"
    return text


ADVICE = {
    None:
        "the GPU did no work: if it should, check the code runs on cuda (tensor.device) and on this GPU "
        "(CUDA_VISIBLE_DEVICES)",
    Sub.WAITING:
        "the process holds the GPU but waits (sleep, I/O, a lock, another process): check what it waits on "
        "(py-spy dump, strace); the GPU itself is not the problem",
    Sub.STARTUP: "nothing to do: the command was starting (imports, CUDA initialisation)",
}


def notes(ev: dict, board, main) -> list[str]:
    cpu, kind = feeder(ev)
    if main == Cls.IDLE and cpu >= 0.5 and kind == "process":
        return [f"the process tree was busy on the CPU ({_p(ev['feeder_cpu_pct'])}) while the GPU did nothing: "
                "if it was preparing GPU input, the GPU is starved"]
    return []


EXAMPLES = (
    Example(TRACES + "idle.idle.jsonl.gz", 0, 0.0, 4.0, True, "an idle GPU: next to no kernel, the SMs at 0%"),
    Example(TRACES + "idle.idle.jsonl.gz", 0, 4.0, 8.0, True,
            "the watched process holds a CUDA context and sleeps: idle, waiting", Sub.WAITING),
    Example(MULTI2 + "hang_idle.jsonl.gz", 1, 24.0, 28.0, True, "a rank whose process runs nothing (its peer hangs)"),
    Example(TRACES + "matmul_bf16.compute-bound.jsonl.gz", 0, 4.0, 8.0, False, "a bf16 matmul loop"),
    Example(TRACES + "dataloader_starved.input-starved.jsonl.gz", 0, 4.0, 8.0, False,
            "the GPU nearly idle while its process keeps a core busy: host-bound (the table damps idle)"),
    Example(TRACES + "pageable_h2d.pcie-bound.jsonl.gz", 0, 4.0, 8.0, False,
            "copies with no kernel running: NVML's duty cycle low, yet the GPU copies (the table damps idle)"),
)

RULE = Rule(Cls.IDLE, score, describe, ADVICE, examples=EXAMPLES, notes=notes, per_sample=True)
