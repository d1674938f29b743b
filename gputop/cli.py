"""The ``gputop`` command line: one parser, then dispatch to the module that does the work.

Exit codes are in :mod:`gputop.exitcodes` (and README.md). Bad input is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys

import gputop
from gputop import exitcodes
from gputop.option_values import AddressError, opens_live_monitor, parse_address, parse_duration  # noqa: F401
from gputop.telemetry.sampler import DEFAULT_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ

EPILOG = """\
modes:
  gputop                          the live monitor (Textual TUI); --demo or --replay FILE without a GPU
  gputop --once [--json]          one snapshot of every GPU: static facts, peaks, one sample
  gputop --record FILE            record telemetry as JSON lines (--seconds N, --rate HZ)
  gputop --run NAME --record-run FILE   record a whole workload run, to replay without a GPU (--recorded FILE)
  gputop --list [--json]          the workloads and their parameters
  gputop --run NAME [--json]      run a workload (--param k=v, --device cpu, --quick, --csv FILE)
  gputop --run -- CMD ARGS...     run your own command and diagnose its GPU bottlenecks
  gputop --run --profile -- CMD   the same, and which kernels/ops (torch.profiler windows in a Python command)
  gputop --watch PID              diagnose a process that is already running
  gputop --tui --run -- CMD ...   the same, live in the TUI (also --tui --watch PID)
  gputop --replay FILE --json     the run document of a trace recorded with --record (per-GPU timelines and
                                  verdicts, the job's GPUs together), diagnosed anywhere
  gputop --export [HOST:]PORT     Prometheus metrics (dcgm-exporter's names) at 127.0.0.1:9400 by default
  gputop --serve [HOST:]PORT      the TUI in a browser (127.0.0.1:8000 by default; read-only unless --serve-control)
  gputop --tour                   a presenter's tour of the workloads: n steps to the next one
  gputop --source prometheus=URL  the cluster page: every GPU's bottleneck and each job's GPU-hours by class
                                  (--once [--json]: its document; --range 24h; --job J, --node N, --class C;
                                  secrets: docs/fleet.md)

exit codes: 0 ok; 1 failed (partial results written); 2 bad usage or input; 3 no GPU / no NVML;
4 missing dependency; 5 workload crashed; 6 timeout; 128+N stopped by signal N (130 SIGINT,
143 SIGTERM, 129 SIGHUP; a partial document is still written). --run -- CMD: the command's code.
"""


class _Parser(argparse.ArgumentParser):
    json_document: tuple | None = None  # (mode, workload, command) of a --json command line: its error document

    def error(self, message: str):  # one line, exit 2; with --json, the mode's error document on stdout too
        text = f"{message} (see gputop --help)"
        if self.json_document is not None:
            from gputop.documents import emit, usage_error_document

            mode, workload, command = self.json_document
            doc = usage_error_document(mode, text, workload=workload, command=command)
            if doc is not None:
                emit(doc, json_mode=True)
        self.exit(exitcodes.USAGE, f"gputop: {text}\n")


def json_document_of(argv: list[str], command: list[str]) -> tuple | None:
    """(mode, workload, command) of a command line that asks for ``--json``, read from its words before they are
    parsed (so that a refused one still gets its mode's error document); None without ``--json``."""
    if "--json" not in argv:
        return None
    for i, word in enumerate(argv):
        if word == "--once":
            return "once", None, None
        if word == "--watch":
            return "watch", None, None
        if word == "--run" or word.startswith("--run="):
            name = word.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-")
                                              else "")
            return ("run", name, None) if name or not command else ("run-command", None, command)
    return None


# What each option goes with: the modes (see mode_of) where it means something. Any other use is a usage error.
DOCUMENT_MODES = ("once", "run", "run-command", "watch")  # the modes that write one JSON document (-o, --json)
GOES_WITH = [  # (option, its attribute, the modes it goes with, the same in words)
    ("--json", "json", DOCUMENT_MODES + ("list", "replay"), "--once, --list, --run or --watch"),
    ("--output", "output", DOCUMENT_MODES, "--once, --run or --watch"),
    ("--seconds", "seconds", ("record", "watch"),
     "--record FILE or --watch PID (a run stops after S seconds with --timeout S)"),
    ("--csv", "csv", ("run",), "--run NAME"),
    ("--param", "param", ("run",), "--run NAME"),
    ("--log", "log", ("run-command",), "--run -- CMD"),
    ("--recorded", "recorded", ("tui",), "the TUI (plain gputop, --demo, --tour or --serve)"),
    ("--quick", "quick", ("run", "tui"), "--run NAME or the TUI"),
    ("--timeout", "timeout", ("run", "run-command", "tui"), "--run or the TUI"),
    ("--grace", "grace", ("run", "run-command", "tui"), "--run or the TUI"),
]


def mode_of(args: argparse.Namespace, command: list[str]) -> str:
    """The mode a command line runs: list, export, run-command, watch, run, record, once, replay (``--replay FILE
    --json``, whose document is a run's) or tui (the Textual TUI: plain gputop, --demo, --replay, --tour, and
    --serve, whose options go to the TUI each browser session runs)."""
    if args.list:
        return "list"
    if args.run == "" and command:
        return "run-command"
    if args.export is not None:
        return "export"
    if args.serve is not None:
        return "tui"
    if args.watch is not None:
        return "watch"
    if args.run:
        return "run"
    if args.record:
        return "record"
    if args.once:
        return "once"
    return "replay" if args.replay and args.json else "tui"


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="gputop", description=gputop.__doc__, epilog=EPILOG,
                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"gputop {gputop.__version__}")
    src = ap.add_argument_group("data source")
    src.add_argument("--gpu", type=int, action="append", metavar="N",
                     help="NVML index of a GPU to show or use (repeatable; default all / 0 for --run)")
    src.add_argument("--replay", metavar="FILE", help="play back a recorded trace instead of live NVML")
    src.add_argument("--speed", type=float, default=1.0, metavar="X", help="replay speed (default 1.0)")
    src.add_argument("--demo", action="store_true", help="replay the real trace that ships with gputop")
    src.add_argument("--source", metavar="dcgm-exporter=URL",
                     help="read a running dcgm-exporter's /metrics instead of NVML/GPM (the monitor and --once); "
                     "prometheus=URL: the whole cluster from a Prometheus server (the cluster page, or --once)")
    src.add_argument("--range", metavar="DURATION", help="with --source prometheus=URL: the job accounting's range "
                     "(90s, 30m, 1h, 24h, 7d; default 1h)")
    src.add_argument("--job", metavar="JOB", help="with --source prometheus=URL: only this job's GPUs")
    src.add_argument("--node", metavar="HOST", help="with --source prometheus=URL: only this node's GPUs")
    src.add_argument("--class", dest="cls", metavar="CLASS", help="with --source prometheus=URL: only GPUs of "
                     "this bottleneck class (idle, input-starved, ...)")
    src.add_argument("--rate", type=float, default=DEFAULT_RATE_HZ, metavar="HZ",
                     help=f"sampling rate, {MIN_RATE_HZ:g} to {MAX_RATE_HZ:g} (default {DEFAULT_RATE_HZ:g} Hz)")
    modes = ap.add_argument_group("modes")
    modes.add_argument("--once", action="store_true", help="print one snapshot and exit")
    modes.add_argument("--record", metavar="FILE", help="record telemetry to FILE (JSON lines; gzip when FILE ends "
                       "in .gz); with --run NAME, the run's telemetry with a mark at each phase")
    modes.add_argument("--record-run", metavar="FILE",
                       help="with --run NAME: record the whole run (events, telemetry, phases, results) to FILE "
                       "(as it goes; gzip when FILE ends in .gz), to replay in the TUI without a GPU "
                       "(gputop --demo --recorded FILE)")
    modes.add_argument("--recorded", action="append", metavar="FILE",
                       help="offer a recorded run (from --record-run) on the workloads page (repeatable; the "
                       "recordings that ship with gputop are offered where there is no GPU)")
    modes.add_argument("--seconds", type=float, metavar="N", help="how long to --record or --watch")
    modes.add_argument("--list", action="store_true", help="list the workloads")
    modes.add_argument("--run", nargs="?", const="", metavar="NAME",
                       help="run workload NAME; or, with nothing after it but `-- CMD`, your command")
    modes.add_argument("--watch", type=int, metavar="PID", help="diagnose a running process")
    modes.add_argument("--export", nargs="?", const="127.0.0.1:9400", metavar="[HOST:]PORT",
                       help="serve Prometheus metrics until stopped (default 127.0.0.1:9400; 0.0.0.0:PORT for all "
                       "interfaces); --job-map DIR, --export-cmdline")
    modes.add_argument("--serve", nargs="?", const="127.0.0.1:8000", metavar="[HOST:]PORT",
                       help="serve the TUI to web browsers (textual-serve; default 127.0.0.1:8000, 0.0.0.0:PORT for all "
                       "interfaces); read-only unless --serve-control")
    modes.add_argument("--serve-control", action="store_true",
                       help="with --serve: browsers may run, cancel and save workloads")
    modes.add_argument("--served", action="store_true", help=argparse.SUPPRESS)  # the TUI textual-serve runs
    modes.add_argument("--tour", action="store_true",
                       help="the TUI as a presenter's tour of the workloads (n: next stop); with --demo, the recorded runs")
    modes.add_argument("--job-map", metavar="DIR", help="with --export: dcgm-exporter's HPC job mapping directory")
    modes.add_argument("--export-cmdline", action="store_true",
                       help="with --export: processes' command lines as a label (they may hold secrets)")
    run = ap.add_argument_group("workload options")
    run.add_argument("--param", action="append", default=[], metavar="K=V", help="set a workload parameter")
    run.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="where the workload runs")
    run.add_argument("--quick", action="store_true", help="a few-second version of the workload")
    run.add_argument("--timeout", type=float, metavar="S", help="stop the workload after S seconds")
    run.add_argument("--grace", type=float, metavar="S",
                     help="after a stop (Ctrl-C, a signal, --timeout), SIGKILL what is left of the run after S seconds "
                          "(default 5; more for a job that saves a checkpoint when interrupted)")
    run.add_argument("--csv", metavar="FILE", help="also write the result points as CSV")
    run.add_argument("--log", metavar="FILE", help="with --run -- CMD: send the command's output to FILE")
    run.add_argument("--profile", action="store_true",
                     help="with --run -- CMD (Python): record short torch.profiler windows in the command (CUPTI "
                          "windows through cupti-python without torch) and attribute its GPU time to kernels and ops")
    run.add_argument("--profile-seconds", type=float, metavar="S", help="with --profile: each window's length (default 3)")
    run.add_argument("--profile-steps", type=int, metavar="N", help="with --profile: a window also ends after N "
                     "steps: optimizer steps, or 10 times as many of inference's forward passes (default 10; 0: seconds only)")
    out = ap.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="one JSON document on stdout (progress on stderr)")
    out.add_argument("--output", "-o", metavar="FILE", help="also write the JSON document to FILE")
    out.add_argument("--tui", action="store_true", help="with --run -- CMD or --watch PID: show it live in the TUI")
    out.add_argument("--no-color", action="store_true", help="no colours (NO_COLOR is honoured too)")
    out.add_argument("-v", "--verbose", action="store_true", help="log NVML fields that are n/a, and why")
    return ap


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """gputop's own flags go before ``--``; everything after it is the user's command."""
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = build_parser()
    ap.json_document = json_document_of(argv, command)
    args = ap.parse_args(argv)
    args.command = command
    if command and args.run not in ("",) and args.watch is None:
        ap.error("a command after `--` goes with `--run` and no workload name: gputop --run -- CMD ...")
    if args.run == "" and not command:
        ap.error("--run needs a workload NAME (see gputop --list) or `-- CMD ...`")
    if args.tui and not (command or args.watch is not None):
        ap.error("--tui goes with --run -- CMD or --watch PID (plain gputop opens the TUI)")
    if args.export is not None and (args.once or args.record or args.list or args.run not in (None, "")
                                    or args.watch is not None or args.tui):
        ap.error("--export is a mode of its own (with --demo, --replay FILE, --gpu N, --rate HZ), or beside "
                 "--run [--profile] -- CMD")
    if args.serve is not None and (args.once or args.record or args.list or args.run is not None
                                   or args.watch is not None or args.tui or args.export is not None):
        ap.error("--serve is a mode of its own (with --demo, --replay FILE, --gpu N, --rate HZ, --tour)")
    if args.serve_control and args.serve is None and not args.served:
        ap.error("--serve-control goes with --serve")
    if args.tour and (args.once or args.record or args.list or args.run is not None or args.watch is not None
                      or args.tui or args.export is not None):
        ap.error("--tour is the TUI's (plain gputop, --demo, --replay FILE or --serve)")
    if args.record_run and not args.run:
        ap.error("--record-run goes with --run NAME (a workload)")
    if (args.job_map or args.export_cmdline) and args.export is None:
        ap.error("--job-map and --export-cmdline go with --export")
    if args.replay and args.demo:
        ap.error("--replay and --demo are two sources; give one")
    modes = [flag for flag, given in (("--list", args.list), ("--once", args.once), ("--record", args.record),
                                      ("--run", args.run is not None), ("--watch", args.watch is not None))
             if given]
    if "--record" in modes and ("--run" in modes or "--watch" in modes):
        modes.remove("--record")  # --record FILE with --run / --watch: that run's telemetry too
    if len(modes) > 1:
        ap.error(f"{modes[0]} and {modes[1]} are two modes; give one")
    mode = mode_of(args, command)
    if args.profile and args.watch is not None:
        ap.error("--profile: gputop cannot give a loader to a process it did not start (--watch PID); "
                 "run it under gputop: gputop --run --profile -- CMD")
    if args.profile and mode != "run-command":
        ap.error("--profile goes with --run -- CMD (and --tui --run -- CMD)")
    for flag, value, least in (("--profile-seconds", args.profile_seconds, 1e-9),
                               ("--profile-steps", args.profile_steps, 0)):
        if value is not None and not (args.profile and value >= least):
            ap.error(f"{flag} goes with --profile and must be {'> 0' if least else '>= 0'}")
    for flag, attr, modes_ok, words in GOES_WITH:
        if getattr(args, attr) and mode not in modes_ok:
            ap.error(f"{flag} goes with {words}")
    if args.tui and (args.json or args.output):
        ap.error("--tui shows the run; --json and --output write its document without the TUI")
    if mode == "record" and (args.replay or args.demo):
        ap.error("--record records live NVML; it does not take --replay or --demo")
    if args.recorded:  # before the TUI (or --serve, whose sessions would each fail) starts
        from gputop.telemetry.errors import BadSource
        from gputop.tui.config import check_recordings

        try:
            check_recordings(args.recorded)
        except BadSource as exc:
            ap.error(str(exc))
    for flag in ("export", "serve"):  # (host, port) as args.export_address / args.serve_address
        text = getattr(args, flag)
        try:
            setattr(args, flag + "_address", parse_address(text, "--" + flag) if text is not None else None)
        except AddressError as exc:
            ap.error(str(exc))
    url = None
    prometheus = (args.source or "").startswith("prometheus=")
    if args.source is not None:
        from gputop.telemetry import dcgm, prometheus as prom

        try:
            url = (prom if prometheus else dcgm).url_of(args.source)
        except ValueError as exc:
            ap.error(str(exc))
        if args.replay or args.demo:
            ap.error("--source and --replay/--demo are two sources; give one")
        if args.run is not None or args.watch is not None or args.record:
            ap.error("--source dcgm-exporter=URL goes with the monitor (plain gputop) or --once")
        if prometheus and not args.once and (args.serve is not None or args.export is not None or args.tui):
            ap.error("--source prometheus=URL opens the cluster page (plain gputop) or, with --once, its document")
    if (args.range or args.job or args.node or args.cls) and not prometheus:
        ap.error("--range, --job, --node and --class go with --source prometheus=URL")
    try:
        args.range_s = parse_duration(args.range, "--range") if args.range else None
    except ValueError as exc:
        ap.error(str(exc))
    if args.gpu and any(g < 0 for g in args.gpu):
        ap.error("--gpu takes an NVML index >= 0")
    if not MIN_RATE_HZ <= args.rate <= MAX_RATE_HZ:
        ap.error(f"--rate must be between {MIN_RATE_HZ:g} and {MAX_RATE_HZ:g} Hz (got {args.rate:g})")
    if not args.speed > 0:
        ap.error(f"--speed must be > 0 (got {args.speed})")
    if args.seconds is not None and not args.seconds > 0:
        ap.error(f"--seconds must be > 0 (got {args.seconds})")
    if args.timeout is not None and not args.timeout > 0:
        ap.error(f"--timeout must be > 0 (got {args.timeout})")
    if args.grace is not None and not args.grace >= 0:
        ap.error(f"--grace must be >= 0 (got {args.grace})")
    args.spec = source_spec(args, url)
    return args, command


