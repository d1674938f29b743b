"""The TUI: plain ``gputop`` (the live monitor), ``--demo``, ``--replay FILE``, ``--tour``, ``--recorded FILE``; with
``--source prometheus=URL``, the cluster page. Also what each browser session of ``--serve`` runs (``--served``)."""

from __future__ import annotations

import argparse

from gputop.cli.mode import MODES_GROUP, Mode, UsageError, option
from gputop.cli.shared import GRACE, QUICK, SOURCE, TIMEOUT, is_cluster

TOUR = option("--tour", group=MODES_GROUP, action="store_true",
              refused="--tour is the TUI's (plain gputop, --demo, --replay FILE or --serve)",
              help="the TUI as a presenter's tour of the workloads (n: next stop); with --demo, the recorded runs")
RECORDED = option("--recorded", group=MODES_GROUP, reads=True, action="append", metavar="FILE",
                  hint=" (plain gputop, --demo, --tour or --serve)",
                  help="offer a recorded run (from --record-run) on the workloads page (repeatable; the recordings "
                  "that ship with gputop are offered where there is no GPU)")
SERVE_CONTROL = option("--serve-control", group=MODES_GROUP, action="store_true",
                       refused="--serve-control goes with --serve",
                       help="with --serve: browsers may run, cancel and save workloads")
SERVED = option("--served", group=MODES_GROUP, action="store_true", help=argparse.SUPPRESS)  # a browser's session


def check_recordings(args) -> None:
    """Each ``--recorded FILE`` is a recorded run, before the TUI (or --serve, whose sessions would each fail)
    starts."""
    if args.recorded:
        from gputop.telemetry.errors import BadSource
        from gputop.tui.config import check_recordings as check

        try:
            check(args.recorded)
        except BadSource as exc:
            raise UsageError(str(exc)) from None


def refuse_stdin(args) -> None:
    """``--replay -`` reads the trace on stdin, where the TUI reads its keys (and each of --serve's browser sessions
    would read it again)."""
    from gputop.telemetry.trace_file import is_stdin

    if args.replay is not None and is_stdin(args.replay):
        raise UsageError(f"--replay {args.replay} reads the trace from stdin: it goes with --json, --once or --export "
                         "(the TUI reads its keys there); name the file to replay it in the TUI")


def check(args, command) -> None:
    if args.serve_control and not args.served:
        raise UsageError(SERVE_CONTROL.refused)
    refuse_stdin(args)
    check_recordings(args)


def entry(args, command) -> int:
    if is_cluster(args):  # the cluster page (an App of its own)
        from gputop.tui.cluster import main_cluster_tui

        return main_cluster_tui(args)
    from gputop.tui import main_tui

    return main_tui(args)


MODE = Mode("tui", family="the TUI", usage="the TUI", given=lambda args, command: True,
            options=(TOUR, RECORDED, QUICK, TIMEOUT, GRACE, SERVED, SERVE_CONTROL, SOURCE), check=check, entry=entry,
            usage_lines="""\
  gputop                          the live monitor (Textual TUI); --demo or --replay FILE without a GPU
  gputop --tour                   a presenter's tour of the workloads: n steps to the next one
  gputop --source prometheus=URL  the cluster page: every GPU's bottleneck and each job's GPU-hours by class
                                  (--once [--json]: its document; --range 24h; --job J, --node N, --class C;
                                  secrets: docs/fleet.md)
""")
