"""Write tests/data/traces/culprit/hang_idle_stacks.jsonl.gz: a recorded run whose culprit was named while it ran.

Its telemetry is corpus_multi_h100x2/hang_idle.jsonl.gz (2 H100s: rank 1 stops and runs nothing while GPU 0 waits in
the all-reduce), played through gputop's run monitor (culprit=True) tick by tick; its process lists name the ranks
of a real 2-rank gloo job on this CPU (tests/fault_jobs/gloo_job.py sleep: rank 0 sleeps outside the loop, rank 1
waits in all_reduce; GPU 1, which ran nothing, is given the sleeping rank), whose real stacks py-spy read while
GPU 0 stalled: the ``stacks`` rows are what a live run writes. So the replay, the TUI and --export of this trace
name rank 0, its pid and its line without a GPU, py-spy or torch. Run (needs torch and py-spy):

    PYTHONPATH=. python tests/data/make_culprit_trace.py
"""

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from test_culprit_run import played_run  # noqa: E402
from test_rank_stacks import Job, ranks_of  # noqa: E402

OUT = HERE / "traces" / "culprit" / "hang_idle_stacks.jsonl.gz"


def main() -> None:
    job = Job("sleep")
    try:
        ranks_of(job, {0: "time.sleep", 1: "dist.all_reduce"})
        with tempfile.TemporaryDirectory() as d:
            plain = str(Path(d) / "run.jsonl")
            played_run({0: job.pids[1], 1: job.pids[0]}, plain)
            with open(plain, "rb") as src, gzip.open(OUT, "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
    finally:
        job.close()
    print(OUT, OUT.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
