"""Each job's GPU-hours by class over a range, and the GPU-hours a fix would win back, read from Prometheus.

:func:`account` asks (its queries ``PARALLEL`` at a time: Prometheus evaluates a query on one core):

* everything below but dcgm-exporter's GPUs with subqueries at the range's step (the range cut in ``PARALLEL``
  slices, each asked for apart: Prometheus evaluates a query on one core); the exported verdicts summed by job
  and class (``count_over_time(gputop_verdict_confidence[range:step])``: one series per GPU, where
  ``gputop_bottleneck`` has one per class; every verdict of ``gputop --export`` has a confidence) and by subclass
  (``gputop_bottleneck{subclass!=""}``: only the current class carries one);
* what a fix would win back of those (``analysis/cluster_winback.py``'s rules): for the waiting classes the GPU's or
  the SMs' idle share, from each GPU's verdict joined to its own ``DCGM_FI_DEV_GPU_UTIL`` or
  ``DCGM_FI_PROF_SM_ACTIVE`` (``RECOVER_GPU``, ``RECOVER_SMS``: on the GPU's labels, the reading summed by job and
  class over the range's steps; the class's steps less that sum are its idle steps: a GPU that does not export the
  reading counts as idle); for throttled GPUs their SM clock summed by job and model (``CLOCKS``), its mean against
  the model's maximum; for GPUs compute-bound on the FP32 pipe their SM activity (``FP32``), against the model's FP32
  and BF16 tensor peaks; stalled, culprit and idle hours count whole;
* the dcgm-exporter GPUs judged here window by window, at most ``ACCOUNT_JUDGE_POINTS`` samples of each over the
  range (the GPUs of the nodes that exported no verdict in the range: a node whose gputop exported at any time of it
  is counted from its verdicts alone; their nodes in ``JUDGE_SHARES`` shares, each read one mark at a time), each
  window's recoverable share from its samples. The samples fall on a grid of their step from the first accounting's
  time (the reader keeps it, in ``cache``): the accountings within one step of it (the page counts every 5 min, a
  24 h range's step is 3 h) reuse the first one's verdicts instead of reading and judging the day again.

The exported verdicts' parts (``PARTS``) come from the recording rules of ``RULES_FILE`` (group ``RULES_GROUP``:
each part's figure at one instant, by job) where they hold the range (``recorded``), summed over the range in one
query each: a few series a job instead of every GPU's series joined at every step. Where they do not, from the raw
series, the range in ``PARALLEL`` slices, and a note says so.

A query that fails (a timeout at scale) costs its own part: the rest is counted and a note says what is missing
(``account``'s third value). The sums are ``analysis/cluster_accounting.py``'s.
"""

from __future__ import annotations

import math

from gputop.analysis import cluster as C
from gputop.analysis import cluster_accounting as A
from gputop.analysis.cluster_winback import IDLE_GPU, IDLE_SMS, fp32_to_tensor, max_sm_clock
from gputop.analysis.vocabulary import Cls, Sub
from gputop.fleet import series as S
from gputop.format import count
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.errors import SourceError

RANGE_POINTS = 288  # accounting: about this many steps over the range (24 h: one every 5 min; a class lasts
# tens of minutes: docs/benchmarks.md "Cluster scale" has what 720 steps counted on the same day) ...
MIN_STEP_S, MAX_STEP_S = 1.0, 300.0
ACCOUNT_WINDOWS = 4  # ... and a dcgm-exporter GPU judged in at most this many windows over it (the classifier
# costs this process ~0.5 ms a call: 2,048 such GPUs of jobs that change through the day are ~10^4 calls) ...
ACCOUNT_JUDGE_POINTS = 8  # ... on at most this many samples (24 h: one every 3 h, 2 a window)
JUDGE_SHARES = 8  # their nodes in this many shares, each read and judged in its own thread (PARALLEL at a time): the
# last share's judging overlaps nothing of Prometheus' (8,192 GPUs over 24 h, the first accounting: 4 shares 10.3 s,
# 8 shares 9.3 s, 16 shares 10.3 s, each the median of 5; docs/benchmarks.md)
JOB_CLASS_SUB = "hpc_job, namespace, pod, class, subclass"
JOB_CLASS = "hpc_job, namespace, pod, class"
JOB_MODEL = "hpc_job, namespace, pod, modelName"
# A GPU's verdict (one series per GPU and class) joined to one of its own series (the same labels but the class:
# one series a GPU on the right, many verdicts to it where a class changed within the look-back), the raw reading
# summed over the range: arithmetic inside a subquery's join costs Prometheus several times the join, so the idle
# share is made here, from the sum and the class's steps (``_idle_hours``).
ON = "on(UUID, uuid, instance, job, gpu, hpc_job, namespace, pod)"


