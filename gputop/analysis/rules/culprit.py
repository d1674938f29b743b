"""culprit (issue 36): the GPU of a job whose rank is not where its stalled peers wait — the one holding the job up.

A job-level class: no window of one GPU shows it (the culprit's GPU may be idle, busy on its host, or even at work:
what makes it the culprit is that its peers are stalled in a collective it is not in). :func:`blame` is called by
``gputop/analysis/collectives.py``'s ``judge_job`` once it has found a stalled collective (``rules/stalled.py``) and
which of the job's other GPUs were not in it while it lasted: the verdict of each such GPU becomes "culprit", its own
class moves first into ``mixed`` and its work before is kept in the notes (a rank that computed for 7 s and then
slept for 31 s while its peer waited read "compute-bound (fp32) 0.94" from its first seconds: the one GPU whose
verdict said nothing about the hang).

Subclasses:

* ``left``: no process on the GPU any more while its peers wait: the rank exited or crashed (a job whose ranks stop
  on their own clocks leaves the last ones waiting at exit);
* ``outside``: its process is alive but runs nothing in the collective: idle, busy on its host, waiting on I/O;
* ``mismatch``: its rank is in another collective than its peers (read from the ranks' stacks:
  gputop/analysis/rank_stacks.py), a mismatched order or a skipped call.

Where the ranks' stacks were read (gputop/session/stacks.py, while the job is stalled), the sentence says where the
culprit's rank is ("in work at train.py:16 (`time.sleep(60)`)"); the job's record is ``job["culprit"]``.

On a node's GPUs (the TUI, ``--export``: ``basis`` "node") a GPU with no process may be no rank of the job at all: it
is blamed only on a run's GPUs (the command's own) or where its process is of the job's process group.
"""

from __future__ import annotations

from gputop.analysis.evidence import Key, declare
from gputop.analysis.rules.base import MULTI2, MULTI4, TRACES, Example, Rule, Score
from gputop.analysis.rules.stalled import gpu_names
from gputop.analysis.verdict import Verdict
from gputop.analysis.vocabulary import Cls, Sub

# A job's ranks finish a second or two apart: at the end of comms_mlp on 2 H100s GPU 1 read stalled for 1.2 s (and
# held_alltoall_moe's 1.3 s) while rank 0 had already left its loop. A stall that short is the job's teardown, not a
# hang: nobody is blamed under 5 s of stall. The hangs of the corpora stalled 24-27 s before their traces ended.
CULPRIT_MIN_STALL_S = 5.0

EVIDENCE = declare(
    Key("culprit_waiters", "count", "GPUs of the job stalled in the collective this GPU's rank is not in"),
    Key("culprit_stall_s", "s", "how long they had waited when judged"),
)

# what the GPU did while its peers waited, for people
DOING = {Cls.IDLE: "ran nothing", Cls.HOST_BOUND: "sat idle while its process kept a CPU core busy",
         Cls.INPUT_STARVED: "ran only short bursts", Cls.COMPUTE_BOUND: "kept computing on its own",
         Cls.MEMORY_BOUND: "kept working on its own", Cls.LATENCY_BOUND: "ran small kernels of its own"}


def score(ev: dict, hints: dict) -> Score:
    """A job-level class: one GPU's window never shows it (module doc)."""
    return Score(0.0)


def describe(sub, ev: dict, job: dict | None = None) -> str:
    """The evidence sentence of a culprit's verdict, with where its rank is where the stacks say it."""
    job = job or {}
    waiting = gpu_names(job.get("stalled") or [])
    verb = "waits" if len(job.get("stalled") or []) == 1 else "wait"
    for_s = f" for {ev['culprit_stall_s']:.0f} s" if ev.get("culprit_stall_s") is not None else ""
    node = " (if of their job)" if job.get("basis") == "node" else ""
    if sub == Sub.LEFT:
        text = (f"its rank left the job{node}: no process on this GPU any more while {waiting} wait in a "
                f"collective{for_s}")
    elif sub == Sub.MISMATCH:
        text = f"its rank is in another collective than the one {waiting} {verb} in{for_s}"
    else:
        doing = DOING.get(job.get("was"), "did other work")
        text = f"its rank is not in the collective {waiting} {verb} in{for_s}{node}: this GPU {doing}"
    place = (job.get("culprit") or {}).get("where")
    if place:
        text += f"; {place}"
    return text


