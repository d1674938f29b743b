"""``gputop --tui --run -- CMD`` / ``--tui --watch PID``: the TUI on a command, with real child processes.

The GPU side is the real trace of a bf16 matmul run (tests/data/traces), replayed at full speed by the
Monitor's sampler; the command is a real Python child (sleeps, exits with a code, ignores SIGINT).
"""

from __future__ import annotations

import os
import signal
import subprocess
import json
import sys
from pathlib import Path

import pytest

from gputop import exitcodes
from gputop.session.command import Session
from gputop.session.monitor import Monitor
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.trace import ReplaySource
from gputop.tui.app import GputopApp, TuiConfig
from gputop.tui.command import make_command_app
from gputop.tui.command.panel import status_lines
from gputop.tui.model import TAG_RUN, TAG_WATCH, view
import loader_util
from pilot_util import sync, wait_for, wait_screen

TRACE = Path(__file__).parent / "data" / "traces" / "matmul_bf16.compute-bound.jsonl.gz"
TRACE_PID = 589  # the traced command's pid in the trace's NVML process lists
PY = sys.executable


def command_app(tmp_path, code: str, tree=None, grace_s: float = 5.0, on_gpu: bool = False, profile=None,
                argv=()) -> GputopApp:
    src = ReplaySource(str(TRACE), speed=float("inf"))
    if on_gpu:  # end the replay at a tick where NVML lists the traced command on the GPU
        src.ticks = src.ticks[:max(i for i, t in enumerate(src.ticks) if t["gpus"][0].get("processes")) + 1]
    session = Session(Monitor(src, tree=tree), [PY, "-c", code, *argv], log=str(tmp_path / "cmd.log"),
                      grace_s=grace_s, profile=profile).start()
    return make_command_app(TuiConfig(src, hostname="test-host", specs=[], device="cpu"), session)


@sync
async def test_status_timeline_and_exit_code(tmp_path):
    go = tmp_path / "go"  # the command runs until the test has seen it running (no timing race)
    code = (f"import os, sys, time; print('hello from the command', flush=True)\n"
            f"t = time.time()\nwhile not os.path.exists({str(go)!r}) and time.time() - t < 60: time.sleep(0.05)\n"
            f"sys.exit(3)")
    app = command_app(tmp_path, code)
    s = app.lifecycle.session
    async with app.run_test(size=(160, 48)) as pilot:
        # the timeline is recomputed every 2 s: wait for one made after the replay reached the matmul
        def matmul_in_timeline():
            segs = [seg for g in (app.lifecycle.analysis or {}).get("gpus", []) for seg in g["timeline"]]
            return any(seg["class"] == "compute-bound" for seg in segs)

        await wait_for(pilot, matmul_in_timeline)
        text = await wait_screen(pilot, lambda t: "compute-bound (tensor cores)" in t.partition("timeline, GPU 0")[2])
        # the status line names the program, not its path (wherever the interpreter lives, the command's words fit)
        assert f"`{Path(PY).name} -c" in text and f"pid {s.pid}" in text and "running" in text
        assert "flush=True)\\nt = time.time()" in text  # the script's newlines shown, the screen kept to its rows
        assert len(text.split("\n")) == 48
        assert f"output: {tmp_path / 'cmd.log'}" in text
        go.write_text("")
        await wait_screen(pilot, "exited with code 3")
        # the final timeline, its verdict line (the panel grows by it at the next layout) and the status line's
        # "sampling stopped" come in frames of their own: wait for all three
        await wait_screen(pilot, ("final timeline", "sampling stopped", "verdict: compute-bound"))
        assert app.is_running  # the TUI stays open after the command exits
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_value == 3  # the command's
    assert s.doc["exit_code"] == 3 and s.doc["ended"] == "exited" and s.doc["mode"] == "run"
    assert [seg["class"] for seg in s.doc["gpus"][0]["timeline"]][-1] == "compute-bound"
    assert "hello from the command" in (tmp_path / "cmd.log").read_text()