def _joined(selector: str, value: str) -> str:
    return f"({selector} * 0 + {ON} group_left() {value})"


RECOVER_GPU = _joined(f'gputop_verdict_confidence{{class=~"{"|".join(IDLE_GPU)}"}}', "DCGM_FI_DEV_GPU_UTIL")
RECOVER_SMS = _joined(f'gputop_verdict_confidence{{class=~"{"|".join(IDLE_SMS)}"}}', "DCGM_FI_PROF_SM_ACTIVE")
CLOCKS = _joined(f'gputop_verdict_confidence{{class="{Cls.THROTTLED}"}}', "DCGM_FI_DEV_SM_CLOCK")
FP32 = _joined(f'(gputop_bottleneck{{class="{Cls.COMPUTE_BOUND}",subclass="{Sub.FP32}"}} == 1)',
               "DCGM_FI_PROF_SM_ACTIVE")
# What the exported verdicts' accounting sums over the range's steps, each part by job: (kind, the labels it is
# summed by, what is counted (True) or summed at each step, the recording rule that holds that step's figure). The
# verdicts by class and by subclass; the readings the waiting classes' idle share and the throttled and FP32-bound
# GPUs' recoverable share are made of (by model: the clock's and the FP32 pipe's peaks are the model's).
PARTS = (("classes", JOB_CLASS_SUB, "gputop_verdict_confidence", True, "job_class:gputop_verdicts:count"),
         ("subclasses", JOB_CLASS_SUB, 'gputop_bottleneck{subclass!=""}', True, "job_class:gputop_subclasses:count"),
         ("util", JOB_CLASS, RECOVER_GPU, False, "job_class:gputop_waiting_gpu_util:sum"),
         ("sm", JOB_CLASS, RECOVER_SMS, False, "job_class:gputop_waiting_sm_active:sum"),
         ("clocks", JOB_MODEL, CLOCKS, False, "job_model:gputop_throttled_sm_clock:sum"),
         ("fp32", JOB_MODEL, FP32, False, "job_model:gputop_fp32_sm_active:sum"))
# Recording rules (docs/prometheus/gputop-rules.yml, group RULES_GROUP, once a minute) hold each part's figure at
# one instant, a few series a job: where they cover the range, the accounting sums those over its steps instead of
# joining every GPU's series at every step (the work of a 24 h accounting at 8,192 GPUs: docs/benchmarks.md
# "Cluster scale"); where they do not, it reads the raw series and says so (one line).
RULES_GROUP = "gputop-accounting-parts"
RULES_FILE = "docs/prometheus/gputop-rules.yml"
RULE_FRESH_S = 65  # a rule's figure counts at a step where it was evaluated within this long (the group's 1m
# interval), not within the look-back's 5 min: a live rule's series ends with a staleness marker, but rule blocks
# that ``promtool tsdb create-blocks-from rules`` wrote have none, and their figures would count 5 min past a
# job's end (docs/benchmarks.md, "Cluster scale at 8,192 GPUs")


def rule_expr(part: tuple) -> str:
    """A part's recording rule's expression (the rules file holds it verbatim: tests/test_cluster_rules.py)."""
    _, by, what, counted, _ = part
    return f"{'count' if counted else 'sum'} by ({by}) ({what})"


