"""A trace that cannot be read is one line and exit 2 in every mode that reads one, never a traceback and never a
hang; a trace cut off while it was written replays and says so; ``--replay -`` reads the trace on stdin (issue 35
item 1). Real corrupt gzip (bytes flipped in a copy of the shipped demo), real devices, FIFOs and pipes, real
``python -m gputop`` processes."""

from __future__ import annotations

import gzip
import os
import subprocess
import threading

import pytest

from export_util import free_port
from fault_util import PY, ROOT, env
from gputop import documents
from gputop.telemetry.trace import ReplaySource, TraceError, read_trace
from gputop.telemetry.trace_file import IDLE_S
from io_util import DEMO, RUN_S, flipped, gputop, one_document, one_line
from quick_util import only, slow


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory) -> list:
    """Copies of the demo with 20 bytes flipped (four seeds: each a different corruption zlib meets)."""
    folder = tmp_path_factory.mktemp("corrupt")
    data = DEMO.read_bytes()
    paths = []
    for seed in range(4):
        p = folder / f"corrupt{seed}.jsonl.gz"
        p.write_bytes(flipped(data, seed))
        paths.append(p)
    return paths


@pytest.fixture
def half(tmp_path):
    """The demo cut in the middle of its gzip stream (a copy interrupted, a disk that filled)."""
    p = tmp_path / "half.jsonl.gz"
    data = DEMO.read_bytes()
    p.write_bytes(data[:len(data) // 2])
    return p


def test_a_corrupt_gzip_is_a_trace_error_naming_the_file_in_one_line(corrupt):
    for p in corrupt:
        with pytest.raises(TraceError) as exc:
            ReplaySource(str(p))
        assert str(p) in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("seed", [0] + [slow(s) for s in range(1, 4)])  # the quick loop: one seed
def test_replay_json_of_a_corrupt_gzip_is_exit_2_and_one_error_document(corrupt, seed):
    r = gputop("--replay", str(corrupt[seed]), "--json")
    one_line(r, 2, str(corrupt[seed]))
    doc = one_document(r)
    documents.validate(doc, "monitor")
    assert doc["mode"] == "replay" and doc["exit_code"] == 2 and doc["errors"][0]["kind"] == "bad_trace"


@pytest.mark.parametrize("argv", [["--once"], ["--once", "--json"], ["--export", "{port}"]],
                         ids=["once", "once-json", "export"])
def test_other_modes_reading_a_corrupt_gzip_say_one_line_exit_2(corrupt, argv):
    argv = [a.replace("{port}", f"127.0.0.1:{free_port()}") for a in argv]
    r = gputop(*argv, "--replay", str(corrupt[0]))
    one_line(r, 2, str(corrupt[0]))
    if "--json" in argv:
        doc = one_document(r)
        documents.validate(doc, "once")
        assert doc["exit_code"] == 2


def test_a_trace_cut_in_half_replays_and_says_it_was_cut_off(half):
    r = gputop("--replay", str(half), "--json")
    assert r.returncode == 0, r.stderr
    assert "cut off" in one_line(r, 0, str(half))
    doc = one_document(r)
    documents.validate(doc, "monitor")
    assert "gzip stream ends early" in doc["source"]["truncated"]
    whole = one_document(gputop("--replay", str(DEMO), "--json"))
    assert whole["source"]["truncated"] is None
    assert 0 < doc["wall_s"] < whole["wall_s"]  # the ticks up to the cut, not the whole recording


def test_once_of_a_cut_trace_says_so_in_its_document(half):
    r = gputop("--once", "--json", "--replay", str(half))
    one_line(r, 0, "cut off")
    doc = one_document(r)
    documents.validate(doc, "once")
    assert "ends early" in doc["source"]["truncated"]


def test_a_plain_trace_whose_last_line_is_cut_says_which_line(tmp_path):
    with gzip.open(DEMO, "rt") as f:
        text = f.read()
    p = tmp_path / "cut.jsonl"
    p.write_text(text[:len(text) // 3])
    src = ReplaySource(str(p))
    n = text[:len(text) // 3].count("\n") + 1
    assert src.truncated == f"its last line (line {n}) is cut off" and src.label == "cut.jsonl (cut off)"


@pytest.mark.parametrize("device", ["/dev/zero", slow("/dev/null"), slow("/dev/urandom")])  # the quick loop: one
@pytest.mark.parametrize("argv", [["--json"], ["--once"]], ids=["replay-json", "once"])
def test_a_device_is_refused_before_a_byte_is_read(device, argv):
    r = gputop("--replay", device, *argv)
    one_line(r, 2, f"{device}: a terminal or character device, not a trace file")


def test_a_fifo_with_a_writer_replays(tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as f:  # blocks until gputop opens it to read
            f.write(DEMO.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    r = gputop("--replay", str(fifo), "--json")
    writer.join(RUN_S)
    assert r.returncode == 0, r.stderr
    assert one_document(r)["source"]["path"] == str(fifo)


@pytest.mark.slow
def test_a_fifo_nobody_writes_to_is_given_up_on_not_waited_for_forever(tmp_path):
    fifo = tmp_path / "nobody.fifo"
    os.mkfifo(fifo)
    r = gputop("--replay", str(fifo), "--json")
    one_line(r, 2, f"nothing came for {IDLE_S:g} s")
    assert one_document(r)["exit_code"] == 2


@pytest.mark.parametrize("name", ["-", slow("/dev/stdin")])  # the quick loop: "-"
@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_replay_dash_reads_the_trace_piped_on_stdin(name, gz):
    data = DEMO.read_bytes() if gz else gzip.decompress(DEMO.read_bytes())
    r = gputop("--replay", name, "--json", input=data)
    assert r.returncode == 0, r.stderr
    piped = one_document(r)
    documents.validate(piped, "monitor")
    from_file = one_document(gputop("--replay", str(DEMO), "--json"))
    assert piped["verdict"] == from_file["verdict"] and piped["wall_s"] == from_file["wall_s"]


def test_once_reads_stdin_once_even_where_it_opens_the_replay_twice():
    r = gputop("--once", "--json", "--replay", "-", input=DEMO.read_bytes())
    assert r.returncode == 0, r.stderr
    assert one_document(r)["gpus"][0]["sample"]["sm_active_pct"] is not None


def test_a_process_substitution_pipe_replays():
    """``--replay <(zcat t.jsonl.gz)``: the shell names a pipe /dev/fd/N."""
    read, write = os.pipe()
    feeder = threading.Thread(target=lambda: (os.write(write, DEMO.read_bytes()), os.close(write)), daemon=True)
    proc = subprocess.Popen([PY, "-m", "gputop", "--replay", f"/dev/fd/{read}", "--once", "--json"], cwd=ROOT,
                            env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=(read,))
    os.close(read)
    feeder.start()
    out, err = proc.communicate(timeout=RUN_S)
    assert proc.returncode == 0, err
    assert one_document(subprocess.CompletedProcess([], 0, out.decode(), ""))["source"]["kind"] == "replay"


@pytest.mark.parametrize("stdin", ["/dev/null", "/dev/zero"])
def test_replay_dash_without_a_pipe_says_what_stdin_is(stdin):
    with open(stdin, "rb") as f:
        r = gputop("--replay", "-", "--json", stdin=f)
    one_line(r, 2, "stdin: a terminal or character device")
    assert one_document(r)["exit_code"] == 2


def test_replay_dash_with_nothing_piped_is_an_empty_trace():
    r = gputop("--replay", "-", "--json", input=b"")
    one_line(r, 2, "stdin: empty file")


@pytest.mark.parametrize("argv", [["--replay", "-"], ["--serve", "127.0.0.1:8", "--replay", "-"]],
                         ids=["tui", "serve"])
def test_replay_dash_in_the_tui_is_refused_where_it_would_read_the_keys(argv):
    one_line(gputop(*argv, input=DEMO.read_bytes()), 2, "reads the trace from stdin")


@pytest.mark.parametrize("row, why", only([  # the quick loop: the first row and a sample that is not a number
    ('{"type":"tick","gpus":[]}', "has no time t"),
    ('{"type":"tick","t":"x","gpus":[]}', "has no time t"),
    ('{"type":"tick","t":1,"gpus":{}}', "no list of GPU samples"),
    ('{"type":"tick","t":1,"gpus":[{"index":0}]}', "each with its time t"),
    ('{"type":"tick","t":1,"gpus":[{"t":1,"sm_active_pct":"high"}]}', "sm_active_pct is not a number"),
    ('{"type":"tick","t":1,"gpus":[{"t":1,"clock_reasons":"none"}]}', "clock_reasons or processes"),
    ('{"type":"tick","t":1,"gpus":[],"host":[]}', "host that is not an object"),
    ('{"type":"mark","t":1}', "has no label"),
], lambda case: case[0] == '{"type":"tick","gpus":[]}' or "not a number" in case[1], unpack=True))
def test_a_row_of_the_wrong_shape_is_a_trace_error_not_a_traceback_later(tmp_path, row, why):
    p = tmp_path / "shape.jsonl"
    p.write_text('{"type":"header","format":"gputop-trace","version":1,"devices":[]}\n'
                 '{"type":"tick","t":0,"gpus":[],"host":{}}\n' + row + "\n")
    with pytest.raises(TraceError, match=why):
        read_trace(str(p))
    one_line(gputop("--replay", str(p), "--json"), 2, why)


@pytest.mark.parametrize("which", ["corrupt", slow("/dev/zero")])  # the quick loop: a corrupt trace
def test_the_tui_on_a_real_terminal_says_one_line_exit_2(corrupt, which):
    from fault_util import Terminal, plain

    path = str(corrupt[1]) if which == "corrupt" else which
    term = Terminal(["--replay", path], env())
    try:
        code = term.wait(RUN_S)
        text = plain(term.output())
    finally:
        term.close()
    assert code == 2 and "Traceback" not in text, text[-2000:]
    assert [line for line in text.splitlines() if line.strip()] == [next(
        line for line in text.splitlines() if line.startswith(f"gputop: {path}: "))], text[-2000:]
