"""Open the telemetry source the command line asks for: live NVML, a replay, or the built-in demo."""

from __future__ import annotations

from gputop import exitcodes
from gputop.telemetry.host import HOST_PERIOD_S
from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.static import device_count


class SourceError(Exception):
    """Why a source cannot be opened; ``code`` is the exit code a headless command returns."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def check_gpus(wanted: list[int] | None, static: list[dict]) -> list[int]:
    """Positions (in ``static``) of the ``--gpu`` indices asked for; a bad one is a usage error."""
    known = [s["index"] for s in static]
    if not wanted:
        return list(range(len(static)))
    for g in wanted:
        if g not in known:
            choices = ", ".join(f"{s['index']} ({s.get('name')})" for s in static) or "none"
            raise SourceError(exitcodes.USAGE, f"--gpu {g}: no such GPU (valid: {choices})")
    return [known.index(g) for g in wanted]


def open_source(args, need_gpu: bool = True, loop_demo: bool = False, process_every: int = 10,
                host_period_s: float | None = None):
    """A source for ``args`` (--demo, --replay FILE, --source dcgm-exporter=URL, or live NVML with --gpu).

    ``need_gpu``: a live source without NVML/GPUs is an error (exit 3) rather than host-only.
    ``process_every``: a live source lists GPU processes on every n-th read; ``host_period_s``: how often it
    reads host metrics (default ``telemetry.host.HOST_PERIOD_S``).
    """
    if getattr(args, "demo", False) or getattr(args, "replay", None):
        from gputop.telemetry.trace import ReplaySource, TraceError, demo_trace_path  # (live start-up skips it)

        path = args.replay or demo_trace_path()
        try:
            src = ReplaySource(path, speed=args.speed, loop=loop_demo and bool(args.demo))
        except TraceError as exc:
            raise SourceError(exitcodes.USAGE, str(exc)) from None
        check_gpus(args.gpu, src.static())
        return src
    if getattr(args, "source", None):  # consumer mode: a running dcgm-exporter's /metrics
        from gputop.telemetry.dcgm import DcgmError, DcgmExporterSource, url_of  # (its HTTP client: only here)

        try:
            src = DcgmExporterSource(url_of(args.source))
        except DcgmError as exc:
            raise SourceError(exc.code, str(exc)) from None
        check_gpus(args.gpu, src.static())
        return src
    nvml = Nvml()
    if not nvml.available():
        if need_gpu:
            raise SourceError(exitcodes.NO_GPU, f"{nvml.error}; try --demo or --replay FILE")
        return LiveSource(nvml, gpus=[])
    n = device_count(nvml)
    if args.gpu:
        bad = [g for g in args.gpu if not 0 <= g < n]
        if bad:
            from gputop.telemetry.static import read_static

            names = ", ".join(f"{i} ({read_static(nvml, i)['name']})" for i in range(n))
            raise SourceError(exitcodes.USAGE, f"--gpu {bad[0]}: no such GPU (valid: {names})")
    return LiveSource(nvml, gpus=args.gpu or None, process_every=process_every,
                      host_period_s=HOST_PERIOD_S if host_period_s is None else host_period_s)
