"""The output rule (issue 35 items 4 and 5): every file gputop is asked to write is complete or reported with a
non-zero code and one line; two outputs naming one file (or an output naming an input, or stdout under --json) are
refused with exit 2 before anything runs, the file left as it was; a closed stdout is one line, never a traceback;
``--json`` writes exactly one document in every outcome, argparse's own refusals included.

Real /dev/full, a real file size limit (RLIMIT_FSIZE: the kernel refuses every byte past it, as a disk that fills),
a real full tmpfs where this machine lets the test mount one, real closed descriptors, real ``python -m gputop``."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pytest

from fault_util import PY, ROOT, env
from gputop import documents
from gputop.runner.recording import read_recording
from io_util import DEMO, RUN_S, gputop, one_document, one_line
from quick_util import first_of_each, only, slow

RUN = ["--run", "fault_ok", "--device", "cpu"]  # a workload of a second (tests/fault_workloads/fault_ok.py)


def last_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.splitlines()
    assert lines and "Traceback" not in r.stderr, r.stderr
    return lines[-1]


# -- a file that cannot be written whole ---------------------------------------------------------------------------
@pytest.mark.parametrize("flag", [slow("--record-run"), "--csv", slow("-o")])  # the quick loop: --csv
def test_a_workload_output_on_dev_full_exits_1_and_says_which(flag):
    r = gputop(*RUN, flag, "/dev/full", "--json")
    assert r.returncode == 1, r.stderr
    assert "cannot write /dev/full: No space left on device" in r.stderr and "Traceback" not in r.stderr
    assert "recorded the run" not in r.stderr
    assert one_document(r)["status"] == "ok"  # the run itself went well: its document is still on stdout


@pytest.mark.parametrize("argv", [["--once", "--demo", "-o", "/dev/full"],
                                  ["--once", "--demo", "--json", "-o", "/dev/full"]], ids=["text", "json"])
def test_once_with_its_document_on_dev_full_exits_1(argv):
    one_line(gputop(*argv), 1, "cannot write /dev/full")


def test_record_on_dev_full_exits_1_with_one_line():
    r = gputop("--record", "/dev/full", "--seconds", "0.5", fake_nvml=True)
    assert r.returncode == 1, r.stderr
    assert last_line(r).startswith("gputop: cannot write /dev/full: No space left on device")
    assert "wrote" not in r.stderr


def test_run_command_record_on_dev_full_exits_1_with_one_line():
    r = gputop("--json", "--record", "/dev/full", "--run", "--", PY, "-c", "pass", fake_nvml=True)
    assert r.returncode == 1, r.stderr
    assert last_line(r).startswith("gputop: cannot write /dev/full")
    assert one_document(r)["command_exit_code"] == 0


@pytest.mark.parametrize("written", [100000, 1], ids=["a copy that fails", "a close that fails"])
def test_run_command_log_on_dev_full_exits_1_with_one_line(written):
    """gputop copies the command's stderr into --log FILE: a copy that fails is said, not dropped; a few bytes sit in
    the log's buffer until gputop closes it, and that close fails on a full disk and is said the same way (not an
    internal error)."""
    r = gputop("--json", "--log", "/dev/full", "--run", "--", PY, "-c", f"import sys; sys.stderr.write('x' * {written})",
               fake_nvml=True)
    assert r.returncode == 1, r.stderr
    assert last_line(r) == "gputop: cannot write /dev/full: No space left on device; the command's output there is " \
                           "incomplete"
    assert one_document(r)["command_exit_code"] == 0


def limited(size: int):
    """A child whose files stop growing at ``size`` bytes (RLIMIT_FSIZE, SIGXFSZ ignored: each write past it fails
    with EFBIG, the way a disk that fills fails with ENOSPC)."""
    def setup():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return setup


def test_a_recording_cut_by_a_file_size_limit_exits_1_and_the_file_says_it_was_cut(tmp_path):
    out = tmp_path / "run.jsonl"
    r = subprocess.run([PY, "-m", "gputop", *RUN, "--record-run", str(out)], cwd=ROOT, env=env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_S,
                       preexec_fn=limited(4096))
    assert r.returncode == 1, r.stderr
    assert "the recording is incomplete" in last_line(r) and "recorded the run" not in r.stderr
    assert 0 < out.stat().st_size <= 4096
    rec = read_recording(out)  # what was written reads, up to its last complete line
    assert rec["document"] is None


@pytest.fixture
def full_fs(tmp_path):
    """A real 64 kB tmpfs, filled (root on Linux; skipped where mounting is not allowed)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()})")
    try:
        with open(mnt / "filler", "wb") as f:
            try:
                f.write(b"x" * (1 << 20))
                f.flush()
            except OSError:
                pass
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("flag", [slow("--record-run"), "-o", slow("--csv")])  # the quick loop: -o
def test_outputs_on_a_full_filesystem_exit_1(full_fs, flag):
    out = full_fs / "out"
    r = gputop(*RUN, flag, str(out), *([] if flag == "-o" else ["-o", str(full_fs.parent / "doc.json")]))
    assert r.returncode == 1, r.stderr
    assert f"cannot write {out}: No space left on device" in r.stderr and "Traceback" not in r.stderr


