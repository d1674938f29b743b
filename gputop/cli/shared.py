"""The options more than one mode takes, declared once: where the data comes from (every mode takes the source's
options; ``--source`` only the modes that read one), where a document goes, and the flags and limits a few modes
share (``--run``, ``--record``, ``--seconds``, ``--quick``, ``--timeout``, ``--grace``). Also the source's checks and
:func:`source_spec`, the one place these flags become the :class:`gputop.telemetry.source.SourceSpec` (its rate
included) that is all the layers below the frontends see of the command line."""

from __future__ import annotations

import argparse

from gputop.cli.mode import MODES_GROUP, OUTPUT_GROUP, SOURCE_GROUP, WORKLOAD_GROUP, UsageError, option
from gputop.option_values import parse_duration
from gputop.telemetry.sampler import DEFAULT_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ


def _above(flag: str, least: float = 0.0, equal: bool = False):
    """A value check: ``flag`` must be > ``least`` (``equal``: >=)."""
    def check(value):
        ok = value >= least if equal else value > least
        return None if ok else f"{flag} must be {'>=' if equal else '>'} {least:g} (got {value})"
    return check


# -- data source: every mode takes these (a mode that measures live GPUs refuses a recording when it starts) -------
GPU = option("--gpu", group=SOURCE_GROUP, type=int, action="extend", nargs="+", metavar="N",
             help="NVML indices of the GPUs to show or use (--gpu 0 1, or repeated; default all / 0 for --run)",
             check=lambda gpus: "--gpu takes an NVML index >= 0" if any(g < 0 for g in gpus) else None)
REPLAY = option("--replay", group=SOURCE_GROUP, reads=True, metavar="FILE",
                help="play back a recorded trace instead of live NVML (-: read it from stdin)")
SPEED = option("--speed", group=SOURCE_GROUP, type=float, default=1.0, metavar="X", help="replay speed (default 1.0)",
               check=lambda x: None if x > 0 else f"--speed must be > 0 (got {x})")
DEMO = option("--demo", group=SOURCE_GROUP, action="store_true", help="replay the real trace that ships with gputop")
SOURCE = option("--source", group=SOURCE_GROUP, metavar="dcgm-exporter=URL",
                refused="--source dcgm-exporter=URL goes with the monitor (plain gputop) or --once",
                help="read a running dcgm-exporter's /metrics instead of NVML/GPM (the monitor and --once); "
                "prometheus=URL: the whole cluster from a Prometheus server (the cluster page, or --once)")
RANGE = option("--range", group=SOURCE_GROUP, metavar="DURATION", help="with --source prometheus=URL: the job "
               "accounting's range (90s, 30m, 1h, 24h, 7d; default 1h)")
JOB = option("--job", group=SOURCE_GROUP, metavar="JOB", help="with --source prometheus=URL: only this job's GPUs")
NODE = option("--node", group=SOURCE_GROUP, metavar="HOST", help="with --source prometheus=URL: only this node's GPUs")
CLASS = option("--class", group=SOURCE_GROUP, dest="cls", metavar="CLASS", help="with --source prometheus=URL: only "
               "GPUs of this bottleneck class (idle, input-starved, ...)", check=lambda c: _class_problem(c))
RATE = option("--rate", group=SOURCE_GROUP, type=float, metavar="HZ",  # no default here: SourceSpec's is the one
              help=f"sampling rate, {MIN_RATE_HZ:g} to {MAX_RATE_HZ:g} (default {DEFAULT_RATE_HZ:g} Hz)",
              check=lambda hz: None if MIN_RATE_HZ <= hz <= MAX_RATE_HZ else
              f"--rate must be between {MIN_RATE_HZ:g} and {MAX_RATE_HZ:g} Hz (got {hz:g})")

# -- what a run is and how it is stopped ---------------------------------------------------------------------------
RUN = option("--run", group=MODES_GROUP, nargs="?", const="", metavar="NAME",
             help="run workload NAME; or, with nothing after it but `-- CMD`, your command")
RECORD = option("--record", group=MODES_GROUP, writes=True, metavar="FILE",
                help="record telemetry to FILE (JSON lines; gzip when "
                "FILE ends in .gz); with --run NAME, the run's telemetry with a mark at each phase")