def part_query(part: tuple, window: str, recorded: bool) -> str:
    """A part summed by job over a subquery's ``window`` (``[length:step]``), from the raw series or the rule's."""
    _, by, what, counted, record = part
    if recorded:
        return f"sum by ({by}) (sum_over_time(last_over_time({record}[{RULE_FRESH_S}s]){window}))"
    return f"sum by ({by}) ({'count' if counted else 'sum'}_over_time({what}{window}))"


def range_step(range_s: float) -> float:
    """The accounting's step for a range: ``RANGE_POINTS`` steps, whole seconds, within [1 s, 5 min]."""
    return float(min(MAX_STEP_S, max(MIN_STEP_S, round(range_s / RANGE_POINTS))))


def slices(range_s: float, step: float, parts: int = S.PARALLEL) -> list[tuple[float, float]]:
    """The range cut into ``parts`` slices of whole steps, newest first: ``(offset from now, length)`` pairs.
    A slice is asked for as ``[length - 1 s:step]`` (a subquery holds both its ends: one mark per step) at
    ``now - offset``."""
    size = step * math.ceil(range_s / step / parts)
    out, offset = [], 0.0
    while offset < range_s:
        span = min(size, range_s - offset)
        out.append((offset, span))
        offset += size
    return out


def recorded(client, range_s: float, step: float, now: float) -> bool:
    """Whether the recording rules (``RULES_GROUP``) hold the range: their verdicts' count now, and at its first
    step wherever gputop's verdicts were exported then (a Prometheus younger than the range holds neither)."""
    record, back = PARTS[0][4], f"offset {max(0, int(range_s - step))}s"
    return bool(client.query(f"count({record}) and (count({record} {back}) or absent(gputop_verdict_confidence "
                             f"{back}))", at=now))


