"""``gputop --source prometheus=URL --once [--json]``: the cluster's document, as JSON or as text.

The document (``gputop/schema/cluster.schema.json``): every GPU the server knows, most wasted GPU-time first
(``--job``, ``--node``, ``--class`` keep some), who judged each one, and every job's GPU-hours by class over
``--range`` (default 1 h). The reading is ``fleet/reader.py``'s; this module words and prints it.
A source that cannot be read is one line on stderr and its exit code (``exitcodes.code_for``), and with ``--json``
an error document (``exit_code``, ``errors``; no rows).
"""

from __future__ import annotations

import time

from gputop import exitcodes
from gputop.analysis import cluster as C
from gputop.analysis.cluster_text import class_text, duration_text, job_line
from gputop.documents import check_writable, emit, error, header
from gputop.exitcodes import fail
from gputop.format import count, gb, pct
from gputop.fleet.reader import ClusterReader, range_step
from gputop.telemetry.errors import BadSource, NoGpu, SourceError
from gputop.telemetry.prometheus import PrometheusClient
from gputop.telemetry.source import SourceSpec


class NoMatch(BadSource):
    """A ``--node`` or ``--job`` the cluster does not have (exit 2, as ``--gpu N`` of a GPU that is not there)."""


def cluster_document(reader: ClusterReader, range_s: float, job: str | None = None, node: str | None = None,
                     cls: str | None = None, now: float | None = None) -> dict:
    """The cluster document at ``now`` (default: this moment); its accounting that of the jobs of the rows kept
    (every job's without a filter). Raises SourceError (NoMatch: a node or job it does not have)."""
    now = time.time() if now is None else now
    everything = reader.snapshot(now)
    rows = C.select(everything, job=job, node=node, cls=cls)
    jobs, step = reader.accounting(range_s, now)
    why = C.unmatched(everything, jobs, range_s, job=job, node=node)
    if why:
        raise NoMatch(why)
    jobs = C.accounted(jobs, rows, any(v is not None for v in (job, node, cls)), job)  # the rows' jobs, as the page
    by_class: dict[str, int] = {}
    for r in rows:
        if r.cls:
            by_class[r.cls] = by_class.get(r.cls, 0) + 1
    return {
        **header("cluster"),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "source": {"kind": "prometheus", "url": reader.client.url},
        "filters": {"job": job, "node": node, "class": cls},
        "summary": {"gpus": len(rows), "gpus_in_cluster": len(everything), "nodes": len({r.node for r in rows}),
                    "jobs": len({j for r in rows for j in r.jobs}), "by_class": by_class,
                    "judged_by_gputop": sum(r.judged_by == C.JUDGED for r in rows)},
        "gpus": [r.to_dict() for r in rows],
        "accounting": {"range_s": range_s, "step_s": step, "jobs": [j.to_dict() for j in jobs]},
        "exit_code": exitcodes.OK, "errors": [],
    }


def error_document(url: str, range_s: float, filters: dict, code: int, kind: str, message: str) -> dict:
    """The cluster document where the cluster could not be read: no rows, the error and its exit code."""
    return {
        **header("cluster"), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": {"kind": "prometheus", "url": url}, "filters": filters,
        "summary": {"gpus": 0, "gpus_in_cluster": 0, "nodes": 0, "jobs": 0, "by_class": {}, "judged_by_gputop": 0},
        "gpus": [], "accounting": {"range_s": range_s, "step_s": range_step(range_s), "jobs": []},
        "exit_code": code, "errors": [error(kind, message)],
    }


def usage_error_document(url: str, message: str) -> dict:
    """The cluster's error document of a refused ``--source prometheus=URL --once --json`` command line (exit 2)."""
    from gputop.telemetry.source import DEFAULT_RANGE_S

    return error_document(url, DEFAULT_RANGE_S, {"job": None, "node": None, "class": None}, exitcodes.USAGE,
                          "bad_usage", message)


