"""Who holds a job up, by stack: every rank's Python stack and its GPU's state, grouped, and the culprit named.

Pure (no py-spy, no NVML): the stacks come from :mod:`gputop.session.stacks`, the GPUs' states from their
verdicts. :func:`place_of` says where one rank is — inside a ``torch.distributed`` collective (which one, at which
line of the program), or outside any (the innermost frame of the program's own code: function, file, line and the
line's source). :func:`judge` groups the ranks by place and names the culprit, in that order of evidence:

1. **a rank that is gone** (its process exited, or is a zombie) while its peers wait: it left the job;
2. **ranks outside any collective while others are inside one** (gloo, or a blocking NCCL call in Python): the
   ranks outside are the culprits ("rank 0 is not in a collective: in ``time.sleep(60)`` at train.py:16");
3. **ranks in different collectives** (another op, or the same op at another line of the program): a mismatched
   order — the group with the fewest ranks is named;
4. **with NCCL's asynchronous collectives** a waiting rank's Python has moved on to its next sync point (an
   ``.item()``, a ``synchronize``) and is in no collective frame: the GPUs say who waits. GPUs in the stalled
   collective (their verdict "stalled", or still "comms-bound" in the first seconds of the stall) wait; a rank of
   the job whose GPU is not in the stall (idle, working, or left) is the culprit, and its stack says where it is.
   Where some of those ranks are at the very line their waiting peers are at, they wait too (their GPU's verdict
   lags the stall by a second or so) and the others are named.

Where no stack could be read, the reason stands in the place of the stack and the telemetry's verdict stands.
The culprit's record (:meth:`Culprit.to_dict`) is what the run document, the TUI's stack view, ``--export``'s
info series and a recorded trace carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# torch.distributed's collectives and point-to-point calls, as their Python functions are named
# (torch/distributed/distributed_c10d.py); a frame of one of these in torch/distributed/ is "in a collective".
COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_gather_coalesced", "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
    "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter", "scatter_object_list",
    "all_to_all", "all_to_all_single", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv",
    "batch_isend_irecv", "send_object_list", "recv_object_list", "new_group", "init_process_group",
    # DistributedDataParallel's set-up: its first collectives (the ranks' parameters checked and broadcast)
    "_verify_param_shape_across_processes", "_sync_module_states", "_sync_params_and_buffers",
})
LIBRARY_MARKS = ("/site-packages/", "/dist-packages/")
STDLIB = re.compile(r"/lib/python3\.\d+/")  # the interpreter's own library (not its site-packages)
# GPU classes of a rank whose GPU is in the stalled collective (it waits), and of ranks that did something else
OUTSIDE = "not in a collective: "  # how a place outside any collective call begins (Place.words)
WAITING_CLASSES = ("stalled", "comms-bound")  # comms-bound: in a collective, not yet judged stalled


def bare(words: str) -> str:
    """A place's words without "not in a collective: " (where the sentence says so itself)."""
    return words.removeprefix(OUTSIDE)


@dataclass
class Place:
    """Where one rank is: in a collective (``op``), outside any, or unknown (``why``)."""

    kind: str  # "collective", "outside", "gone", "unknown"
    op: str | None = None  # the collective's function name
    frame: dict | None = None  # the program's own innermost frame (Frame.to_dict())
    chain: list[dict] = field(default_factory=list)  # the program's frames, innermost first (at most 4)
    why: str | None = None

    def key(self) -> tuple:
        """Ranks with equal keys are at the same place."""
        where = (self.frame or {}).get("short"), (self.frame or {}).get("line")
        return self.kind, self.op, where if self.kind != "gone" else None

    def words(self) -> str:
        f = self.frame or {}
        at = f"{f.get('short')}:{f.get('line')}" if f.get("line") else (f.get("short") or "")
        code = f" (`{f['code']}`)" if f.get("code") else ""
        if self.kind == "collective":
            return f"in {self.op}" + (f" at {at}{code}" if at else "")
        if self.kind == "outside":
            caller = next((c for c in self.chain[1:2]), None)
            called = f", called from {caller['name']} at {caller['short']}:{caller['line']}" if caller else ""
            return f"{OUTSIDE}in {f.get('name')} at {at}{code}{called}"
        if self.kind == "gone":
            return self.why or "its process is gone"
        return f"stack unknown: {self.why}" if self.why else "stack unknown"