@sync
async def test_the_commands_processes_are_tagged_and_diagnosed(tmp_path):
    # the trace's pid stands in for the child's tree, so the GPU is found by NVML's process list
    app = command_app(tmp_path, "import time; time.sleep(30)", tree=lambda: {TRACE_PID}, on_gpu=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_screen(pilot, "found by process list")
        app.frame(force=True)
        await wait_screen(pilot, (f"{TRACE_PID}", TAG_RUN))
        assert app.model.watched_pid() == app.lifecycle.session.pid
        assert app.monitor.verdict is not None
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.lifecycle.session.child.done


@sync
async def test_q_while_running_stops_the_command(tmp_path):
    # it says "ready" once past Python's start-up, where a SIGINT would end it with 1 rather than 130
    app = command_app(tmp_path, "import time; print('ready', flush=True); time.sleep(60)", grace_s=60)
    child = app.lifecycle.session.child
    log = tmp_path / "cmd.log"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "ready" in log.read_text())
        await wait_screen(pilot, "running")
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert child.done and child.returncode == -signal.SIGINT
    assert app.return_value == 128 + signal.SIGINT  # Python ends on the SIGINT
    assert app.lifecycle.session.doc["ended"] == "interrupted"


@sync
@pytest.mark.slow
async def test_q_kills_a_command_that_ignores_sigint(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    app = command_app(tmp_path, code, grace_s=0.5)
    log = tmp_path / "cmd.log"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: log.exists() and "ready" in log.read_text())
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_value == 128 + signal.SIGKILL


@sync
async def test_watch_a_running_process(tmp_path):
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        src = ReplaySource(str(TRACE), speed=float("inf"))
        session = Session(Monitor(src, active_ok=True), pid=proc.pid).start()
        app = make_command_app(TuiConfig(src, hostname="test-host", specs=[], device="cpu"), session)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_screen(pilot, ("timeline, GPU 0", f"watching pid {proc.pid}", "running"))
            assert app.model.tagged_pids() == {proc.pid: TAG_WATCH}
            await pilot.press("q")
            await wait_for(pilot, lambda: app.return_code is not None)
        assert app.return_value == exitcodes.OK
        assert proc.poll() is None  # q leaves a watched process running
        assert session.doc["mode"] == "watch" and session.doc["ended"] == "interrupted"
    finally:
        proc.kill()
        proc.wait()


@sync
async def test_watch_sees_the_process_exit(tmp_path):
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    src = ReplaySource(str(TRACE), speed=float("inf"))
    session = Session(Monitor(src, active_ok=True), pid=proc.pid).start()
    app = make_command_app(TuiConfig(src, hostname="test-host", specs=[], device="cpu"), session)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_screen(pilot, "running")
        proc.terminate()
        proc.wait()
        await wait_screen(pilot, ("final timeline", f"watching pid {proc.pid}", "exited"))
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_value == exitcodes.OK and session.doc["ended"] == "exited"


def test_the_status_line_names_the_program_not_the_folder_it_lives_in():
    """An interpreter in a venv under a long path (a clone in /tmp/tmp.XXXXXXXXXX/p) must not push the command's own
    words off the status line: the program shows by its name."""
    import time
    from types import SimpleNamespace

    where = "/tmp/tmp.Xq3f9a2LkP/p/.venv/bin/python3"
    s = SimpleNamespace(doc=None, t_start=time.monotonic(), over=False, stopping=False, mode="run", pid=42,
                        command=[where, "-c", "print('hello')"], log=None)
    line = status_lines(s)[0].plain
    assert "`python3 -c 'print('\"'\"'hello'\"'\"')'`" in line and where not in line, line


def test_process_rows_tag_the_command():
    procs = [{"pid": 1, "gpu_memory_bytes": 2 << 30}, {"pid": 2, "gpu_memory_bytes": 1 << 30}, {"pid": 3}]
    rows = view.process_rows(procs, {3}, {1: TAG_RUN})
    assert [r[4] for r in rows] == [TAG_RUN, "", "◀ gputop workload"]


