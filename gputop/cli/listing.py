"""``gputop --list [--json]``: the workloads and their parameters."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, Mode, option
from gputop.cli.shared import JSON, SOURCE

LIST = option("--list", group=MODES_GROUP, action="store_true", help="list the workloads")


def entry(args, command) -> int:
    from gputop.headless.listing import main_list

    return main_list(json_mode=args.json)


MODE = Mode("list", family="--list", usage="--list", flags=(LIST,), options=(SOURCE, JSON), entry=entry,
            usage_lines="  gputop --list [--json]          the workloads and their parameters\n")