# -- two outputs naming one file -----------------------------------------------------------------------------------
@pytest.fixture
def kept(tmp_path):
    """A file that is there before gputop runs: refused before anything runs, it is left as it was."""
    p = tmp_path / "kept"
    p.write_text("what was there\n")
    yield p
    assert p.read_text() == "what was there\n"


@pytest.mark.parametrize("argv", [
    [*RUN, "--record-run", "{x}", "-o", "{x}"],
    [*RUN, "--csv", "{x}", "-o", "{x}"],
    [*RUN, "--csv", "{x}", "--record-run", "{x}"],
    ["--run", "roofline", "--record", "{x}", "-o", "{x}"],
    ["--record", "{x}", "--log", "{x}", "--run", "--", "true"],
    ["--log", "{x}", "-o", "{x}", "--run", "--", "true"],
    ["--record", "{x}", "-o", "{x}", "--watch", "1"],
    [*RUN, "--csv", "{x}", "-o", "{link}"],
    [*RUN, "--csv", "{x}", "-o", "{hard}"],
    [*RUN, "--csv", "{x}", "-o", "{dotted}"],
], ids=["record-run+o", "csv+o", "csv+record-run", "record+o", "record+log", "log+o", "watch-record+o",
        "symlink", "hard-link", "dot-dot"])
def test_two_outputs_naming_one_file_are_refused_before_anything_runs(kept, argv):
    link, hard = kept.parent / "link", kept.parent / "hard"
    link.symlink_to(kept)
    os.link(kept, hard)
    dotted = kept.parent / ".." / kept.parent.name / kept.name
    words = {"{x}": str(kept), "{link}": str(link), "{hard}": str(hard), "{dotted}": str(dotted)}
    argv = [words.get(a, a) for a in argv]
    one_line(gputop(*argv), 2, "name one file")
    r = gputop("--json", *argv)
    one_line(r, 2, "name one file")
    assert one_document(r)["exit_code"] == 2


def test_two_outputs_naming_one_new_file_are_refused_too(tmp_path):
    x = tmp_path / "new.json"
    one_line(gputop(*RUN, "--record-run", str(x), "-o", str(x)), 2, "name one file")
    assert not x.exists()


def test_an_output_naming_the_trace_it_reads_is_refused(tmp_path):
    trace = tmp_path / "t.jsonl.gz"
    trace.write_bytes(DEMO.read_bytes())
    one_line(gputop("--once", "--replay", str(trace), "-o", str(trace)), 2, "would overwrite what it reads")
    assert trace.read_bytes() == DEMO.read_bytes()


def test_an_output_that_is_stdout_under_json_is_refused(tmp_path):
    out = tmp_path / "stdout.txt"
    with open(out, "w") as f:
        r = subprocess.run([PY, "-m", "gputop", "--once", "--demo", "--json", "-o", "/dev/stdout"], cwd=ROOT, env=env(),
                           stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.PIPE, text=True, timeout=RUN_S)
    assert r.returncode == 2 and "is stdout, where --json writes its document" in r.stderr
    documents.validate(__import__("json").loads(out.read_text()), "once")  # and stdout holds the one document


def test_devices_may_take_several_outputs():
    r = gputop(*RUN, "--csv", "/dev/null", "-o", "/dev/null", "--record-run", "/dev/null")
    assert r.returncode == 0, r.stderr


# -- a closed stdout -----------------------------------------------------------------------------------------------
def closed(fd: int):
    return lambda: os.close(fd)


@pytest.mark.parametrize("argv", only([["--list"], ["--list", "--json"], ["--once", "--demo"],
                                       ["--once", "--demo", "--json"], ["--replay", str(DEMO), "--json"],
                                       [*RUN, "--json"], ["--json", "--bogus", "--once"]],
                                      # the quick loop: --list, --once --demo --json and a refused one
                                      lambda a: a in (["--list"], ["--once", "--demo", "--json"]) or "--bogus" in a),
                         ids=["list", "list-json", "once", "once-json", "replay-json", "run-json", "refused"])