@dataclass
class Rank:
    """One rank of a job: its process, its GPU, its GPU's class (the telemetry verdict) and its stack."""

    pid: int
    rank: int | None = None
    gpu: int | None = None
    gpu_class: str | None = None
    stack: dict | None = None  # Stack.to_dict(): frames innermost first, or why
    place: Place | None = None

    def name(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"
        extra = [f"pid {self.pid}"] if self.rank is not None else []
        if self.gpu is not None:
            extra.append(f"GPU {self.gpu}")
        return f"{who} ({', '.join(extra)})" if extra else who


@dataclass
class Culprit:
    kind: str  # "left", "outside", "mismatch", "gpu", "none", "unreadable"
    culprits: list[int]  # indices into ranks
    ranks: list[Rank]
    sentence: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "sentence": self.sentence,
                "culprit_pids": [self.ranks[i].pid for i in self.culprits],
                "culprit_ranks": [self.ranks[i].rank for i in self.culprits],
                "culprit_gpus": [self.ranks[i].gpu for i in self.culprits],
                "ranks": [{"pid": r.pid, "rank": r.rank, "gpu": r.gpu, "gpu_class": r.gpu_class,
                           "place": r.place.kind if r.place else None, "op": r.place.op if r.place else None,
                           "where": r.place.words() if r.place else None,
                           "frame": r.place.frame if r.place else None,
                           "stack": r.stack} for r in self.ranks]}


def is_library(frame: dict) -> bool:
    path = frame.get("file") or ""
    short = frame.get("short") or ""
    return (any(m in path for m in LIBRARY_MARKS) or bool(STDLIB.search(path)) or short.startswith("<")
            or short.startswith(("torch/", "multiprocessing/", "threading.py", "runpy.py", "concurrent/")))


def place_of(stack: dict | None) -> Place:
    """Where a rank is, from its stack (``Stack.to_dict()``: frames innermost first)."""
    if not stack:
        return Place("unknown", why="no stack")
    why = stack.get("why")
    if why:
        gone = "exited" in why or "zombie" in why or "not running" in why
        return Place("gone" if gone else "unknown", why=why)
    frames = stack.get("frames") or []
    own = [f for f in frames if not is_library(f)]
    op = next((f["name"].rsplit(".", 1)[-1] for f in frames
               if "torch/distributed/" in (f.get("short") or f.get("file") or "")
               and f.get("name", "").rsplit(".", 1)[-1] in COLLECTIVES), None)
    if op is not None:
        return Place("collective", op, own[0] if own else None, own[:4])
    return Place("outside", None, own[0] if own else (frames[0] if frames else None), own[:4])


def _names(ranks: list[Rank], idx: list[int]) -> str:
    got = [ranks[i] for i in idx]
    if all(r.rank is not None for r in got) and len(got) > 2:
        nums = sorted(r.rank for r in got)
        if nums == list(range(nums[0], nums[-1] + 1)):
            return f"ranks {nums[0]}-{nums[-1]}"
    if len(got) == 1:
        return got[0].name()
    if all(r.rank is not None for r in got):
        return "ranks " + ", ".join(str(r.rank) for r in sorted(got, key=lambda r: r.rank))
    return ", ".join(r.name() for r in got)


def _groups(ranks: list[Rank], idx: list[int]) -> list[list[int]]:
    groups: dict[tuple, list[int]] = {}
    for i in idx:
        groups.setdefault(ranks[i].place.key(), []).append(i)
    return sorted(groups.values(), key=lambda g: (len(g), g))


def _wait_words(ranks: list[Rank], idx: list[int]) -> str:
    parts = []
    for g in sorted(_groups(ranks, idx), key=lambda g: -len(g)):
        p = ranks[g[0]].place
        verb, their = ("wait", "their") if len(g) > 1 else ("waits", "its")
        where = bare(p.words())
        parts.append(f"{_names(ranks, g)} {verb} "
                     + (p.words() if p.kind == "collective" else f"on {their} GPU ({where})"))
    return "; ".join(parts)