def account(client, range_s: float, now: float, cache: dict | None = None) -> tuple[list[A.JobHours], float,
                                                                                   list[str]]:
    """Each job's GPU-hours by class over the last ``range_s`` seconds with what a fix would win back, the step it
    was counted at, and what could not be counted (one line each). ``cache`` (a dict the caller keeps between
    accountings): dcgm-exporter's GPUs are judged on samples on a grid of their step, so the next accounting within
    the same step of the grid reuses their verdicts."""
    step = range_step(range_s)
    judge_step = max(step, float(round(range_s / ACCOUNT_JUDGE_POINTS)))
    notes: list[str] = []
    try:  # (none exported now: nothing to sum, nothing to say)
        rules = recorded(client, range_s, step, now)
        raw = not rules and bool(client.query("count(gputop_verdict_confidence)", at=now))
    except SourceError:
        rules = raw = False  # (the raw parts fail or not on their own, and say so)
    if raw:
        notes.append(f"accounting from the raw series: the recording rules of {RULES_FILE} (group {RULES_GROUP}) do "
                     "not hold the range (with them loaded for that long, it reads a few series a job)")
    # the judged GPUs' samples on a grid of their step (its past marks do not change), from the first accounting's now
    phase = now % judge_step if cache is None else cache.setdefault(("phase", judge_step), now % judge_step)
    grid_end = now - (now - phase) % judge_step
    key = (range_s, judge_step, grid_end)
    judged = cache.get(key) if cache is not None else None
    calls, judge_read = {}, False
    if judged is None:
        start = grid_end - judge_step * math.floor(range_s / judge_step)
        try:
            selectors, judge_read = not_exported(client, start, grid_end), True
        except SourceError as exc:
            selectors = []
            notes.append(f"dcgm-exporter's GPUs not counted: which nodes export no verdict could not be read ({exc})")
        for i, q in enumerate(selectors):  # the largest answers first; each judged in its thread as it comes
            calls[("judged", i)] = lambda q=q: _judged(_at_marks(client, S.by_gpu(q, S.META_LABELS), start, grid_end,
                                                                 judge_step), range_s, judge_step)
    for o, w in slices(range_s, step, 1 if rules else S.PARALLEL):
        window = f"[{int(w) - 1}s:{int(step)}s]"
        for part in PARTS:
            calls[(part[0], o)] = lambda o=o, w=window, p=part: client.query(part_query(p, w, rules), at=now - o)
    answers, failed = S.each(calls)
    notes += _failures(failed, range_s)
    got = lambda kind: [r for k, a in answers.items() if isinstance(k, tuple) and k[0] == kind for r in a]  # noqa: E731
    classes = [(C.job_of(r["metric"]), r["metric"].get("class", "?"), float(r["value"][1])) for r in got("classes")]
    subclasses = [(C.job_of(r["metric"]), r["metric"].get("class", "?"), r["metric"].get("subclass"),
                   float(r["value"][1])) for r in got("subclasses")]
    entries = list(A.exported_hours(classes, subclasses, step))
    steps = {}  # (job, class) -> steps counted (each a GPU's verdict at a mark)
    for job, cls, n in classes:
        steps[(job, cls)] = steps.get((job, cls), 0.0) + n
    recovered = _idle_hours(got("util"), steps, step, 100.0) + _idle_hours(got("sm"), steps, step, 1.0)
    fp32_steps = {}
    for job, cls, sub, n in subclasses:
        if (cls, sub) == (Cls.COMPUTE_BOUND, Sub.FP32):
            fp32_steps[job] = fp32_steps.get(job, 0.0) + n
    recovered += _by_model(got("clocks"), {j: n for (j, c), n in steps.items() if c == Cls.THROTTLED},
                           step, Cls.THROTTLED, _clock_deficit)
    recovered += _by_model(got("fp32"), fp32_steps, step, Cls.COMPUTE_BOUND, _mixed_precision)
    if judged is None:
        shares = [a for k, a in answers.items() if isinstance(k, tuple) and k[0] == "judged"]
        judged = ([e for a in shares for e in a[0]], [r for a in shares for r in a[1]])
        if cache is not None and judge_read and not any(k[0] == "judged" for k in failed if isinstance(k, tuple)):
            for k in [k for k in cache if k[0] != "phase"]:
                del cache[k]
            cache[key] = judged
    entries += judged[0]
    recovered += judged[1]
    notes += [f"Prometheus said its accounting answer is partial: {w}" for w in client.take_warnings()]
    return A.account(entries, recovered), step, notes


def _at_marks(client, promql: str, start: float, end: float, step: float) -> dict[tuple, dict]:
    """``promql``'s series at the marks ``start``, ``start + step``, ... ``end``, by GPU and job
    (``series.groups``), one instant query a mark: the same samples as one ``query_range`` over them, for 45% less of
    Prometheus' CPU at a 24 h range's 9 marks of 3 h (1.31 s against 2.28-2.40 s for 512 GPUs of 8,192,
    docs/benchmarks.md: a range query reads each series over the whole range)."""
    out: dict[tuple, dict] = {}
    for k in range(int(round((end - start) / step)) + 1):
        S.append_points(out, S.groups(client.query(promql, at=start + k * step), with_job=True))
    return out


def _judged(gpus: dict[tuple, dict], range_s: float, judge_step: float) -> tuple[list, list]:
    """dcgm-exporter's GPUs (of one share of their nodes, ``_at_marks``) judged window by window on their samples:
    (entries, recovered) by job."""
    entries, recovered = [], []
    window_s = max(range_s / ACCOUNT_WINDOWS, 2 * judge_step)
    for key, g in gpus.items():
        for cls, sub, hours, back in A.judged_hours(S.samples(g), S.static(g), judge_step, window_s):
            entries.append((key[-1], cls, sub, hours))
            recovered.append((key[-1], cls, back))
    return entries, recovered


def _clock_deficit(mean: float, model: str | None) -> float | None:
    top = max_sm_clock(model)
    return max(0.0, 1.0 - mean / top) if top else None