def test_a_closed_stdout_is_one_line_never_a_traceback(argv):
    r = subprocess.run([PY, "-m", "gputop", *argv], cwd=ROOT, env=env(), stdin=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=RUN_S, preexec_fn=closed(1))
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    if "--bogus" in argv:
        assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    else:
        assert r.returncode == 1, r.stderr
        assert r.stderr.splitlines()[-1] == "gputop: cannot write to stdout (closed); output lost"


def test_a_closed_stdout_is_not_taken_by_the_first_file_gputop_opens(tmp_path):
    """With descriptor 1 closed, the next file opened would get number 1 and then hold whatever a child writes to
    its stdout: the recording must hold the run alone."""
    out = tmp_path / "run.jsonl"
    r = subprocess.run([PY, "-m", "gputop", *RUN, "--record-run", str(out), "-o", str(tmp_path / "d.json")],
                       cwd=ROOT, env=env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=RUN_S, preexec_fn=closed(1))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert read_recording(out)["document"]["status"] == "ok"


@pytest.mark.parametrize("fd", [0, 2])
def test_a_closed_stdin_or_stderr_changes_nothing(fd):
    r = subprocess.run([PY, "-m", "gputop", "--once", "--demo", "--json"], cwd=ROOT, env=env(), capture_output=True,
                       text=True, timeout=RUN_S, preexec_fn=closed(fd), stdin=None if fd == 0 else subprocess.DEVNULL)
    assert r.returncode == 0
    documents.validate(one_document(r), "once")


# -- --json: one document whatever happens -------------------------------------------------------------------------
@pytest.mark.parametrize("argv, schema", first_of_each([  # the quick loop: the first of each schema
    (["--once", "--json", "--bogus"], "once"),
    (["--json", "--once", "--gpu"], "once"),
    (["--once", "--json", "--speed", "0", "--demo"], "once"),
    (["--run", "roofline", "--json", "--param", "noequals"], "run"),
    (["--json", "--run=roofline", "--bogus"], "run"),
    (["--json", "--run", "--bogus", "--", "true"], "monitor"),
    (["--watch", "1", "--json", "--nope"], "monitor"),
    (["--replay", "/nonexistent.jsonl", "--json"], "monitor"),
    (["--replay", str(ROOT), "--json"], "monitor"),
    (["--replay", str(DEMO), "--json", "--bogus"], "monitor"),
    (["--replay", str(ROOT / "README.md"), "--json"], "monitor"),
    (["--once", "--json", "--source", "prometheus=http://127.0.0.1:1", "--bogus"], "cluster"),
], lambda case: case[1], ids=lambda case: f"{' '.join(case[0])}-{case[1]}"))
def test_json_writes_exactly_one_document_when_refused(argv, schema):
    r = gputop(*argv)
    one_line(r, 2)
    doc = one_document(r)
    documents.validate(doc, schema)
    assert doc["exit_code"] == 2 and doc["errors"]


def test_list_json_refused_is_an_error_object_not_an_empty_listing():
    r = gputop("--list", "--json", "--bogus")
    one_line(r, 2, "--bogus")
    doc = one_document(r)
    assert doc["workloads"] is None and doc["exit_code"] == 2 and "--bogus" in doc["errors"][0]["message"]


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/full")
def test_json_on_a_full_stdout_is_one_line_and_exit_1():
    with open("/dev/full", "w") as full:
        r = subprocess.run([PY, "-m", "gputop", "--once", "--demo", "--json"], cwd=ROOT, env=env(), stdout=full,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=RUN_S)
    assert r.returncode == 1 and r.stderr == "gputop: cannot write to stdout (No space left on device); output lost\n"


@pytest.mark.slow
def test_tui_run_says_a_log_it_could_not_finish_and_exits_1():
    """``--tui --run --log /dev/full -- CMD`` on a real pty: the command ends on its own, q closes the TUI, and the
    log it could not write is said in one line after the screen (as headless says it), exit 1, no traceback."""
    from pty_util import Pty

    pty = Pty(100, 30)
    try:
        proc = pty.spawn([sys.executable, "-m", "gputop", "--tui", "--log", "/dev/full", "--run", "--", "sh", "-c",
                          "echo err >&2; sleep 0.5"], env=env(fake_nvml=True))
        pty.wait_text("exited with code 0", 90)
        pty.press("q")
        assert pty.wait(60) == 1, pty.read()
        text = pty.read()
        assert "cannot write /dev/full: No space left on device" in text and "Traceback" not in text, text[-3000:]
    finally:
        pty.close()
        if proc.poll() is None:
            proc.kill()
