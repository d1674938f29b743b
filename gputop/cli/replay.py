"""``gputop --replay FILE --json``: the run document of a trace recorded with ``--record``, diagnosed anywhere
(without ``--json``, ``--replay FILE`` plays the trace in the TUI)."""

from __future__ import annotations

from gputop.cli.mode import Mode
from gputop.cli.shared import JSON, REPLAY, SOURCE


def entry(args, command) -> int:
    from gputop.headless.replay import main_replay_json

    return main_replay_json(args.replay, json_mode=args.json)


MODE = Mode("replay", family="--replay", usage="--replay FILE --json", flags=(REPLAY, JSON), options=(SOURCE,),
            given=lambda args, command: bool(args.replay and args.json), entry=entry, usage_lines="""\
  gputop --replay FILE --json     the run document of a trace recorded with --record (per-GPU timelines and
                                  verdicts, the job's GPUs together), diagnosed anywhere
""")
