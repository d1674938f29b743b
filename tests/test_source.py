"""The Source protocol (gputop/telemetry/source.py): every source sets every attribute its callers read, with an
honest value where it has nothing to say; opening one from a SourceSpec; the typed errors and their exit codes."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from fake_nvml import FakeNvml
from gputop import exitcodes
from gputop.telemetry.errors import BadSource, NoGpu, SourceError, SourceUnreachable
from gputop.telemetry.live import LiveSource
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.source import DEMO, REPLAY, Source, SourceSpec, check_gpus, open_source
from gputop.telemetry.trace import ReplaySource, demo_trace_path

ROOT = Path(__file__).resolve().parents[1]
STATIC = json.loads((ROOT / "tests" / "data" / "static" / "h200_recorded.json").read_text())["static"]


def test_a_live_source_is_a_source_of_this_machine():
    src = LiveSource(Nvml(FakeNvml(STATIC)))
    try:
        assert isinstance(src, Source)
        assert (src.kind, src.label, src.path, src.loop, src.finished) == ("live", "live", None, False, False)
        assert src.hostname == platform.node() and src.header == {} and src.indices == [0]
        assert src.nvml is not None and src.na_reasons is src.nvml.na_reasons  # the dict NVML fills as calls fail
        tick = src.read()
        assert len(tick["gpus"]) == 1
        src.watch(1)
        src.unwatch(1)
    finally:
        src.close()


def test_a_replay_is_a_source_of_the_recording_machine():
    src = ReplaySource(demo_trace_path(), speed=float("inf"))
    assert isinstance(src, Source)
    assert (src.kind, src.nvml, src.loop, src.finished) == ("replay", None, False, False)
    assert src.path == demo_trace_path() and src.label == "demo.jsonl.gz"
    assert src.hostname == src.header["hostname"] and src.indices == [d["index"] for d in src.static()]
    assert src.na_reasons == dict(src.header.get("na_reasons") or {})
    while src.read() is not None:
        pass
    assert src.finished


def test_open_source_opens_what_the_spec_names():
    demo = open_source(SourceSpec(kind=DEMO, loop=True))
    assert demo.kind == "replay" and demo.loop and demo.path == demo_trace_path()
    replay = open_source(SourceSpec(kind=REPLAY, path=demo_trace_path(), speed=2.0))
    assert replay.kind == "replay" and not replay.loop and replay.speed == 2.0
    with pytest.raises(BadSource, match="--gpu 7: no such GPU"):
        open_source(SourceSpec(kind=DEMO, gpus=(7,)))
    with pytest.raises(BadSource, match="no such file"):
        open_source(SourceSpec(kind=REPLAY, path="/no/such/trace.jsonl"))
    assert check_gpus((), demo.static()) == list(range(len(demo.static())))


def test_live_without_nvml_is_no_gpu_unless_host_only_will_do(monkeypatch):
    from gputop.telemetry import nvml

    monkeypatch.setattr(nvml.Nvml, "available", lambda self: False)
    with pytest.raises(NoGpu) as exc:
        open_source(SourceSpec())
    assert str(exc.value) and "--demo" not in str(exc.value)  # what works without a GPU is the mode's to say
    host_only = open_source(SourceSpec(), need_gpu=False)
    assert host_only.kind == "live" and host_only.indices == [] and host_only.static() == []


@pytest.mark.parametrize("exc, code", [(BadSource("x"), exitcodes.USAGE), (NoGpu("x"), exitcodes.NO_GPU),
                                       (SourceUnreachable("x"), exitcodes.NO_GPU), (SourceError("x"), exitcodes.USAGE)])
def test_source_errors_map_to_the_exit_code_table(exc, code):
    assert exitcodes.code_for(exc) == code
    failure = exitcodes.failure_for(exc)
    assert (failure.code, failure.kind) == (code, "no_gpu" if code == exitcodes.NO_GPU else "bad_usage")
