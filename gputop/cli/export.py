"""``gputop --export [HOST:]PORT``: Prometheus metrics (dcgm-exporter's names) until stopped; also beside
``--run [--profile] -- CMD`` (:mod:`gputop.cli.command`), where it serves that run's GPUs."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, Mode, UsageError, option
from gputop.cli.shared import SOURCE, refuse_cluster
from gputop.option_values import AddressError, parse_address

EXPORT = option("--export", group=MODES_GROUP, nargs="?", const="127.0.0.1:9400", metavar="[HOST:]PORT",
                help="serve Prometheus metrics until stopped (default 127.0.0.1:9400; 0.0.0.0:PORT for all "
                "interfaces); --job-map DIR, --export-cmdline")
BESIDE = "--job-map and --export-cmdline go with --export"
JOB_MAP = option("--job-map", group=MODES_GROUP, metavar="DIR", refused=BESIDE,
                 help="with --export: dcgm-exporter's HPC job mapping directory")
EXPORT_CMDLINE = option("--export-cmdline", group=MODES_GROUP, action="store_true", refused=BESIDE,
                        help="with --export: processes' command lines as a label (they may hold secrets)")
ALONE = ("--export is a mode of its own (with --demo, --replay FILE, --gpu N, --rate HZ), or beside "
         "--run [--profile] -- CMD")


def check_address(args) -> None:
    """``--export``'s address, parsed once: ``args.export_address`` (host, port)."""
    try:
        args.export_address = parse_address(args.export, "--export") if args.export is not None else None
    except AddressError as exc:
        raise UsageError(str(exc)) from None


def check(args, command) -> None:
    check_address(args)
    refuse_cluster(args)


def entry(args, command) -> int:
    from gputop.export.server import main_export

    return main_export(args)


MODE = Mode("export", family="--export", usage="--export", flags=(EXPORT,), options=(JOB_MAP, EXPORT_CMDLINE, SOURCE),
            check=check, alone=ALONE, entry=entry, usage_lines="  gputop --export [HOST:]PORT     Prometheus "
            "metrics (dcgm-exporter's names) at 127.0.0.1:9400 by default\n")
