"""The telemetry source: what every source gives the sampler and the frontends (:class:`Source`), what the
command line asks for (:class:`SourceSpec`), and opening it (:func:`open_source`).

The sources: live NVML (``telemetry/live.py`` LiveSource), a recorded trace (``telemetry/trace.py``
ReplaySource; the demo is the trace that ships with gputop, played in a loop) and a running dcgm-exporter
(``telemetry/dcgm.py`` DcgmExporterSource); a later one (a Prometheus server's query API) implements the same
protocol. Every source sets every attribute, with an honest value where it has nothing to say (``nvml`` is
None where the source is not live NVML, ``header`` is {} where nothing was recorded), so a consumer reads them
as they are and never asks whether one is there.

Opening a source raises :class:`gputop.telemetry.errors.SourceError` (``BadSource``, ``NoGpu``,
``SourceUnreachable``); the frontends turn those into exit codes (``gputop.exitcodes.code_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gputop.telemetry.errors import BadSource, NoGpu
from gputop.telemetry.host import HOST_PERIOD_S
from gputop.telemetry.sample import PROCESS_EVERY
from gputop.telemetry.sampler import DEFAULT_RATE_HZ

if TYPE_CHECKING:
    from gputop.telemetry.nvml import Nvml

LIVE, REPLAY, DEMO, DCGM_EXPORTER = "live", "replay", "demo", "dcgm-exporter"  # SourceSpec.kind
PROMETHEUS = "prometheus"  # a whole cluster, from a Prometheus server's HTTP API (fleet/reader.py), not a Source
DEFAULT_RANGE_S = 3600.0  # PROMETHEUS: the job accounting's range (--range)


@runtime_checkable
class Source(Protocol):
    """What a telemetry source gives: ticks (``read``) and the facts around them."""

    kind: str
    """What it reads: ``"live"`` (NVML on this machine), ``"replay"`` (a trace file, the demo's too),
    ``"dcgm-exporter"``. Documents and the TUI's header name the source by it."""

    label: str
    """A few words for the TUI's header: ``"live"``, the trace's file name, the exporter's URL."""

    path: str | None
    """The file or URL it reads; None for live NVML."""

    hostname: str | None
    """The machine the GPUs are in: this one (live), the recording machine (a replay: its header's), the
    exporter's ``Hostname`` label; None where that is unknown."""

    header: dict
    """Facts recorded with the data, as a trace's header holds them (``rate_hz``, ``hostname``, ``note``, ``run`` for
    a recorded run, ``na_reasons``); {} for live NVML, which recorded nothing."""

    na_reasons: dict[str, str]
    """Why fields are n/a, field -> reason. Live: NVML's, filled in place as calls fail (the same dict, so a reader
    sees it grow); a replay: its header's; dcgm-exporter: the fields it does not export."""

    nvml: Nvml | None
    """The NVML handle of a live source (a run finds its GPU's UUID through it); None for every other source."""

    indices: list[int]
    """The index of each GPU in a tick, in tick order: NVML's (live), the recording's (a replay), the exporter's
    ``gpu`` label. Only a live source's are this machine's NVML indices."""

    loop: bool
    """A replay that starts again at its end (the demo); False for every other source."""

    finished: bool
    """True once a replay that does not loop has given its last tick (``read`` returns None from then on); always
    False for a source that does not end."""

    def static(self) -> list[dict]:
        """The GPUs' static facts (the keys of ``telemetry.static.read_static``, None where unknown), in tick order."""

    def read(self) -> dict | None:
        """The next tick, ``{"t", "gpus": [sample...], "host", "phase"?}``; None once a replay has finished."""

    def delay(self, interval: float) -> float:
        """Seconds to wait before the next read, given the sampler's ``interval`` (a replay: its recorded
        spacing over its speed)."""

    def watch(self, pid: int) -> None:
        """Read this process tree's CPU% into each tick's ``host["procs"]`` from the next tick (a replay: nothing)."""

    def unwatch(self, pid: int) -> None:
        """Stop reading it."""

    def close(self) -> None:
        """Release what the source holds (NVML's GPM buffers); a second call does nothing."""


@dataclass(frozen=True)
class SourceSpec:
    """Which source to open and how to sample it. ``gputop/cli`` builds one from the flags (its
    ``shared.source_spec``); everything below the frontends gets this, never the command line."""

    kind: str = LIVE  # LIVE, REPLAY, DEMO (the trace that ships with gputop), DCGM_EXPORTER or PROMETHEUS
    gpus: tuple[int, ...] = ()  # --gpu: the GPU indices asked for, in order (empty: every GPU)
    path: str | None = None  # REPLAY: the trace file; DCGM_EXPORTER: the /metrics URL; PROMETHEUS: the server's URL
    speed: float = 1.0  # REPLAY, DEMO: x real time
    loop: bool = False  # REPLAY, DEMO: start again at the end (the demo, in the TUI and --export)
    rate_hz: float = DEFAULT_RATE_HZ  # the sampler's ticks a second (--rate)
    process_every: int = PROCESS_EVERY  # live: list the GPU processes on every n-th read
    host_period_s: float = HOST_PERIOD_S  # live: how often host metrics are read while a process is watched
    range_s: float = DEFAULT_RANGE_S  # PROMETHEUS: the job accounting's range, seconds (--range)

    @property
    def recorded(self) -> bool:
        """A trace played back (``--replay`` or ``--demo``), not GPUs read now."""
        return self.kind in (REPLAY, DEMO)


def check_gpus(wanted, static: list[dict]) -> list[int]:
    """Positions (in ``static``) of the ``--gpu`` indices asked for (all when none); raises BadSource for one
    that is not there."""
    known = [s["index"] for s in static]
    if not wanted:
        return list(range(len(static)))
    for g in wanted:
        if g not in known:
            choices = ", ".join(f"{s['index']} ({s.get('name')})" for s in static) or "none"
            raise BadSource(f"--gpu {g}: no such GPU (valid: {choices})")
    return [known.index(g) for g in wanted]


def open_source(spec: SourceSpec, need_gpu: bool = True) -> Source:
    """The source ``spec`` names: a replay (or the demo), a dcgm-exporter, or live NVML for ``spec.gpus``.

    ``need_gpu``: live NVML without a library, driver or GPU raises NoGpu rather than giving a host-only source
    (the TUI takes that one: its monitor shows the host, its workloads run on the CPU). Raises SourceError."""
    if spec.recorded:
        from gputop.telemetry.trace import ReplaySource, TraceError, demo_trace_path  # (live start-up skips it)

        try:
            src = ReplaySource(demo_trace_path() if spec.kind == DEMO else spec.path, speed=spec.speed, loop=spec.loop)
        except TraceError as exc:
            raise BadSource(str(exc)) from None
        check_gpus(spec.gpus, src.static())
        return src
    if spec.kind == DCGM_EXPORTER:
        from gputop.telemetry.dcgm import DcgmExporterSource  # (its HTTP client: only here)

        src = DcgmExporterSource(spec.path)
        check_gpus(spec.gpus, src.static())
        return src
    from gputop.telemetry import nvml_early
    from gputop.telemetry.live import LiveSource
    from gputop.telemetry.nvml import Nvml
    from gputop.telemetry.static import device_count, read_static

    early = nvml_early.take()  # opened on a thread at start-up (the monitor), else here
    nvml = early.nvml if early is not None else Nvml()
    known = early.static if early is not None else {}
    if not nvml.available():
        if need_gpu:
            raise NoGpu(nvml.error or "no NVIDIA GPU found")  # no hint: what works without a GPU is the mode's to say
        return LiveSource(nvml, gpus=[])
    n = device_count(nvml)
    bad = [g for g in spec.gpus if not 0 <= g < n]
    if bad:
        names = ", ".join(f"{i} ({(known.get(i) or read_static(nvml, i))['name']})" for i in range(n))
        raise BadSource(f"--gpu {bad[0]}: no such GPU (valid: {names})")
    return LiveSource(nvml, gpus=list(spec.gpus) or None, process_every=spec.process_every,
                      host_period_s=spec.host_period_s, static=known)