def _gpu_said(cls: str | None) -> str:
    """' (its GPU: idle)': what its GPU's class adds; nothing where the class is the blame itself (a GPU already
    judged "culprit" on an earlier read: live on 4 H100s the view said "(its GPU: culprit)")."""
    return f" (its GPU: {cls})" if cls and cls != "culprit" else ""


def judge(ranks: list[Rank]) -> Culprit:
    """Name the culprit of a stalled job from its ranks (their stacks and GPUs' classes): module doc."""
    for r in ranks:
        r.place = place_of(r.stack)
    everyone = list(range(len(ranks)))
    gone = [i for i in everyone if ranks[i].place.kind == "gone"]
    known = [i for i in everyone if ranks[i].place.kind in ("collective", "outside")]
    inside = [i for i in known if ranks[i].place.kind == "collective"]
    outside = [i for i in known if ranks[i].place.kind == "outside"]
    if gone and len(gone) < len(ranks):
        rest = [i for i in everyone if i not in gone]
        text = f"{_names(ranks, gone)} left the job ({ranks[gone[0]].place.words()})"
        if rest:
            text += f"; {_wait_words(ranks, [i for i in rest if i in known]) or _names(ranks, rest) + ' wait'}"
        return Culprit("left", gone, ranks, text)
    if inside and outside:
        text = "; ".join(f"{_names(ranks, g)} {'is' if len(g) == 1 else 'are'} {ranks[g[0]].place.words()}"
                         for g in _groups(ranks, outside))
        return Culprit("outside", outside, ranks, f"{text}; {_wait_words(ranks, inside)}")
    if inside and len(_groups(ranks, inside)) > 1:
        groups = _groups(ranks, inside)
        odd = groups[0]
        text = (f"the ranks are in different collectives (a mismatched order or a skipped call): "
                + "; ".join(f"{_names(ranks, g)} {ranks[g[0]].place.words()}" for g in sorted(groups, key=len)))
        return Culprit("mismatch", odd, ranks, text)
    if not known:
        why = "; ".join(f"{ranks[i].name()}: {ranks[i].place.words()}" for i in everyone)
        return Culprit("unreadable", [], ranks, f"no rank's stack could be read ({why})")
    # NCCL's collectives are asynchronous: the GPUs say who waits in the stalled collective
    waiting = [i for i in everyone if ranks[i].gpu_class in WAITING_CLASSES]
    apart = [i for i in known if i not in waiting and ranks[i].gpu_class is not None]
    at_their_line = {ranks[i].place.key() for i in waiting if i in known}
    odd = [i for i in apart if ranks[i].place.key() not in at_their_line]
    if odd:  # a rank at the very line its peers wait at waits with them (its GPU not judged stalled yet)
        apart = odd
    if waiting and apart:
        text = "; ".join(f"{_names(ranks, g)} {'is' if len(g) == 1 else 'are'} not in the collective its peers wait "
                         f"in{_gpu_said(ranks[g[0]].gpu_class)}; {'it is' if len(g) == 1 else 'they are'} "
                         + bare(ranks[g[0]].place.words())
                         for g in _groups(ranks, apart))
        rest = _wait_words(ranks, [i for i in waiting if i in known])
        return Culprit("gpu", apart, ranks, f"{text}; {rest}" if rest else text)
    return Culprit("none", [], ranks, "every rank is at the same kind of place ("
                   + _wait_words(ranks, known) + "): no rank of this node holds the others up (a peer on another "
                   "node, or the network)")


