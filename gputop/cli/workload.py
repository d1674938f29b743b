"""``gputop --run NAME``: run a workload without the TUI (``--param K=V``, ``--device cpu``, ``--quick``, ``--csv
FILE``, ``--record FILE``, ``--record-run FILE``); a readable summary, or one JSON document."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, WORKLOAD_GROUP, Mode, option
from gputop.cli.shared import GRACE, JSON, OUTPUT, QUICK, RECORD, RUN, TIMEOUT

PARAM = option("--param", group=WORKLOAD_GROUP, action="append", default=[], metavar="K=V",
               help="set a workload parameter")
CSV = option("--csv", group=WORKLOAD_GROUP, writes=True, metavar="FILE", help="also write the result points as CSV")
RECORD_RUN = option("--record-run", group=MODES_GROUP, writes=True, metavar="FILE", hint=" (a workload)",
                    help="with --run NAME: record the whole run (events, telemetry, phases, results) to FILE (as it "
                    "goes; gzip when FILE ends in .gz), to replay in the TUI without a GPU (gputop --demo --recorded "
                    "FILE)")


def entry(args, command) -> int:
    from gputop.headless.workload import WorkloadOptions, main_run

    opts = WorkloadOptions(name=args.run, spec=args.spec, params=tuple(args.param), device=args.device,
                           quick=args.quick, timeout=args.timeout, grace_s=args.grace, csv=args.csv,
                           record=args.record, record_run=args.record_run)
    return main_run(opts, json_mode=args.json, output=args.output, no_color=args.no_color)


MODE = Mode("run", family="--run", usage="--run NAME", flags=(RUN,),
            options=(PARAM, QUICK, TIMEOUT, GRACE, CSV, RECORD, RECORD_RUN, JSON, OUTPUT),
            given=lambda args, command: bool(args.run), entry=entry, usage_lines="""\
  gputop --run NAME [--json]      run a workload (--param k=v, --device cpu, --quick, --csv FILE)
  gputop --run NAME --record-run FILE   record a whole workload run, to replay without a GPU (--recorded FILE)
""")
