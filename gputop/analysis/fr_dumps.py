"""PyTorch's flight recorder dumps, read and judged: which rank is behind, which collective is mismatched, and how
many collectives of what size the job runs a second.

The flight recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE`` / ``TORCH_FR_BUFFER_SIZE`` > 0) keeps each rank's last N
collectives in a ring: for each, its process group, its ``collective_seq_id`` (1, 2, 3, ... per group, the same
number for the same call on every rank), its op (``profiling_name``, "nccl:all_reduce"), its tensors' sizes and
dtypes, its state, when it was issued (``time_created_ns``) and (pickle dumps) the Python frames that issued it. A
dump is torch's pickle (``DebugInfoWriter``: what the on-demand pipe and the watchdog write) or its JSON
(``_dump_fr_trace_json``); version "2.x" of the format (torch 2.4 to 2.13 write the same keys).

Pure: bytes in, dicts out. :func:`load` refuses a pickle that names any class or function (a dump holds only
dicts, lists, strings and numbers: nothing in it is run). :func:`first_mismatch` merges the ranks' dumps as
``torch.distributed.flight_recorder``'s fr_trace does, in the order of sequence ids: the first collective where
a rank has no entry while its peers do (it is behind: it never called it), where the ops differ (a mismatched
order) or where the sizes differ. :func:`collective_rate` reads the rate and size of a rank's collectives.
"""

from __future__ import annotations

import io
import json
import pickle
import re

SMALL_COLLECTIVE_BYTES = 256 << 10  # a collective this small is latency-bound (NCCL's LL protocols' range)
SMALL_COLLECTIVES_PER_S = 1000.0  # ... and this many a second cost the job (at ~25 us each: 2.5% of every second
# in NCCL's latency alone, more where each waits for the host: a metric all-reduced and .item()'d every step)
DTYPE_BYTES = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Long": 8, "Int": 4, "Short": 2, "Byte": 1,
               "Char": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "ComplexFloat": 8, "ComplexDouble": 16}


class DumpError(ValueError):
    """A dump that cannot be read (one line)."""


class _DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise DumpError(f"a flight recorder dump names no class, this one names {module}.{name}: not read")


def load(data: bytes) -> dict:
    """One dump (pickle or JSON) as a dict; raises DumpError."""
    if not data:
        raise DumpError("the dump is empty")
    try:
        if data.lstrip()[:1] in (b"{", b"["):
            got = json.loads(data)
        else:
            got = _DataOnly(io.BytesIO(data)).load()
    except DumpError:
        raise
    except Exception as exc:  # a cut-off or corrupt pickle raises anything from EOFError to UnpicklingError
        raise DumpError(f"not a flight recorder dump ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(got, dict) or not isinstance(got.get("entries"), list):
        raise DumpError("not a flight recorder dump (no entries)")
    return got


def rank_of_file(name: str) -> int | None:
    """The rank a dump file is of: the number the dump writer appends to its stem (``nccl_trace_rank_3``)."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else None


def op_name(entry: dict) -> str:
    """'nccl:all_reduce' -> 'all_reduce'."""
    return str(entry.get("profiling_name") or "?").split(":", 1)[-1]


def _sizes(entry: dict) -> list:
    return [list(s) for s in entry.get("input_sizes") or []]


def nbytes(entry: dict) -> int:
    """The bytes of a collective's inputs (numel times its dtype's size)."""
    total = 0
    for shape, dt in zip(entry.get("input_sizes") or [], entry.get("input_dtypes") or []):
        n = 1
        for d in shape:
            n *= int(d)
        total += n * DTYPE_BYTES.get(str(dt), 4)
    return total


def _where(entry: dict) -> str | None:
    """The program's own frame that issued it (the first frame outside torch and the standard library)."""
    for f in entry.get("frames") or []:
        path = str(f.get("filename") or "")
        if "/torch/" in path or "/lib/python3" in path and "site-packages" not in path:
            continue
        return f"{path.rsplit('/', 1)[-1]}:{f.get('line')} ({f.get('name')})"
    return None


def _collectives(dump: dict) -> dict[str, dict[int, dict]]:
    """{process group id: {collective_seq_id: entry}} (point-to-point entries left out: their own numbering)."""
    out: dict[str, dict[int, dict]] = {}
    for e in dump.get("entries") or []:
        if not isinstance(e, dict) or e.get("is_p2p") or e.get("collective_seq_id") is None:
            continue
        pg = e.get("process_group")
        key = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id", "0"))
        out.setdefault(key, {})[int(e["collective_seq_id"])] = e
    return out


