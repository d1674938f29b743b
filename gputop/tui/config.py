"""What the TUI is built from: ``TuiConfig``, and ``config_from_args`` (the command line's source)."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field


@dataclass
class TuiConfig:
    source: object
    rate_hz: float = 10.0
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
    sampler: object | None = None  # a sampler made elsewhere (gputop --tui --run: the Monitor's)
    read_only: bool = False  # gputop --serve without --serve-control: no run, cancel or save
    tour: bool = False  # gputop --tour
    recordings: list = field(default_factory=list)  # recorded runs to offer (--recorded FILE)
    run_speed: float = 1.0  # how fast recorded runs play (--speed)
    autoplay: str | None = None  # --replay of a recorded run: its run plays along with its telemetry
    settle_gc: bool = False  # gputop's own TUI process (not tests): start-up's objects leave the GC's scans (app.py)


def config_from_args(args) -> TuiConfig:
    """Open the source the command line asks for (raises SourceError)."""
    from gputop.sources import check_gpus, open_source

    src = open_source(args, need_gpu=False, loop_demo=True)
    statics = src.static()
    live = getattr(src, "kind", "") == "live"
    positions = list(range(len(statics))) if live else check_gpus(args.gpu, statics)
    host = platform.node() if live else getattr(src, "header", {}).get("hostname")
    na = None
    if live and not statics:
        nvml = getattr(src, "nvml", None)
        na = getattr(nvml, "error", None) or "no NVIDIA GPU found"
    recordings = list(getattr(args, "recorded", None) or [])
    autoplay = None
    if getattr(args, "replay", None) and isinstance((getattr(src, "header", None) or {}).get("run"), dict):
        autoplay = args.replay  # a recorded run (--record-run): the monitor plays its telemetry, the run its events
        recordings.append(args.replay)
    device = getattr(args, "device", "cuda")  # the app runs workloads on the CPU where there is no live GPU
    return TuiConfig(source=src, rate_hz=args.rate, gpus=positions, hostname=host, device=device,
                     timeout=getattr(args, "timeout", None), grace_s=getattr(args, "grace", None), na_reason=na,
                     read_only=bool(getattr(args, "served", False)) and not getattr(args, "serve_control", False),
                     tour=bool(getattr(args, "tour", False)), recordings=recordings,
                     run_speed=getattr(args, "speed", 1.0), autoplay=autoplay)
