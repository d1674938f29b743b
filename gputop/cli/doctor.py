"""``gputop --doctor [--quick | --passive] [--json] [-o FILE] [--gpu N ...] [--source prometheus=URL]``: is every GPU of
this node healthy and as fast as its model should be (:mod:`gputop.headless.doctor`)."""

from __future__ import annotations

from gputop.cli.mode import MODES_GROUP, WORKLOAD_GROUP, Mode, UsageError, option
from gputop.cli.shared import JSON, OUTPUT, QUICK, SOURCE, is_cluster

DOCTOR = option("--doctor", group=MODES_GROUP, action="store_true",
                help="is every GPU healthy and as fast as its model? passive checks, then a short load on each GPU "
                     "(--quick, --passive); exit 0 healthy, 7 degraded, 8 failed")
PASSIVE = option("--passive", group=WORKLOAD_GROUP, action="store_true",
                 help="with --doctor: the NVML and kernel-log checks alone (no load, no torch or CuPy needed)")


def check(args, command) -> None:
    if args.replay or args.demo:
        raise UsageError("--doctor checks this machine's GPUs: --replay and --demo do not go with it")
    if args.source is not None and not is_cluster(args):
        raise UsageError("--doctor takes --source prometheus=URL (the fleet's medians to compare with), no other")
    if args.quick and args.passive:
        raise UsageError("--quick and --passive are two kinds of --doctor; give one")


def entry(args, command) -> int:
    from gputop.headless.doctor import DoctorCall, main_doctor

    mode = "passive" if args.passive else "quick" if args.quick else "full"
    url = args.spec.path if args.spec.kind == "prometheus" else None
    return main_doctor(DoctorCall(gpus=tuple(args.gpu or ()), mode=mode, fleet_url=url, json_mode=args.json,
                                  output=args.output))


MODE = Mode("doctor", family="--doctor", usage="--doctor", flags=(DOCTOR,),
            options=(PASSIVE, QUICK, SOURCE, JSON, OUTPUT), check=check, entry=entry,
            usage_lines="  gputop --doctor [--quick]       is every GPU healthy and fast? (--passive; exit 0/7/8)\n")