def main_cluster(spec: SourceSpec, *, job: str | None = None, node: str | None = None, cls: str | None = None,
                 json_mode: bool = False, output: str | None = None) -> int:
    """``--source prometheus=URL --once`` (``spec``: that source and its range): the document (``json_mode``,
    ``output``) or its text, the rows kept by ``job``, ``node``, ``cls``. Where the cluster cannot be read: one line
    on stderr, its exit code, and with ``json_mode`` / ``output`` the error document (stdout holds exactly one
    document in every outcome)."""
    filters = {"job": job, "node": node, "class": cls}
    try:
        check_writable(output, "--output")
    except exitcodes.Failure as exc:
        return fail(exc.code, str(exc))
    try:
        reader = ClusterReader(PrometheusClient(spec.path))
        doc = cluster_document(reader, spec.range_s, job=job, node=node, cls=cls)
    except SourceError as exc:
        code = exitcodes.code_for(exc)
        exitcodes.say(str(exc))
        if json_mode or output:
            kind = ("no_gpu" if isinstance(exc, NoGpu) else "bad_usage" if isinstance(exc, NoMatch)
                    else "unreachable" if code == exitcodes.NO_GPU else "bad_source")
            emit(error_document(spec.path, spec.range_s, filters, code, kind, str(exc)), json_mode=json_mode,
                 output=output)
        return code
    ok = emit(doc, json_mode=json_mode, output=output, render_text=render_text)
    return exitcodes.OK if ok else exitcodes.FAILED


# -- text ----------------------------------------------------------------------------------------------------------
def render_text(doc: dict) -> str:
    s, f = doc["summary"], doc["filters"]
    shown = [f"--{k} {v}" for k, v in f.items() if v is not None]
    lines = [f"cluster {doc['source']['url']}  {doc['time']}  {count(s['gpus'], 'GPU')} on {count(s['nodes'], 'node')}, "
             f"{count(s['jobs'], 'job')}" + (f" ({' '.join(shown)}; {count(s['gpus_in_cluster'], 'GPU')} in all)"
                                             if shown else "")]
    head = f"{'node':<16} {'gpu':>3}  {'job':<14} {'class':<30} {'conf':>4} {'SM':>4} {'DRAM':>4} {'tens':>4} " \
           f"{'memory GiB':>11} {'waste':>5}  by"
    lines += ["", head]
    for g in doc["gpus"]:
        conf = "" if g["confidence"] is None else f"{g['confidence']:.2f}"
        mem = f"{gb(g['mem_used_bytes'])}/{gb(g['mem_total_bytes'])}"
        waste = "n/a" if g["waste"] is None else f"{100 * g['waste']:.0f}%"
        by = "export" if g["judged_by"] == C.EXPORTED else "gputop"
        lines.append(f"{g['node'][:16]:<16} {g['gpu']:>3}  {(g['job'] or '-')[:14]:<14} "
                     f"{class_text(g['class'], g['subclass'])[:30]:<30} {conf:>4} {pct(g['sm_pct']):>4} "
                     f"{pct(g['dram_pct']):>4} {pct(g['tensor_pct']):>4} {mem:>11} {waste:>5}  {by}")
    judged = [g for g in doc["gpus"] if g["judged_by"] == C.JUDGED]
    if judged:
        lines += ["", "judged here from dcgm-exporter's series (by: gputop); evidence missing:"]
        for g in judged:
            lines.append(f"  {g['node']} GPU {g['gpu']}: " + ("; ".join(g["missing"]) or "none"))
    acc = doc["accounting"]
    lines += ["", f"GPU-hours by class over the last {duration_text(acc['range_s'])} (counted every "
                  f"{acc['step_s']:g} s):"]
    lines += [job_line(j) for j in acc["jobs"]] or ["no GPU-hours in this range"]
    return "\n".join(lines) + "\n"