def job_records(pids_by_gpu: dict[int, list[int]], classes: dict[int, str | None], read: dict[int, dict]) -> dict:
    """{GPU: the job's culprit record} from the ranks' stacks: ``pids_by_gpu`` (each GPU's processes, NVML's last
    list that named one: a rank that exited keeps its pid here), ``classes`` (each GPU's live class), ``read``
    ({pid: {"stack": Stack.to_dict(), "rank": int or None}}, what the stack reader last got). Every GPU of the job
    gets the same record (``Culprit.to_dict()``), the culprits' GPUs also ``where``: their rank and its place, the
    sentence their verdict quotes. {} where no stack of these pids was read."""
    ranks = []
    for gpu, pids in sorted(pids_by_gpu.items()):
        for pid in pids:
            got = read.get(pid)
            if got is None:
                continue
            ranks.append(Rank(pid, got.get("rank"), gpu, classes.get(gpu), got.get("stack")))
    if not ranks:
        return {}
    c = judge(ranks)
    record = c.to_dict()
    out = {gpu: dict(record) for gpu in pids_by_gpu}
    for i in c.culprits:
        r = c.ranks[i]
        said = f"left the job ({r.place.words()})" if r.place.kind == "gone" else f"is {r.place.words()}"
        out[r.gpu] = dict(record, where=f"{r.name()} {said}")
    return out


def culprit_place(record: dict) -> str | None:
    """Who holds the job up and where, short enough that one row at 80 columns still shows the line, from any GPU's
    record (:func:`job_records`): 'rank 3 (pid 990, GPU 3): in fault at job.py:89 (`time.sleep(3600)`), called from
    ...' (the label beside it says it is the culprit; k's view says the rest); else the record's own words; None
    for no record."""
    if not record:
        return None
    pids = set(record.get("culprit_pids") or [])
    r = next((x for x in record.get("ranks") or [] if x.get("pid") in pids and x.get("where")), None)
    if r is None:
        return record.get("where") or record.get("sentence")
    place = f"left the job ({r['where']})" if r.get("place") == "gone" else \
        bare(r["where"])
    return f"{Rank(r['pid'], r.get('rank'), r.get('gpu'), None, None).name()}: {place}"


def judged_again(records: dict, read: dict) -> dict:
    """Recorded culprit records ({GPU: record}, a trace's ``stacks`` row) judged again by this gputop's
    :func:`judge` from what they hold: each job's ranks (their pid, rank, GPU and its class then) and the read's
    stacks, as a replay's verdicts are the classifier's of now on the recorded telemetry."""
    out: dict = {}
    jobs: dict[frozenset, dict] = {}
    for r in records.values():
        ranks = [x for x in r.get("ranks") or [] if x.get("pid") is not None]
        if ranks:
            jobs.setdefault(frozenset(int(x["pid"]) for x in ranks), {"ranks": ranks})
    for job in jobs.values():
        pids_by_gpu: dict = {}
        classes: dict = {}
        for x in job["ranks"]:
            pids_by_gpu.setdefault(x.get("gpu"), []).append(int(x["pid"]))
            classes[x.get("gpu")] = x.get("gpu_class")
        got = {pid: dict(read.get(pid) or {}, rank=(read.get(pid) or {}).get("rank", x.get("rank")))
               for x in job["ranks"] for pid in [int(x["pid"])]}
        out.update(job_records(pids_by_gpu, classes, got))
    return out if jobs else records