def test_cli_without_a_gpu_exits_3(capsys):
    if Nvml().available():
        pytest.skip("this machine has a GPU")
    from gputop.cli import main

    assert main(["--tui", "--run", "--", "true"]) == exitcodes.NO_GPU
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gputop: ")
    assert main(["--tui", "--watch", str(os.getpid())]) == exitcodes.NO_GPU
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_tui_needs_a_command_or_pid(capsys):
    from gputop.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--tui"])
    assert exc.value.code == exitcodes.USAGE
    assert "--tui goes with --run -- CMD or --watch PID" in capsys.readouterr().err


@sync
async def test_a_stop_signal_gives_the_command_its_grace_period(tmp_path):
    """SIGTERM to gputop, then the quit that follows it: one stop (SIGINT, then the grace period), not two
    (a second stop would kill at once). The command takes 0.5 s to shut down and exits 42."""
    code = ("import signal, sys, time\n"
            "def bye(*a):\n    time.sleep(0.5)\n    sys.exit(42)\n"
            "signal.signal(signal.SIGINT, bye)\nprint('ready', flush=True)\ntime.sleep(60)\n")
    app = command_app(tmp_path, code, grace_s=5.0)
    log = tmp_path / "cmd.log"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: log.exists() and "ready" in log.read_text())
        app.lifecycle.stop_for_signal(signal.SIGTERM)
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.lifecycle.session.child.returncode == 42 and not app.lifecycle.session.child.killed
    assert app.lifecycle.session.exit_code == 128 + signal.SIGTERM


@sync
@pytest.mark.slow
async def test_a_gpu_chosen_with_g_stays_when_the_command_shows_up_on_another(tmp_path):
    """A job on 4 GPUs (the recorded 4-H100 node): the TUI shows the GPU the command is first seen on, once; a
    GPU the user chose with g before that stays chosen (on the 4-H100 machine the auto-pick came 25 s in, after
    the user's g, and put GPU 0 back)."""
    multi = Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x4" / "comms_mlp.jsonl.gz"
    src = ReplaySource(str(multi), speed=1.0)
    code = "import time; time.sleep(30)"
    session = Session(Monitor(src), [PY, "-c", code], log=str(tmp_path / "cmd.log"), grace_s=2.0).start()
    app = make_command_app(TuiConfig(src, hostname="test-host", specs=[], device="cpu"), session)
    frames, follow = [], app.lifecycle.frame

    def counted() -> None:
        frames.append(1)
        follow()

    app.lifecycle.frame = counted  # each of the app's frames (the timer's, a redraw's) follows the command's GPU
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_screen(pilot, "▶ GPU 0 ")
        await pilot.press("g")
        await wait_screen(pilot, "▶ GPU 1 ")
        finder = session.monitor.finder
        with finder.lock:
            finder.by_pid[0] = 1.0  # the command is seen on GPU 0 now
        seen = len(frames)
        await wait_for(pilot, lambda: len(frames) >= seen + 3)  # a few frames: each picks the GPU to show
        assert app.model.selected == 1
        await wait_screen(pilot, "▶ GPU 1 ")
        await pilot.press("q")
    assert session.over


