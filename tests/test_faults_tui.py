"""The fault matrix, TUI: gputop's Textual app in a real pseudo-terminal (100x30, TERM=xterm-256color),
stopped by a real SIGTERM or SIGHUP while a run is under way.

Specification: the run's processes (the child and its grandchild) are stopped, the terminal is restored
(the output leaves the alternate screen: ``ESC[?1049l`` after the last ``ESC[?1049h``), and gputop exits
128+N. ``gputop --tui --run -- CMD`` runs on tests/fake_pynvml (it needs NVML); ``gputop --demo`` replays
the shipped trace and starts the fault workload on the CPU with keys (:func:`start_workload_with_keys`,
the one place that knows the keys, for when the TUI changes).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from fault_util import (ALT_SCREEN_ON, PIDFILE_ENV, PY, TREE_CMD, Report, Terminal, env, others, plain,  # noqa: F401
                        read_pids, reaper, signal_name, wait_until)
from gputop.runner.recording import shipped
from gputop.runner.registry import Registry, workload_dirs
from gputop.tui.model.runs import with_recordings

SIGNALS = [signal.SIGTERM, signal.SIGHUP]
START_S = 60.0  # the longest the TUI and its run may take to get under way (2 busy cores)
END_S = 60.0
HELPERS_S = 3.0


TUI_DEMO = ["--demo", "--device", "cpu"]  # the demo replay; workloads start on the CPU


def start_workload_with_keys(term: Terminal, name: str) -> None:
    """On ``gputop --demo --device cpu`` (TUI_DEMO): the workloads page, highlight ``name``, run it.

    Keys (gputop/tui/app.py): ``2`` opens the workloads page with the first workload highlighted and the
    list focused (the list is sorted by name, each shipped recording after its workload when there is no GPU); the down arrow moves the highlight; ``r`` runs the
    highlighted workload with the parameters in its form. Each step waits for the screen to show it took
    effect: the page's hint line ("runs on: CPU"), then the form of ``name`` (its ``pid_file`` label is
    unique to fault_tree), so that ``r`` does not read another workload's form.
    """
    # the list as the page shows it: with no GPU (--demo) each shipped recorded run follows its workload
    names = [s.name for s in with_recordings(list(Registry(workload_dirs(term.env))), shipped())[0]]
    term.wait_text("gputop", START_S)  # the app is up (the header)
    since = term.mark()
    term.press("2")
    term.wait_text("runs on: CPU", START_S, since=since)
    since = term.mark()
    for _ in range(names.index(name)):
        term.press("\x1b[B")  # down
    term.wait_text("pid_file", START_S, since=since)
    term.press("r")


def check_end(term: Terminal, rep: Report, procs, sig: int) -> None:
    rc = term.wait(END_S)
    rep.gone(procs, what="the run's processes, checked as gputop exited")
    rep.gone(others(term.seen, procs), within=HELPERS_S, what="other processes seen under gputop")
    rep.exit_code(rc, 128 + sig)
    out = term.output()
    rep.expect(term.restored(), "the terminal was not restored: no ESC[?1049l after the last ESC[?1049h "
                                f"(output ends {out[-200:]!r})")
    rep.no_traceback(plain(out), "the terminal")


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=signal_name)
def test_tui_command_signal_to_gputop(tmp_path: Path, reaper, sig):
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(["--tui", "--log", str(tmp_path / "cmd.log"), "--run", "--", PY, str(TREE_CMD), str(pid_file),
                     "hang"], env(fake_nvml=True))
    reaper.gputops.append(term)
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the command's pid file", term.proc)
    child = next(p for p in procs if p.role == "child")
    term.wait_text(f"pid {child.pid}", START_S)  # the TUI shows the running command
    term.send(sig)
    rep = Report(f"--tui --run -- CMD, {signal_name(sig)} to gputop")
    check_end(term, rep, procs, sig)
    rep.finish()


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=signal_name)
def test_tui_workload_signal_to_gputop(tmp_path: Path, reaper, sig):
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(TUI_DEMO, env(**{PIDFILE_ENV: str(pid_file)}))
    reaper.gputops.append(term)
    start_workload_with_keys(term, "fault_tree")
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the workload's pid file", term.proc)
    term.send(sig)
    rep = Report(f"--demo, fault_tree running on the CPU, {signal_name(sig)} to gputop")
    check_end(term, rep, procs, sig)
    rep.finish()


def test_tui_command_with_unwritable_output_exits_2_before_running(tmp_path: Path, reaper):
    """Bad input is found before the TUI opens and before the command runs: one line, exit 2."""
    pid_file, bad = tmp_path / "pids.json", tmp_path / "no" / "such" / "folder" / "x.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(["--tui", "-o", str(bad), "--log", str(tmp_path / "cmd.log"), "--run", "--", PY, str(TREE_CMD),
                     str(pid_file), "exit", "0"], env(fake_nvml=True))
    reaper.gputops.append(term)
    rep = Report("--tui -o into a missing folder --run -- CMD")
    try:
        rep.exit_code(term.wait(20.0), 2)  # at once when right; today the TUI opens and waits for q
    except AssertionError as exc:
        rep.problems.append(str(exc).split(";")[0])
    rep.expect(not pid_file.exists(), "the command ran (it wrote its pid file)")
    out = term.output()
    rep.expect(ALT_SCREEN_ON not in out, "the TUI opened (ESC[?1049h) before the bad -o was reported")
    lines = [ln for ln in plain(out).splitlines() if ln.strip()]
    rep.expect(len(lines) == 1, f"{len(lines)} lines on the terminal, expected one: {plain(out)[-800:]!r}")
    rep.no_traceback(plain(out), "the terminal")
    rep.finish()


# -- the terminal goes away -------------------------------------------------------------------------------
# The pty is gputop's controlling terminal and the test closes its master side (what a terminal window closing,
# a dropped SSH connection or tmux kill-session does): the kernel hangs the tty up and sends SIGHUP and SIGCONT,
# and every write to it fails from then on. The test sends no signal. Specification: gputop stops the run as q
# would (its grace period), exits 129 (SIGHUP), and nothing of the run, gputop included, is left.
HANG_UP_EXIT_S = 60.0  # bounded: before the fix gputop never exited (blocked on its writer's full queue)


def check_hang_up(term: Terminal, rep: Report, procs) -> None:
    term.hang_up()
    try:
        rc = term.wait(HANG_UP_EXIT_S)
    except AssertionError as exc:
        rep.problems.append(str(exc).split(";")[0])
        return
    rep.exit_code(rc, 128 + signal.SIGHUP)
    rep.gone(procs, within=HELPERS_S, what="the run's processes")
    rep.gone(others(term.seen, procs), within=HELPERS_S, what="other processes seen under gputop")


def test_closing_the_terminal_on_the_idle_monitor_ends_gputop(tmp_path: Path, reaper):
    term = Terminal(TUI_DEMO, env(), controlling=True)
    reaper.gputops.append(term)
    term.wait_text("SM activity", START_S)  # the monitor, drawn from the demo trace
    rep = Report("--demo, the monitor idle, the terminal closed")
    check_hang_up(term, rep, [])
    rep.finish()


@pytest.mark.slow
@pytest.mark.parametrize("controlling", [True, False], ids=["controlling-tty", "not-the-controlling-tty"])
def test_closing_the_terminal_during_a_workload_stops_it_and_ends_gputop(tmp_path: Path, reaper, controlling):
    """Also on a pty that is not gputop's controlling terminal: no SIGHUP comes, only the failed writes (and
    reads at end-of-file) tell gputop the terminal is gone; it stops as on SIGHUP all the same."""
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(TUI_DEMO, env(**{PIDFILE_ENV: str(pid_file)}), controlling=controlling)
    reaper.gputops.append(term)
    start_workload_with_keys(term, "fault_tree")
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the workload's pid file", term.proc)
    rep = Report(f"--demo, fault_tree running on the CPU, the terminal ({'' if controlling else 'not '}"
                 "the controlling one) closed")
    check_hang_up(term, rep, procs)
    rep.finish()


@pytest.mark.slow
def test_closing_the_terminal_during_tui_run_command_stops_it_and_ends_gputop(tmp_path: Path, reaper):
    pid_file = tmp_path / "pids.json"
    reaper.pid_files.append(pid_file)
    term = Terminal(["--tui", "--log", str(tmp_path / "cmd.log"), "--run", "--", PY, str(TREE_CMD), str(pid_file),
                     "hang"], env(fake_nvml=True), controlling=True)
    reaper.gputops.append(term)
    procs = wait_until(lambda: read_pids(pid_file), START_S, "the command's pid file", term.proc)
    child = next(p for p in procs if p.role == "child")
    term.wait_text(f"pid {child.pid}", START_S)
    rep = Report("--tui --run -- CMD running, the terminal closed")
    check_hang_up(term, rep, procs)
    rep.finish()


@pytest.mark.slow
def test_closing_the_terminal_during_the_tour_ends_gputop(tmp_path: Path, reaper):
    term = Terminal([*TUI_DEMO, "--tour"], env(), controlling=True)
    reaper.gputops.append(term)
    term.wait_text("press n to start", START_S)
    since = term.mark()
    term.press("n")  # the first stop: the shipped recorded roofline run plays (no GPU here)
    term.wait_text("tour 1/", START_S, since=since)
    rep = Report("--demo --tour at its first stop, the terminal closed")
    check_hang_up(term, rep, [])
    rep.finish()