ADVICE = {
    None: "this GPU's rank is not in the collective its peers wait in, so they wait until NCCL's timeout (30 min by "
          "default): find what the rank does instead (gputop reads every rank's stack while the job is stalled: the "
          "document's job.culprit, the TUI's stack view; or py-spy dump --pid PID). Common causes: work only one rank "
          "does outside a barrier (logging, checkpointing, evaluation on rank 0), a data-dependent branch that skips a "
          "collective on some ranks, a dataloader stall on one rank",
    Sub.LEFT: "this GPU's rank exited while its peers wait in a collective: if it crashed, its log and exit code say "
              "why; if it finished, the ranks decide to stop on their own clocks (a time limit, an epoch end, early "
              "stopping judged per rank): decide on one rank and broadcast the decision so that all stop together",
    Sub.MISMATCH: "the ranks call collectives in a different order (or one skips a call): make every rank call the "
                  "same collectives in the same order with the same sizes; PyTorch's flight recorder "
                  "(TORCH_NCCL_TRACE_BUFFER_SIZE, python -m torch.distributed.flight_recorder.fr_trace) names the "
                  "first collective where they differ",
}


def blame(v: Verdict, stalled: list[int], was: Cls, gone: bool, basis: str, stall_s: float | None,
          confidence: float | None, culprit: dict | None = None) -> None:
    """Make ``v`` (a GPU of the job that was not in the stall: ``was`` its class while the stall lasted, ``gone`` no
    process on it) the culprit's verdict, in place: its class moves into ``mixed``, its sentence says what it did."""
    sub = Sub.MISMATCH if (culprit or {}).get("kind") == "mismatch" else (Sub.LEFT if gone else Sub.OUTSIDE)
    before = v.display_name()
    if v.cls not in v.mixed:
        v.mixed.insert(0, v.cls)
    if v.t_start is not None and v.t_end is not None:
        v.notes.insert(0, f"before and beside the stall this GPU read {before} over {v.t_end - v.t_start:.0f} s")
    v.job.update({"stalled": list(stalled), "basis": basis, "was": was})
    if culprit:
        v.job["culprit"] = culprit
    v.evidence.update({"culprit_waiters": len(stalled), "culprit_stall_s": stall_s})
    v.cls, v.subclass = Cls.CULPRIT, sub
    v.confidence = confidence
    v.evidence_text = describe(sub, v.evidence, v.job)
    v.advice = ADVICE.get(sub) or ADVICE[None]


EXAMPLES = (
    Example(MULTI4 + "hang_exit.jsonl.gz", 1, 0, 0, True, "rank 1 exits while ranks 0, 2, 3 wait in an all-reduce",
            sub=Sub.LEFT, judged="run"),
    Example(MULTI2 + "hang_exit.jsonl.gz", 1, 0, 0, True, "rank 1 exits while rank 0 waits in an all-reduce",
            sub=Sub.LEFT, judged="run"),
    Example(MULTI4 + "hang_idle.jsonl.gz", 3, 0, 0, True, "rank 3 leaves the loop and sleeps while the others wait",
            sub=Sub.OUTSIDE, judged="run"),
    Example(MULTI4 + "hang_idle.jsonl.gz", 0, 0, 0, False, "a rank that waits in the stuck collective is stalled",
            judged="run"),
    Example(MULTI4 + "straggler.jsonl.gz", 0, 0, 0, False, "a straggler slows its job but nobody is stalled",
            judged="run"),
    # the culprit corpora (bench/gpu/culprit_corpus_gpu.sh, 2026-11-27): the ranks' stacks and flight recorder
    # dumps recorded, judged again on replay
    Example(TRACES + "culprit_h100x4/size.jsonl.gz", 3, 0, 0, True, "rank 3 all-reduces other sizes than ranks "
            "0-2: the stacks name it, its dump says what it called", sub=Sub.MISMATCH, judged="run"),
    Example(TRACES + "culprit_h100x2/op.jsonl.gz", 1, 0, 0, True, "rank 1 broadcasts where rank 0 all-reduces: two "
            "ranks that differ (the dumps' tie), the stacks name rank 1", sub=Sub.MISMATCH, judged="run"),
    Example(TRACES + "culprit_h100x2/nojoin.jsonl.gz", 1, 0, 0, True, "rank 1 never joins: its peer waits in DDP's "
            "set-up, no GPU stalled", sub=Sub.OUTSIDE, judged="run"),
    Example(TRACES + "culprit_h100x2/sleep.jsonl.gz", 0, 0, 0, False, "rank 0 waits for the sleeping rank 1: "
            "stalled, not the culprit (a healthy job on GPUs 2-3 of the node beside it)", judged="run"),
)

RULE = Rule(Cls.CULPRIT, score, describe, ADVICE, EVIDENCE, EXAMPLES, job_level=True)
