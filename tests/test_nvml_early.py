"""NVML opened early (gputop/telemetry/nvml_early.py): plain ``gputop`` starts NVML's init and every GPU's static facts
on a thread at its first step; the live source takes them over once, without asking NVML for them again; any other
mode leaves NVML alone."""

from __future__ import annotations

import json
from pathlib import Path

import pynvml
import pytest

from fake_nvml import FakeNvml
from gputop.option_values import opens_live_monitor
from gputop.telemetry import nvml_early
from gputop.telemetry.errors import NoGpu
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.source import SourceSpec, open_source
from gputop.telemetry.static import read_static

ROOT = Path(__file__).resolve().parents[1]
STATIC = json.loads((ROOT / "tests" / "data" / "static" / "h200_recorded.json").read_text())["static"]


@pytest.fixture(autouse=True)
def fresh():
    nvml_early.reset()
    yield
    nvml_early.reset()


@pytest.mark.parametrize("argv, early", [
    ([], True), (["--gpu", "1", "--rate=5"], True), (["--no-color", "-v", "--tour"], True),
    (["--once"], False), (["--demo"], False), (["--replay", "t.jsonl"], False), (["--run", "roofline"], False),
    (["--run", "--", "python", "x.py"], False), (["--tui", "--watch", "1"], False), (["--export"], False),
    (["--source", "prometheus=http://x"], False), (["--help"], False), (["--version"], False),
    (["--serve"], False), (["--record", "f"], False), (["--list"], False),
])
def test_only_the_live_monitor_opens_nvml_early(argv, early):
    assert opens_live_monitor(argv) is early


def test_the_live_source_takes_over_what_was_read_early_and_reads_nothing_again():
    fake = FakeNvml(STATIC)
    nvml_early.start(lib=fake)
    src = open_source(SourceSpec())
    try:
        early_calls = list(fake.calls)
        assert early_calls.count("nvmlInit") == 1 and "nvmlDeviceGetName" in early_calls  # the thread read them
        static = src.static()
        assert [c for c in fake.calls[len(early_calls):] if c in ("nvmlInit", "nvmlDeviceGetName")] == []
        assert static == [read_static(Nvml(FakeNvml(STATIC)), 0)]  # the same facts a fresh read gives
        assert nvml_early.take() is None  # once: a second source opens NVML itself
    finally:
        src.close()


def test_an_early_nvml_that_failed_is_the_same_no_gpu():
    nvml_early.start(lib=FakeNvml(STATIC, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    with pytest.raises(NoGpu) as exc:
        open_source(SourceSpec())
    assert "driver is not loaded" in str(exc.value)


def test_without_a_start_the_source_opens_nvml_itself():
    assert nvml_early.take() is None
