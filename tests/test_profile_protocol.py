"""The profile loader's files (gputop/runner/profile_loader/protocol.py): each process's own folder found from its
pid by any gputop of the user, a request read back as written, two gputops asking at once sharing one window, every
file appearing whole, every answer field named, a base folder that is not the user's alone refused, and the module
stdlib only (the loader loads it by its path in a program where gputop may not be importable)."""

from __future__ import annotations

import ast
import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

import loader_util
from gputop.runner.profile_loader import LOADER_DIR
from gputop.runner.profile_loader import cupti_window as cw
from gputop.runner.profile_loader import protocol as P
from gputop.session.profiling import START_LEAD_S, ProfileWindows


def test_a_request_reads_back_as_written_and_missing_fields_take_the_defaults():
    r = P.Request(2.5, 10, 1_800_000_000.25, asker=77)
    assert P.Request.parse(r.text()) == r and r.protocol == P.PROTOCOL
    assert P.Request.parse("{}") == P.Request(3.0, 0, 0.0, 0, 0)  # no protocol said: none of ours
    job = P.Request(3.0, 10, 1_800_000_000.25, asker=77, min_seconds=0.5)  # a job's ranks: a floor under the steps
    assert P.Request.parse(job.text()).min_seconds == 0.5 and P.Request.parse("{}").min_seconds == 0.0
    for bad in ("3 10 1.0", "[1]", "{not json"):  # protocol 1's line, not an object, not JSON
        with pytest.raises(ValueError):
            P.Request.parse(bad)


def test_a_process_folder_is_found_from_its_pid_and_a_reused_pid_is_told_apart(tmp_path, monkeypatch):
    folder = loader_util.stand_in(monkeypatch, tmp_path)
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
    found, loaded = P.folder_of(os.getpid())
    assert found == folder and loaded["pid"] == os.getpid() and loaded["protocol"] == P.PROTOCOL
    P.write_loaded(folder, {"pid": os.getpid(), "start": "1"})  # a folder an earlier process of this pid left
    assert P.folder_of(os.getpid()) == (None, None)
    assert P.folder_of(os.getpid(), {P.BASE_ENV: str(tmp_path / "elsewhere")}) == (None, None)


def test_the_default_base_is_the_users_runtime_folder_or_tmp(tmp_path):
    uid = os.getuid()
    assert P.bases({"XDG_RUNTIME_DIR": "/run/user/5"}) == ["/run/user/5/gputop/profile", f"/tmp/gputop-{uid}/profile"]
    assert P.bases({}) == [f"/tmp/gputop-{uid}/profile"]
    assert P.bases({P.BASE_ENV: "/x", "XDG_RUNTIME_DIR": "/run/user/5"}) == ["/x"]
    # a runtime folder that cannot be made (a job's environment from another node): the next
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "file")}
    (tmp_path / "file").write_text("")
    assert P.make_base(env) == f"/tmp/gputop-{uid}/profile"


def test_a_base_others_may_write_is_refused(tmp_path):
    base = tmp_path / "open"
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(P.Refused, match="others may write"):
        P.make_base({P.BASE_ENV: str(base)})
    base.chmod(0o700)
    assert P.make_base({P.BASE_ENV: str(base)}) == str(base)
    link = tmp_path / "link"
    link.symlink_to(base)
    with pytest.raises(P.Refused, match="not a folder"):
        P.make_base({P.BASE_ENV: str(link)})


def test_what_gputop_asks_is_what_the_loader_reads(tmp_path, monkeypatch):
    pw = ProfileWindows(seconds=2.0, max_steps=5, first_at=None)
    folder = loader_util.stand_in(monkeypatch, tmp_path, run=pw.token)
    before = time.time()
    assert pw.ask("the test", 0.0, wait=False) is None
    got = P.read_request(folder, 1)
    assert got.seconds == 2.0 and got.max_steps == 5 and got.asker == os.getpid()
    assert before + START_LEAD_S - 0.001 <= got.start_at <= time.time() + START_LEAD_S + 0.001
    assert sorted(p.name for p in Path(folder).iterdir()) == ["loaded.json", "request-1.json"]  # nothing half-written
    assert pw.pending
    P.write_answer(folder, 1, os.getpid(), 12.5, P.unavailable("answered by the test"))
    assert not pw.pending
    assert P.read_answer(folder, 1) == {"status": "unavailable", "reason": "answered by the test", "seq": 1,
                                        "pid": os.getpid(), "asked_at": 12.5, "protocol": P.PROTOCOL}
    assert pw.result()["windows"][0]["why_none"] == "answered by the test"


def test_two_gputops_asking_at_once_share_one_request(tmp_path, monkeypatch):
    """Each claims the next request with a hard link: one writes it, every other joins it (the same answer), and
    after its answer the next request is a new one."""
    folder = loader_util.stand_in(monkeypatch, tmp_path)
    got, start = [], threading.Barrier(8)

    def asker(i):
        start.wait()
        got.append(P.ask(folder, P.Request(1.0, 0, 0.0, i)))
    threads = [threading.Thread(target=asker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [(1, False)] + [(1, True)] * 7
    assert P.requests(folder) == [1] and not [p for p in os.listdir(folder) if p.startswith(".")]
    P.write_answer(folder, 1, 1, 0.0, P.unavailable("x"))
    assert P.ask(folder, P.Request()) == (2, False)


def test_old_requests_and_answers_are_let_go_of(tmp_path, monkeypatch):
    folder = loader_util.stand_in(monkeypatch, tmp_path)
    for seq in range(1, P.KEEP + 4):
        assert P.ask(folder, P.Request()) == (seq, False)
        P.write_answer(folder, seq, 1, 0.0, P.unavailable("x"))
    assert P.requests(folder) == list(range(4, P.KEEP + 4))


def test_a_folder_whose_process_is_gone_is_stale_once_old(tmp_path, monkeypatch):
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    folder = loader_util.stand_in(monkeypatch, tmp_path, pid=proc.pid)
    assert not P.stale(folder)  # fresh: its answers may not be read yet
    os.utime(folder, (time.time() - 3600, time.time() - 3600))
    assert P.stale(folder)
    mine = loader_util.stand_in(monkeypatch, tmp_path)
    os.utime(mine, (time.time() - 3600, time.time() - 3600))
    assert not P.stale(mine)  # its process runs


def test_every_field_of_a_cupti_answer_is_named():
    win = cw.summary([("k", 1_000, 3_000), ("Memcpy HtoD", 3_000, 4_000)], 0, 5_000)
    assert set(win) <= set(P.ANSWER_FIELDS), set(win) - set(P.ANSWER_FIELDS)
    assert set(cw.unavailable("why")) <= set(P.ANSWER_FIELDS)


def test_the_protocol_is_stdlib_only_and_the_loader_loads_its_files_by_path():
    for name in ("protocol", "agent", "sitecustomize", "torch_answer", "torch_window", "quiet_stderr",
                 "cupti_teardown"):
        path = Path(LOADER_DIR) / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for n in names:
                assert n.split(".")[0] in sys.stdlib_module_names, f"{name}.py imports {n}"
    agent = (Path(LOADER_DIR) / "agent.py").read_text()
    assert '_protocol = _load("protocol")' in agent and "import gputop" not in agent
    assert json.loads(json.dumps(P.ANSWER_FIELDS))  # (a plain table)
    assert stat.S_IMODE(0o700) == 0o700
