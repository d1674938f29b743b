"""``gputop --serve [HOST:]PORT``: the TUI in a browser (read-only unless ``--serve-control``); each browser session
runs the TUI with the source and TUI options given here (:func:`gputop.tui.serve.child_command`)."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, Mode, UsageError, option
from gputop.cli.shared import GRACE, QUICK, SOURCE, TIMEOUT, refuse_cluster
from gputop.cli.tui import RECORDED, SERVE_CONTROL, TOUR, check_recordings, refuse_stdin
from gputop.option_values import AddressError, parse_address

SERVE = option("--serve", group=MODES_GROUP, nargs="?", const="127.0.0.1:8000", metavar="[HOST:]PORT",
               help="serve the TUI to web browsers (textual-serve; default 127.0.0.1:8000, 0.0.0.0:PORT for all "
               "interfaces); read-only unless --serve-control")


def check(args, command) -> None:
    refuse_stdin(args)
    check_recordings(args)
    try:  # (host, port), parsed once
        args.serve_address = parse_address(args.serve, "--serve")
    except AddressError as exc:
        raise UsageError(str(exc)) from None
    refuse_cluster(args)


def entry(args, command) -> int:
    from gputop.tui.serve import main_serve

    return main_serve(args)


MODE = Mode("serve", family="the TUI", usage="--serve", flags=(SERVE,),
            options=(SERVE_CONTROL, TOUR, RECORDED, QUICK, TIMEOUT, GRACE, SOURCE), check=check, entry=entry,
            alone="--serve is a mode of its own (with --demo, --replay FILE, --gpu N, --rate HZ, --tour)",
            usage_lines="  gputop --serve [HOST:]PORT      the TUI in a browser (127.0.0.1:8000 by default; read-only "
            "unless --serve-control)\n")