def _mixed_precision(mean: float, model: str | None) -> float | None:
    ratio = fp32_to_tensor({"name": model})
    return min(1.0, mean * (1.0 - ratio)) if ratio else None  # (SM activity: a ratio in DCGM's units)


def _idle_hours(answer: list[dict], steps: dict, step: float, full: float) -> list[tuple]:
    """The idle share's GPU-hours by job and class from the sum of a reading (``full``: its value when busy all the
    time) over the class's steps: ``steps - sum / full`` steps idle."""
    sums: dict = {}
    for r in answer:
        key = (C.job_of(r["metric"]), r["metric"].get("class", "?"))
        sums[key] = sums.get(key, 0.0) + float(r["value"][1])
    return [(job, cls, max(0.0, steps.get((job, cls), 0.0) - total / full) * step / 3600.0)
            for (job, cls), total in sums.items()]


def _by_model(answer: list[dict], steps: dict, step: float, cls: str, rule) -> list[tuple]:
    """A class's recoverable hours by job from the sum of a reading over the job's steps of that class (by model; the
    range's slices summed): ``rule(mean, model)`` is the share (the clock deficit, mixed precision's share) of those
    steps."""
    sums: dict = {}
    for r in answer:
        key = (C.job_of(r["metric"]), r["metric"].get(F.LABEL_MODEL_NAME))
        v = S.number(r["value"][1])
        if v is not None:
            sums[key] = sums.get(key, 0.0) + v
    out = []
    for (job, model), total in sums.items():
        n = steps.get(job)
        got = rule(total / n, model) if n else None
        if got is not None:
            out.append((job, cls, n * got * step / 3600.0))
    return out


def _failures(failed: dict, range_s: float) -> list[str]:
    """One line per kind of query that failed, saying what the accounting lacks."""
    lines = []
    kinds = {k[0] if isinstance(k, tuple) else k: exc for k, exc in failed.items()}
    n = {kind: sum(1 for k in failed if (k[0] if isinstance(k, tuple) else k) == kind) for kind in kinds}
    words = {"classes": "of the exported verdicts' GPU-hours ({n} of the range's slices)",
             "util": "of what a fix would win back of waiting GPUs ({n} of the range's slices)",
             "sm": "of what a fix would win back of waiting SMs ({n} of the range's slices)",
             "judged": "of dcgm-exporter's GPUs ({n} of their node shares)",
             "subclasses": "of the subclasses", "clocks": "of the throttled GPUs' clocks",
             "fp32": "of the FP32-pipe-bound GPUs' activity"}
    for kind, exc in kinds.items():
        lines.append(f"accounting incomplete: the part {words[kind].format(n=count(n[kind], 'part'))} not read "
                     f"({exc})")
    return lines


def not_exported(client, start: float, end: float) -> list[str]:
    """Selectors of the DCGM series of the nodes that exported no gputop verdict over [start, end] (the nodes
    named by the label index: a node whose gputop exported verdicts at any time of the range is counted from
    those alone), and of series without a host label where no verdict was exported (``unless``, matched by
    GPU). Each is asked for apart, the nodes in ``JUDGE_SHARES`` shares: ``or`` would match every series against the
    others at every step, and a query's series are read on one core."""
    parts = []
    for label in F.LABELS_HOSTNAME:
        dcgm = set(client.label_values(label, S.SELECTOR, start=start, end=end))
        if dcgm:
            dcgm -= set(client.label_values(label, "gputop_bottleneck", start=start, end=end))
            nodes = sorted(dcgm)
            parts += [S.on_nodes({label: set(nodes[i::JUDGE_SHARES])}) for i in range(JUDGE_SHARES)]
    # series without a host label: by the scrape's instance, as a row's node
    parts.append(f'{S.JUDGE_SELECTOR[:-1]},Hostname="",hostname=""}} unless on(instance, gpu) '
                 'gputop_bottleneck{Hostname="",hostname=""}')
    return [p for p in parts if p]