def with_flight_recorder(records: dict, finding: dict | None) -> dict:
    """``records`` (:func:`job_records`) with PyTorch's flight recorder's finding (gputop/analysis/fr_dumps.py's
    ``first_mismatch``) in each (``flight_recorder``). Where the stacks named no culprit (every rank at the same
    kind of place, or none readable: NCCL's ranks are past their asynchronous collectives, at their next sync
    point) and the dumps name culprit ranks, those ranks' GPUs become the culprits: "mismatch" for another op, size
    or dtype, "outside" for a rank that never called the collective its peers are in. Where both name the same
    ranks and the dumps say another op, size or dtype, the culprit is a "mismatch" (the 4-H100 corpus's `op` and
    `size`: the GPUs named rank 3 at 0.5 s, its dump said broadcast for all_reduce, 32 for 4195328 elements). Two
    ranks that differ have no odd one out (the dumps name the lower, a tie): where the stacks named one of them,
    that one is the culprit of the mismatch (the 2-H100 corpus's `op` and `size`: the stacks named rank 1, the
    dumps' tie rank 0)."""
    if not records or not finding:
        return records
    out = {g: dict(r, flight_recorder=finding) for g, r in records.items()}
    first = next(iter(records.values()))
    named = set(first.get("culprit_ranks") or [])
    differ = {int(r) for key in ("ops", "sizes", "dtypes") for r in (finding.get(key) or {})}
    tie = len(differ) == 2 and bool(named) and named <= differ
    agree = (first.get("kind") in ("gpu", "outside") and finding.get("kind") in ("op", "sizes", "dtypes")
             and (set(finding.get("culprit_ranks") or []) == named or tie))
    if agree:  # the stacks named the rank (NCCL: its Python past the call), the dumps say what it called instead
        for g in out:
            out[g].update(kind="mismatch", sentence=f"{first.get('sentence')}; from the flight recorder: "
                                                    f"{finding['sentence']}")
        return out
    if first.get("kind") not in ("none", "unreadable") or finding.get("kind") == "none":
        return out
    by_rank = {x.get("rank"): x for x in first.get("ranks") or [] if x.get("rank") is not None}
    hit = [by_rank[r] for r in finding.get("culprit_ranks") or [] if r in by_rank and by_rank[r].get("gpu") in out]
    if not hit:
        return out
    kind = "outside" if finding["kind"] == "behind" else "mismatch"
    sentence = f"from the flight recorder: {finding['sentence']}; from the stacks: {first.get('sentence')}"
    for g in out:
        out[g].update(kind=kind, sentence=sentence, culprit_pids=[x["pid"] for x in hit],
                      culprit_ranks=[x["rank"] for x in hit], culprit_gpus=[x["gpu"] for x in hit])
    for x in hit:
        at = f" (issued at {finding['where']})" if finding.get("where") else ""
        what = ("never called collective #{seq} ({op}) its peers are in" if kind == "outside" else
                "called another collective #{seq} than its peers ({op})").format(**finding)
        out[x["gpu"]]["where"] = f"rank {x['rank']} (pid {x['pid']}, GPU {x['gpu']}) {what}{at}"
    return out


VIEW_FRAMES = 8  # frames shown of each group's first rank


def view_lines(pids_by_gpu: dict[int, list[int]], classes: dict[int, str | None], read: dict[int, dict]) -> list[str]:
    """Every rank's stack for people (the TUI's stack view): the judgement's sentence, then the ranks grouped by
    place (in which collective, or where outside it; "stack unknown: why" where it could not be read), the culprits'
    group first, each group with its first rank's frames, innermost first."""
    ranks = [Rank(pid, (read.get(pid) or {}).get("rank"), gpu, classes.get(gpu), (read.get(pid) or {}).get("stack"))
             for gpu, pids in sorted(pids_by_gpu.items()) for pid in pids if pid in read]
    if not ranks:
        return []
    c = judge(ranks)
    lines = [c.sentence if c.culprits else f"no culprit: {c.sentence}", ""]
    groups = _groups(ranks, list(range(len(ranks))))
    groups.sort(key=lambda g: (not any(i in c.culprits for i in g), -len(g) if not c.culprits else len(g), g))
    for g in groups:
        p = ranks[g[0]].place
        culprit = any(i in c.culprits for i in g)
        words = p.words()
        if c.culprits and not culprit and p.kind == "outside" and ranks[g[0]].gpu_class in WAITING_CLASSES:
            # outside any collective call in Python, yet its GPU is in the stalled one (an .item(), a synchronize)
            where = bare(words)
            words = f"waits on {'its GPU' if len(g) == 1 else 'their GPUs'} ({where})"
        lines.append(f"{'culprit: ' if culprit else ''}{_names(ranks, g)}: {words}")
        frames = (ranks[g[0]].stack or {}).get("frames") or []
        for f in frames[:VIEW_FRAMES]:
            code = f"  `{f['code']}`" if f.get("code") else ""
            lines.append(f"    {f.get('name')}  {f.get('short')}:{f.get('line')}{code}")
        if len(frames) > VIEW_FRAMES:
            lines.append(f"    ... {len(frames) - VIEW_FRAMES} more frames")
        lines.append("")
    return lines[:-1]