def _names(ranks) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def first_mismatch(dumps: dict[int, dict]) -> dict | None:
    """The first collective where the ranks' dumps ({rank: dump}) disagree, per process group, in sequence order;
    None without two ranks' entries. ``kind``: "behind" (ranks without an entry their peers have: they never
    called it), "op", "sizes" or "dtypes" (the same sequence number, another call), or "none" (every rank called
    the last collective the same way: it did not complete, and no rank of these dumps is behind)."""
    per_rank = {r: _collectives(d) for r, d in dumps.items()}
    groups = sorted({g for c in per_rank.values() for g in c}, key=lambda g: (g != "0", g))
    for g in groups:
        have = {r: c[g] for r, c in per_rank.items() if c.get(g)}
        if len(have) < 2:
            continue
        lo = max(min(s) for s in have.values())  # the ring keeps the last N: compare where every rank has kept
        hi = max(max(s) for s in have.values())
        for seq in range(lo, hi + 1):
            there = {r: s[seq] for r, s in have.items() if seq in s}
            missing = sorted(r for r in have if r not in there)
            first = next(iter(there.values()))
            if missing:
                last = {r: max(have[r]) for r in missing}  # where it was last seen: its last collective's caller
                return _finding("behind", g, seq, missing, there, have[missing[0]][last[missing[0]]],
                                f"{_names(missing)} never called collective #{seq} ({op_name(first)}) of process "
                                f"group {g} that {_names(there)} called: behind, at "
                                + ", ".join(f"#{last[r]} ({op_name(have[r][last[r]])})" for r in missing),
                                issued="its last collective was issued at")
            for kind, value in (("op", op_name), ("sizes", _sizes), ("dtypes", lambda e: e.get("input_dtypes"))):
                by = {}
                for r, e in there.items():
                    by.setdefault(json.dumps(value(e)), []).append(r)
                if len(by) > 1:
                    odd = min(by.values(), key=lambda rs: (len(rs), rs))  # the fewest (a tie: the lowest rank's, as rank_stacks)
                    parts = "; ".join(f"{_names(rs)} {json.loads(v)}"
                                      for v, rs in sorted(by.items(), key=lambda kv: (len(kv[1]), kv[1])))
                    what = {"op": "different collectives", "sizes": f"{op_name(first)} with different sizes",
                            "dtypes": f"{op_name(first)} with different dtypes"}[kind]
                    return _finding(kind, g, seq, odd, there, there[odd[0]],
                                    f"collective #{seq} of process group {g}: {what} ({parts})")
        last = {r: s[max(s)] for r, s in have.items()}
        pending = [r for r, e in last.items() if e.get("state") != "completed" and not e.get("retired")]
        if pending:
            e = last[pending[0]]
            return _finding("none", g, max(have[pending[0]]), [], last, e,
                            f"every rank called collective #{max(have[pending[0]])} ({op_name(e)}) of process group "
                            f"{g} the same way and it did not complete: no rank of these dumps is behind")
    return None


def _finding(kind: str, group: str, seq: int, culprits: list[int], there: dict, entry: dict, sentence: str,
             issued: str = "issued at") -> dict:
    """A finding; ``entry``: the culprit's entry whose caller (the program's frame) says where."""
    where = _where(entry)
    return {"kind": kind, "process_group": group, "seq": seq, "culprit_ranks": list(culprits),
            "op": op_name(entry), "where": where,
            "ops": {str(r): op_name(e) for r, e in sorted(there.items())},
            "sizes": {str(r): _sizes(e) for r, e in sorted(there.items())},
            "sentence": sentence + (f"; {issued} {where}" if where and culprits else "")}


def collective_rate(dump: dict) -> dict | None:
    """How many collectives a second the rank issued and how large, over the entries its dump holds (the process
    group with the most): {"per_s", "median_bytes", "mean_bytes", "count", "span_s", "ops", "small"}; None with
    fewer than 10 entries or no time between them."""
    groups = _collectives(dump)
    if not groups:
        return None
    entries = sorted(max(groups.values(), key=len).values(), key=lambda e: e.get("time_created_ns") or 0)
    times = [int(e["time_created_ns"]) for e in entries if e.get("time_created_ns")]
    if len(times) < 10 or times[-1] <= times[0]:
        return None
    span = (times[-1] - times[0]) / 1e9
    sizes = sorted(nbytes(e) for e in entries)
    ops: dict[str, int] = {}
    for e in entries:
        ops[op_name(e)] = ops.get(op_name(e), 0) + 1
    per_s = (len(times) - 1) / span
    median = sizes[len(sizes) // 2]
    return {"per_s": round(per_s, 1), "median_bytes": median, "mean_bytes": round(sum(sizes) / len(sizes)),
            "count": len(entries), "span_s": round(span, 3), "ops": ops,
            "small": per_s >= SMALL_COLLECTIVES_PER_S and median <= SMALL_COLLECTIVE_BYTES}
