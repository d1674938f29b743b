"""A profile loader's folder for a test (gputop/runner/profile_loader/protocol.py), and answers written into it.

``stand_in(monkeypatch, tmp_path, run=TOKEN)`` makes ``BASE/PID`` for the test's own process, as a loader makes its
own at start: gputop's side (gputop/session/profile_target.py) then finds a live process with a loader there and
asks it; the test answers in the loader's place (``answer``). Real loaders are run by the tests that start real
programs (test_attribution.py, test_attribution_anywhere.py)."""

from __future__ import annotations

import os

from gputop.runner.profile_loader import protocol as P


def stand_in(monkeypatch, tmp_path, run: str | None = None, frameworks=("torch",), pid: int | None = None) -> str:
    """The folder of a stand-in loader for process ``pid`` (default: this one), in a base of ``tmp_path``."""
    monkeypatch.setenv(P.BASE_ENV, str(tmp_path / "pbase"))
    pid = os.getpid() if pid is None else pid
    folder = P.make_folder(pid)
    P.write_loaded(folder, {"pid": pid, "start": P.process_start(pid), "run": run, "frameworks": list(frameworks),
                            "cuda": False, "loader": "test"})
    return folder


def answer(folder: str, seq: int, doc: dict, pid: int | None = None) -> None:
    P.write_answer(folder, seq, os.getpid() if pid is None else pid, 0.0, doc)


class Answered:
    """A window already answered by ``answers`` (the loader's answers, each with its ``pid``), in the place of a
    :class:`gputop.session.profile_target.Asked` (a ProfileWindows' ``asked`` entry)."""

    def __init__(self, answers: list[dict]):
        self._answers = {a["pid"]: a for a in answers}
        self.seqs = {a["pid"]: a.get("seq", 1) for a in answers}
        self.joined: set[int] = set()
        self.done = True

    def answers(self) -> dict[int, dict]:
        return dict(self._answers)
