"""The cluster page: ``gputop --source prometheus=URL`` (no ``--once``), an App of its own (``page.py``).

:func:`main_cluster_tui` reads the cluster once before Textual starts: a Prometheus that cannot be read at start-up
(unreachable, not Prometheus, no GPU) is one line and its exit code, as ``--once`` gives, and so is a ``--node`` or
``--job`` it does not have (exit 2); after that, a read that fails only marks the page stale. Then the page needs a terminal (else one line, exit 2)."""

from __future__ import annotations


def main_cluster_tui(args) -> int:
    """Read the cluster, then run the page on it until q or a stop signal; returns the exit code."""
    import os
    import sys
    import time

    from gputop import exitcodes
    from gputop.exitcodes import fail
    from gputop.fleet.reader import ClusterReader
    from gputop.fleet.gpu_history import read_gpu
    from gputop.analysis import cluster as C
    from gputop.telemetry.errors import SourceError
    from gputop.telemetry.prometheus import PrometheusClient

    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    spec = args.spec
    try:  # first: a source that cannot be read says so, terminal or not
        client = PrometheusClient(spec.path)
        reader = ClusterReader(client)
        rows = reader.snapshot()
        # a --node or --job it does not have: one line, as --once (a job not on a GPU now: its accounting read once)
        jobs = [] if args.job is None or any(args.job in r.jobs for r in rows) else reader.accounting(spec.range_s)[0]
    except SourceError as exc:
        return fail(exitcodes.code_for(exc), str(exc))
    why = C.unmatched(rows, jobs, spec.range_s, job=args.job, node=args.node)
    if why:
        return fail(exitcodes.USAGE, why)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return fail(exitcodes.USAGE, "the cluster page needs a terminal; for text or JSON use --once [--json]")
    from gputop.tui.cluster.model import ClusterState
    from gputop.tui.cluster.page import ClusterApp
    from gputop.tui import crash

    state = ClusterState(spec.path, spec.range_s, job=args.job, node=args.node, cls=args.cls)
    state.took_rows(rows, time.time())
    app = ClusterApp(state, reader, read_gpu=lambda node, gpu: read_gpu(client, node, gpu), first_wait=0.0)
    code = crash.run(app)
    crashed = crash.crash_code(app)  # an exception: logged, one line
    if crashed is not None:
        return crashed
    return code if isinstance(code, int) else exitcodes.OK
