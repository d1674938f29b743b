"""What the TUI is built from: ``TuiConfig``; ``open_config`` (a SourceSpec and the TUI's options) and
``config_from_args`` (those from the command line)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.telemetry.errors import BadSource
from gputop.telemetry.sampler import DEFAULT_RATE_HZ
from gputop.telemetry.source import REPLAY, Source, SourceSpec, check_gpus, open_source


@dataclass
class TuiConfig:
    source: Source
    rate_hz: float = DEFAULT_RATE_HZ
    gpus: list[int] | None = None  # positions in the source's GPUs to show (default all)
    hostname: str | None = None
    start_sampler: bool = True  # tests step the sampler by hand
    fps: float = 4.0  # the charts move at >= 4 frames a second; each frame costs CPU (0: no frame timer;
    # the caller draws with frame(): tests, so that nothing they see depends on a timer)
    span_s: float = 60.0
    device: str = "cuda"  # where workloads run by default
    timeout: float | None = None
    grace_s: float | None = None  # --grace (None: the supervisor's default)
    save_dir: str | None = None
    na_reason: str | None = None  # why there is no GPU (live source without NVML)
    specs: list | None = None  # workloads (default: the runner's registry)
    spec_errors: list[str] = field(default_factory=list)
    sampler: object | None = None  # a sampler made elsewhere (the early frame's)
    command: object | None = None  # gputop --tui --run / --watch: the command's gputop.session.command.Session
    read_only: bool = False  # gputop --serve without --serve-control: no run, cancel or save
    tour: bool = False  # gputop --tour
    recordings: list = field(default_factory=list)  # recorded runs to offer (--recorded FILE)
    run_speed: float = 1.0  # how fast recorded runs play (--speed)
    autoplay: str | None = None  # --replay of a recorded run: its run plays along with its telemetry
    settle_gc: bool = False  # gputop's own TUI process (not tests): start-up's objects leave the GC's scans (lifecycle.py)


def check_recordings(paths: list[str] | None) -> None:
    """Raise BadSource (one line, exit 2) for a ``--recorded FILE`` that is not a recorded run gputop can read:
    missing, a folder, not JSON, a telemetry trace without a run. Checked before the TUI (or --serve) starts."""
    from gputop.runner.recording import read_header
    from gputop.telemetry.trace import TraceError

    for path in paths or []:
        try:
            read_header(path)
        except TraceError as exc:
            raise BadSource(f"--recorded {exc}") from None


def open_config(spec: SourceSpec, device: str = "cuda", timeout: float | None = None, grace_s: float | None = None,
                read_only: bool = False, tour: bool = False, recorded: list[str] | None = None) -> TuiConfig:
    """Open the source ``spec`` names for the TUI, with the TUI's own options (raises SourceError)."""
    check_recordings(recorded)
    src = open_source(spec, need_gpu=False)
    statics = src.static()
    live = src.kind == "live"
    positions = list(range(len(statics))) if live else check_gpus(spec.gpus, statics)
    na = None
    if live and not statics:
        na = src.nvml.error or "no NVIDIA GPU found"
    recordings = list(recorded or [])
    autoplay = None
    if spec.kind == REPLAY and isinstance(src.header.get("run"), dict):
        autoplay = spec.path  # a recorded run (--record-run): the monitor plays its telemetry, the run its events
        recordings.append(spec.path)
    return TuiConfig(source=src, rate_hz=spec.rate_hz, gpus=positions, hostname=src.hostname, device=device,
                     timeout=timeout, grace_s=grace_s, na_reason=na, read_only=read_only, tour=tour,
                     recordings=recordings, run_speed=spec.speed, autoplay=autoplay)


def config_from_args(args) -> TuiConfig:
    """The TUI's config from its command line: the source from ``args.spec`` (the cli's SourceSpec), the TUI's own
    options from the rest (raises SourceError)."""
    return open_config(args.spec, device=args.device, timeout=args.timeout, grace_s=args.grace,
                       read_only=args.served and not args.serve_control, tour=args.tour, recorded=args.recorded)