@sync
async def test_the_attribution_view_shows_the_selected_gpus_own_rank(tmp_path):
    """--profile on a job's ranks: each rank answers a window; the view (a) shows the window of the process NVML
    lists on the selected GPU, and g moves it to the next GPU's rank (the recorded 4-H100 node's pids 938-941 on
    GPUs 0-3). The answers are in the loader's format, each rank's kernel named after it (inputs of the view).
    Which GPU is selected first is the app's to pick (the command's first GPU): the test follows the selection."""
    from gputop.session.profiling import ProfileWindows

    multi = Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x4" / "comms_mlp.jsonl.gz"
    src = ReplaySource(str(multi), speed=float("inf"))
    src.ticks = src.ticks[:200]  # 20 s: the job's ranks listed on their GPUs
    profile = ProfileWindows(seconds=3.0, first_at=3600.0)
    answers = [{"status": "ok", "pid": 938 + rank, "wall_s": 1.0, "gpu_busy_s": 0.9, "steps": 10, "ops": [],
                "kernels": [{"name": f"ncclDevKernel_AllReduce_rank{rank}_", "count": 100, "device_us": 9e5}],
                "seq": 1} for rank in range(4)]
    profile.asked.append({"seq": 1, "reason": "test", "t": 1.0, "asked": loader_util.Answered(answers)})
    session = Session(Monitor(src), [PY, "-c", "import time; time.sleep(30)"], log=str(tmp_path / "cmd.log"),
                      grace_s=2.0, profile=profile).start()
    app = make_command_app(TuiConfig(src, hostname="test-host", specs=[], device="cpu"), session)

    def shows_selected_rank_only(text: str) -> bool:
        sel = app.model.selected
        return f"rank{sel}_" in text and all(f"rank{r}_" not in text for r in range(4) if r != sel)

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_screen(pilot, "▶ GPU")
        await pilot.press("a")
        await wait_screen(pilot, shows_selected_rank_only)
        before = app.model.selected
        await pilot.press("g")  # the user's choice from here: the app no longer picks
        await wait_screen(pilot, lambda t: app.model.selected == (before + 1) % 4 and shows_selected_rank_only(t))
        await pilot.press("q")
    assert session.over


def test_the_status_lines_name_the_culprit_of_a_stall_above_the_screens_edge():
    """Live on 4 H100s (bench/gpu/tui_culprit_tmux.sh, 2026-11-27): at 80x24 under --tui --run the stalled GPU's
    verdict, which names the culprit, sat below the screen's edge (the command's panel, the strip of 4 GPUs and the
    device's bars above it) for the 90 s the check waited. The command's panel says who holds its job up now: at
    80x24 in place of where output goes, beside it elsewhere; gone once the command has ended."""
    import time
    from types import SimpleNamespace

    from gputop.analysis.rank_stacks import job_records
    from gputop.tui.command.panel import job_culprit
    from tests.test_rank_stacks import frame, stack

    read = {40: {"rank": 0, "stack": stack(40, [frame("step", "job.py", 82, "return metric[0].item()")])},
            41: {"rank": 1, "stack": stack(41, [frame("fault", "job.py", 89, "time.sleep(3600)")])}}
    records = job_records({0: [40], 1: [41]}, {0: "stalled", 1: "idle"}, read)
    verdicts = [None, SimpleNamespace(job=None), SimpleNamespace(job={"culprit": records[0]})]
    said = job_culprit(verdicts, lambda: {7, 40, 41})
    assert said == "rank 1 (pid 41, GPU 1): in fault at job.py:89 (`time.sleep(3600)`)"
    assert job_culprit([None, SimpleNamespace(job={})], lambda: {40, 41}) is None
    assert job_culprit(verdicts, lambda: {7, 50, 51}) is None, "a stalled neighbour's culprit is not the command's"
    s = SimpleNamespace(doc=None, t_start=time.monotonic(), over=False, stopping=False, mode="run", pid=42,
                        command=["torchrun", "job.py"], log="/tmp/gputop-cmd-42.log")
    short = [t.plain for t in status_lines(s, said, short=True)]
    assert len(short) == 2 and short[1] == f"culprit: {said} · k: every rank's stack", short
    tall = [t.plain for t in status_lines(s, said)]
    assert tall[1] == short[1] and tall[2].startswith("output: /tmp/gputop-cmd-42.log"), tall
    s.over, s.doc = True, {"wall_s": 3.0}
    s.child = SimpleNamespace(returncode=0, timed_out=False)
    assert [t.plain for t in status_lines(s, said, short=True)][1].startswith("output: "), "the run has ended"
