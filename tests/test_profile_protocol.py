"""The ``--profile`` request/answer files (gputop/runner/profile_loader/protocol.py): what gputop writes is what the
loader reads, every file appears whole, every field an answer carries is named, and the module stays stdlib only
(the loader loads it by its path in a child where gputop may not be importable)."""

from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path

from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import cupti_window as cw
from gputop.runner.profile_loader import protocol as P
from gputop.session.profiling import START_LEAD_S, ProfileWindows


def test_a_request_reads_back_as_written_and_missing_words_take_the_defaults():
    r = P.Request(2.5, 10, 1_800_000_000.25)
    assert r.text() == "2.5 10 1800000000.250"
    assert P.Request.parse(r.text()) == r
    assert P.Request.parse("") == P.Request(3.0, 0, 0.0)
    assert P.Request.parse("4") == P.Request(4.0, 0, 0.0)  # a request from before steps and start times


def test_what_gputop_asks_is_what_the_loader_reads(tmp_path):
    pw = ProfileWindows(seconds=2.0, max_steps=5, first_at=None)
    try:
        assert P.read_request(pw.folder, 1) is None  # not asked yet
        before = time.time()
        pw.ask("the test", 0.0)
        got = P.read_request(pw.folder, 1)
        assert got.seconds == 2.0 and got.max_steps == 5
        assert before + START_LEAD_S - 0.001 <= got.start_at <= time.time() + START_LEAD_S + 0.001
        assert sorted(p.name for p in Path(pw.folder).iterdir()) == ["request-1"]  # no temporary file left
        assert pw.pending
        P.write_answer(pw.folder, 1, 4242, 12.5, P.unavailable("answered by the test"))
        assert not pw.pending
        assert P.read_answers(pw.folder, 1) == [{"status": "unavailable", "reason": "answered by the test",
                                                 "seq": 1, "pid": 4242, "asked_at": 12.5}]
        assert pw.result()["windows"][0]["why_none"] == "answered by the test"
    finally:
        pw.close()


def test_a_loaded_mark_and_an_unreadable_answer(tmp_path):
    folder = str(tmp_path)
    assert not P.any_loaded(folder)
    P.write_loaded(folder, 77)
    assert P.any_loaded(folder) and json.loads((tmp_path / "loaded-77").read_text()) == {"pid": 77}
    (tmp_path / "window-1-5.json").write_text("{not json")
    P.write_answer(folder, 1, 6, 1.0, {"status": "ok", "kernels": [], "ops": []})
    assert [a["pid"] for a in P.read_answers(folder, 1)] == [6]
    assert [Path(p).name for p in P.answer_paths(folder, 1)] == ["window-1-5.json", "window-1-6.json"]
    assert not list(tmp_path.glob(".*"))


def test_every_field_of_a_cupti_answer_is_named():
    win = cw.summary([("k", 1_000, 3_000), ("Memcpy HtoD", 3_000, 4_000)], 0, 5_000)
    assert set(win) <= set(P.ANSWER_FIELDS), set(win) - set(P.ANSWER_FIELDS)
    assert set(cw.unavailable("why")) <= set(P.ANSWER_FIELDS)


def test_the_protocol_is_stdlib_only_and_the_loader_loads_it_by_its_path():
    path = Path(LOADER_DIR) / "protocol.py"
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for n in names:
            assert n.split(".")[0] in sys.stdlib_module_names, f"protocol.py imports {n}"
    loader = (Path(LOADER_DIR) / "sitecustomize.py").read_text()
    assert '_protocol = _load("protocol")' in loader
    assert "import gputop" not in loader and "from gputop" not in loader