def source_spec(args: argparse.Namespace, url: str | None = None):
    """The one place the flags become a :class:`gputop.telemetry.source.SourceSpec` (the source and its rate),
    which is all the layers below the frontends see of the command line. ``url``: ``--source``'s, checked."""
    from gputop.telemetry.source import DCGM_EXPORTER, DEFAULT_RANGE_S, DEMO, LIVE, PROMETHEUS, REPLAY, SourceSpec

    if args.demo:
        kind, path = DEMO, None
    elif args.replay:
        kind, path = REPLAY, args.replay
    elif url:
        kind, path = PROMETHEUS if args.source.startswith("prometheus=") else DCGM_EXPORTER, url
    else:
        kind, path = LIVE, None
    return SourceSpec(kind=kind, gpus=tuple(args.gpu or ()), path=path, speed=args.speed, loop=kind == DEMO,
                      rate_hz=args.rate, range_s=getattr(args, "range_s", None) or DEFAULT_RANGE_S)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if opens_live_monitor(argv):
        from gputop.telemetry import nvml_early  # NVML's init and the static facts, while the rest starts up

        nvml_early.start()
    args, command = parse(argv)
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="gputop: %(message)s")
    try:
        if args.list:
            from gputop.headless.listing import main_list

            return main_list(args)
        if args.export is not None and not command:
            from gputop.export.server import main_export

            return main_export(args)
        if args.serve is not None:
            from gputop.tui.serve import main_serve

            return main_serve(args)
        if args.tui:
            from gputop.tui.command import main_command_tui

            return main_command_tui(args, command)
        if args.run == "" and command:
            from gputop.headless.command import main_command

            if args.export is not None:  # --export beside the run: its series while it runs
                from gputop.export.server import serve_session

                return main_command(args, command, serve=serve_session)
            return main_command(args, command)
        if args.watch is not None:
            from gputop.headless.command import main_watch

            return main_watch(args)
        if args.run:
            from gputop.headless.workload import main_run

            return main_run(args)
        if args.record:
            from gputop.headless.snapshot import main_record

            return main_record(args)
        if args.once and args.spec.kind == "prometheus":  # telemetry.source.PROMETHEUS (not imported at start-up)
            from gputop.headless.cluster import main_cluster

            return main_cluster(args)
        if args.spec.kind == "prometheus":  # the cluster page (an App of its own)
            from gputop.tui.cluster import main_cluster_tui

            return main_cluster_tui(args)
        if args.once:
            from gputop.headless.snapshot import main_once

            return main_once(args)
        if args.replay and args.json:  # a recorded trace's run document, as --run prints it live
            from gputop.headless.replay import main_replay_json

            return main_replay_json(args)
        from gputop.tui import main_tui

        return main_tui(args)
    except KeyboardInterrupt:  # a Ctrl-C outside a run (the runs handle their own signals)
        exitcodes.say("interrupted")
        return exitcodes.INTERRUPTED
    except BrokenPipeError:  # stdout closed under us (gputop --once | head)
        from gputop.documents import silence_stdout

        exitcodes.say("cannot write to stdout (closed); output lost")
        silence_stdout()
        return exitcodes.FAILED
