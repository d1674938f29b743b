"""``gputop --once [--json] [-o FILE]``: one snapshot of every GPU; with ``--source prometheus=URL``, the cluster's
document."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, Mode, option
from gputop.cli.shared import JSON, OUTPUT, SOURCE, is_cluster

ONCE = option("--once", group=MODES_GROUP, action="store_true", help="print one snapshot and exit")


def entry(args, command) -> int:
    if is_cluster(args):
        from gputop.headless.cluster import main_cluster

        return main_cluster(args.spec, job=args.job, node=args.node, cls=args.cls, json_mode=args.json,
                            output=args.output)
    from gputop.headless.snapshot import main_once

    return main_once(args.spec, json_mode=args.json, output=args.output)


MODE = Mode("once", family="--once", usage="--once", flags=(ONCE,), options=(SOURCE, JSON, OUTPUT), entry=entry,
            usage_lines="  gputop --once [--json]          one snapshot of every GPU: static facts, peaks, one sample\n")
