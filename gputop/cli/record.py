"""``gputop --record FILE [--seconds N]``: this machine's GPUs recorded as a trace. (``--record FILE`` beside
``--run`` or ``--watch`` is their option: that run's telemetry.)"""

from __future__ import annotations

from gputop.cli.mode import Mode, UsageError
from gputop.cli.shared import RECORD, SECONDS


def given(args, command) -> bool:
    return bool(args.record) and args.run is None and args.watch is None


def check(args, command) -> None:
    if args.replay or args.demo:
        raise UsageError("--record records live NVML; it does not take --replay or --demo")


def entry(args, command) -> int:
    from gputop.headless.snapshot import main_record

    return main_record(args.spec, args.record, seconds=args.seconds)


MODE = Mode("record", family="--record", usage="--record FILE", flags=(RECORD,), options=(SECONDS,), given=given,
            check=check, entry=entry,
            usage_lines="  gputop --record FILE            record telemetry as JSON lines (--seconds N, --rate HZ)\n")
