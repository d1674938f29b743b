"""``gputop --export [HOST:]PORT``: serve the telemetry as OpenMetrics/Prometheus text until stopped.

Headless: a sampler on the chosen source (live NVML, ``--demo`` or ``--replay FILE``; the demo loops, a
replay plays once: at its end its GPU series stop (see :mod:`.collector`), one line on stderr says so, and it
goes on answering until stopped) and prometheus-client's HTTP server with
:class:`gputop.export.collector.GputopCollector`. It binds 127.0.0.1:9400 unless told otherwise; all
interfaces need an explicit ``0.0.0.0:PORT``. A bad address, or one that cannot be bound (port in use),
is one line on stderr and exit 2. As dcgm-exporter does, the metrics are at ``/metrics``, ``/`` is a page that
links to them, and every other path is 404. SIGINT, SIGTERM and SIGHUP end it cleanly with exit 0: that is its
normal end, as for ``--record``.

Live, only the GPUs CUDA_VISIBLE_DEVICES names (by index or UUID) are exported, and of those only ``--gpu``'s;
a replay's GPUs are the recording machine's, so there only ``--gpu`` picks. A replay's ``Hostname`` label is
the recording machine's too (the trace header's); a live one's is ``$NODE_NAME`` where set (Kubernetes: the
DaemonSet sets it from the pod's node, as dcgm-exporter's does, so the cluster pairs the two exporters of one node),
else this machine's name. Each GPU's ``hpc_job`` is its work's job (:mod:`.jobs`).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import threading

from prometheus_client import CollectorRegistry, start_http_server

from gputop import exitcodes
from gputop.analysis.peaks import compute_peaks
from gputop.exitcodes import fail
from gputop.format import count
from gputop.export.collector import ExportedGpu, ExportOptions, GputopCollector, gpu_labels
from gputop.runner.stop_signals import StopSignals
from gputop.telemetry.devices import nvml_index_for_cuda, visible_entries
from gputop.telemetry.errors import NoGpu, SourceError
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.source import check_gpus, open_source

EXPORT_HOST_PERIOD_S = 1.0
METRICS_PATH = "/metrics"
LANDING_PAGE = (b"<html><head><title>gputop exporter</title></head><body><h1>gputop exporter</h1>"
                b'<p><a href="./metrics">Metrics</a></p></body></html>\n')


def paths(metrics_app, profile_app=None):
    """The WSGI app served: ``metrics_app`` at /metrics, a page that links to it at /, ``profile_app`` at /profile
    (POST: a profiler window of a running process, export/profile_post.py), 404 elsewhere."""
    def app(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == METRICS_PATH:
            return metrics_app(environ, start_response)
        if path == "/profile" and profile_app is not None:
            return profile_app(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [LANDING_PAGE]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"404 not found: the metrics are at {METRICS_PATH}\n".encode()]
    return app


def visible_positions(static: list[dict], env: dict | None = None) -> list[int]:
    """Positions in ``static`` of the GPUs CUDA_VISIBLE_DEVICES leaves visible (all when it is unset)."""
    if visible_entries(env) is None:
        return list(range(len(static)))
    size = max((s.get("index", 0) for s in static), default=-1) + 1
    uuids = [""] * size
    for s in static:
        uuids[s.get("index", 0)] = s.get("uuid") or ""
    visible = {nvml_index_for_cuda(c, uuids, env) for c in range(size)} - {None}
    return [pos for pos, s in enumerate(static) if s.get("index", 0) in visible]


def main_export(args) -> int:
    if args.job_map and not os.path.isdir(args.job_map):
        return fail(exitcodes.USAGE, f"--job-map {args.job_map}: not a directory")
    # host metrics feed only the verdict's host-side evidence: once per (1 s) scrape is enough
    spec = dataclasses.replace(args.spec, host_period_s=EXPORT_HOST_PERIOD_S)
    try:
        src = open_source(spec, need_gpu=True)
        static = src.static()
        wanted = check_gpus(spec.gpus, static)
    except NoGpu as exc:  # what works here without a GPU: the same metrics from a recorded trace
        return fail(exitcodes.NO_GPU, f"{exc}; without a GPU: gputop --export --demo (or --replay FILE)")
    except SourceError as exc:
        return fail(exitcodes.code_for(exc), str(exc))
    live = src.kind == "live"
    visible = visible_positions(static) if live else range(len(static))  # a replay's GPUs are another machine's
    positions = [p for p in wanted if p in visible]
    if not positions:
        src.close()
        return fail(exitcodes.USAGE, f"no GPU to export: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}"
                    + (f" and --gpu {args.gpu}" if args.gpu else "") + " leave none of "
                    + (", ".join(f"{s.get('index')} ({s.get('uuid')})" for s in static) or "no GPUs"))
    sampler = Sampler(src, rate_hz=spec.rate_hz)
    on_demand = _on_demand(live)
    collector = _collector(args, sampler, static, positions, src.hostname, live,
                           attribution=on_demand.latest if on_demand else None)
    stop = threading.Event()
    stops = StopSignals(lambda signum: stop.set())
    with stops:  # before the server: a signal as soon as it answers is a clean stop too
        try:
            close = _listen(args, collector, f"{count(len(positions), 'GPU')} ({src.kind})", on_demand, sampler)
        except exitcodes.Failure as exc:
            src.close()
            return fail(exc.code, str(exc))
        try:
            sampler.start()
            ended = False
            while not stop.wait(1.0):
                ended = ended or _say_if_ended(src)
            if not ended:  # stopped in the second between the end and its line
                _say_if_ended(src)
        finally:
            close()
            sampler.stop()
            src.close()
    exitcodes.say(f"stopped by {exitcodes.signal_name(stops.first)}" if stops.first else "stopped")
    return exitcodes.OK


def _say_if_ended(src) -> bool:
    """One line once a replay that does not loop has ended; whether it has."""
    if src.finished:
        exitcodes.say(f"the replay of {src.label} ended: its GPU series are no longer exported (gputop_replay 0); "
                      "Ctrl-C stops")
    return src.finished


def _collector(args, sampler, static: list[dict], positions, hostname: str | None, live: bool,
               attribution=None, stacks=None) -> GputopCollector:
    if live and os.environ.get("NODE_NAME"):  # Kubernetes' node name (the DaemonSet's), as dcgm-exporter labels it
        hostname = os.environ["NODE_NAME"]
    hostname = hostname or platform.node()
    gpus = [ExportedGpu(pos, static[pos], compute_peaks(static[pos]), gpu_labels(static[pos], hostname))
            for pos in positions]
    options = ExportOptions(cmdline=args.export_cmdline, job_map=args.job_map,
                            slurm_job=os.environ.get("SLURM_JOB_ID") or None, live=live)
    return GputopCollector(sampler, gpus, options, attribution=attribution, stacks=stacks)


def _on_demand(live: bool):
    """Live: the windows ``POST /profile`` asks of running processes (gputop/export/profile_post.py)."""
    if not live:
        return None
    from gputop.session.profile_on_demand import OnDemand

    return OnDemand()


def _profile_app(on_demand, sampler, port: int):
    """(``POST /profile``'s app, its token's file), or (None, None) where no token could be written."""
    from gputop.export import profile_post
    from gputop.session.profile_whom import gpu_pids

    try:
        token, path = profile_post.write_token(port)
    except Exception:  # no private folder for it: the exporter serves its metrics only
        return None, None
    return profile_post.app(on_demand, token, lambda: gpu_pids(sampler.window(5.0))), path


def _listen(args, collector: GputopCollector, what: str, on_demand=None, sampler=None):
    """Serve ``collector`` at ``--export``'s address (and ``on_demand``'s POST /profile); the function that stops it
    (Failure: cannot listen)."""
    host, port = args.export_address
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
        profile_app, token_file = _profile_app(on_demand, sampler, server.server_port) if on_demand else (None, None)
        server.set_app(paths(server.get_app(), profile_app))
    except OSError as exc:  # in use, no such address on this machine, a privileged port
        raise exitcodes.Failure(exitcodes.USAGE, f"--export {args.export}: cannot listen on {host}:{port}: "
                                                 f"{exc.strerror or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    exitcodes.say(f"exporting {what} at http://{shown}:{server.server_port}/metrics; Ctrl-C stops")
    if token_file:
        exitcodes.say(f"POST /profile?pid=N asks a running process for a profiler window (token: {token_file})")

    def close() -> None:
        server.shutdown()
        server.server_close()
        thread.join(2.0)
        if token_file:
            try:
                os.remove(token_file)
            except OSError:
                pass
    return close


def serve_session(args, session):
    """``--export`` beside ``--run [--profile] -- CMD`` (cli composes it with headless): the session's monitor's
    GPUs, as ``gputop --export`` serves them, plus its latest profiler window (:mod:`.attribution_series`);
    the function that stops serving. Failure: cannot listen."""
    mon = session.monitor
    live = mon.source.kind == "live"
    positions = visible_positions(mon.static) if live else range(len(mon.static))
    latest = session.profile.latest if session.profile is not None else None
    collector = _collector(args, mon.sampler, mon.static, positions, getattr(mon.source, "hostname", None), live,
                           attribution=latest, stacks=mon.stacks)  # the run's own stack reader: one read for both
    return _listen(args, collector, f"{count(len(positions), 'GPU')} and the command's profiler windows")