SECONDS = option("--seconds", group=MODES_GROUP, type=float, metavar="N", help="how long to --record or --watch",
                 hint=" (a run stops after S seconds with --timeout S)", check=_above("--seconds"))
DEVICE = option("--device", group=WORKLOAD_GROUP, choices=["cuda", "cpu"], default="cuda",
                help="where the workload runs")
QUICK = option("--quick", group=WORKLOAD_GROUP, action="store_true", help="a few-second version of the workload")
TIMEOUT = option("--timeout", group=WORKLOAD_GROUP, type=float, metavar="S", help="stop the workload after S seconds",
                 check=_above("--timeout"))
GRACE = option("--grace", group=WORKLOAD_GROUP, type=float, metavar="S", check=_above("--grace", equal=True),
               help="after a stop (Ctrl-C, a signal, --timeout), SIGKILL what is left of the run after S seconds "
                    "(default 5; more for a job that saves a checkpoint when interrupted)")

# -- output --------------------------------------------------------------------------------------------------------
JSON = option("--json", group=OUTPUT_GROUP, action="store_true",
              help="one JSON document on stdout (progress on stderr)")
OUTPUT = option("--output", "-o", group=OUTPUT_GROUP, writes=True, metavar="FILE",
                help="also write the JSON document to FILE")
NO_COLOR = option("--no-color", group=OUTPUT_GROUP, action="store_true",
                  help="no colours (NO_COLOR is honoured too)")
VERBOSE = option("-v", "--verbose", group=OUTPUT_GROUP, dest="verbose", action="store_true",
                 help="log NVML fields that are n/a, and why")

# the options every mode takes (the source's, the device, the output's look)
COMMON = (GPU, REPLAY, SPEED, DEMO, RANGE, JOB, NODE, CLASS, RATE, DEVICE, NO_COLOR, VERBOSE)


def _class_problem(name: str) -> str | None:
    from gputop.analysis.cluster import class_problem  # (the classifier is not imported at start-up)

    return class_problem(name)


def check_source(args: argparse.Namespace) -> str | None:
    """The source's own checks (two sources, ``--source``'s spelling, the cluster's filters and ``--range``, which
    it parses into ``args.range_s``); returns ``--source``'s URL, checked, or None. Raises UsageError."""
    if args.replay and args.demo:
        raise UsageError("--replay and --demo are two sources; give one")
    url = None
    if args.source is not None:
        from gputop.telemetry import dcgm, prometheus

        try:
            url = (prometheus if is_cluster(args) else dcgm).url_of(args.source)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.replay or args.demo:
            raise UsageError("--source and --replay/--demo are two sources; give one")
    if (args.range or args.job or args.node or args.cls) and not is_cluster(args):
        raise UsageError("--range, --job, --node and --class go with --source prometheus=URL")
    try:
        args.range_s = parse_duration(args.range, "--range") if args.range else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return url


def is_cluster(args: argparse.Namespace) -> bool:
    """``--source prometheus=URL``: the whole cluster."""
    return (args.source or "").startswith("prometheus=")


def refuse_cluster(args: argparse.Namespace) -> None:
    """For the modes that serve one node's GPUs (``--export``, ``--serve``): the cluster is not a node."""
    if is_cluster(args):
        raise UsageError("--source prometheus=URL opens the cluster page (plain gputop) or, with --once, its document")


def source_spec(args: argparse.Namespace, url: str | None = None):
    """The one place the flags become a :class:`gputop.telemetry.source.SourceSpec` (the source and its rate),
    which is all the layers below the frontends see of the command line. ``url``: ``--source``'s, checked."""
    from gputop.telemetry.source import DCGM_EXPORTER, DEFAULT_RANGE_S, DEMO, LIVE, PROMETHEUS, REPLAY, SourceSpec

    if args.demo:
        kind, path = DEMO, None
    elif args.replay:
        kind, path = REPLAY, args.replay
    elif url:
        kind, path = PROMETHEUS if is_cluster(args) else DCGM_EXPORTER, url
    else:
        kind, path = LIVE, None
    rate = {} if args.rate is None else {"rate_hz": args.rate}  # else SourceSpec's default: the one there is
    return SourceSpec(kind=kind, gpus=tuple(args.gpu or ()), path=path, speed=args.speed, loop=kind == DEMO,
                      range_s=getattr(args, "range_s", None) or DEFAULT_RANGE_S, **rate)
