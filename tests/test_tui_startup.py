"""gputop's start-up (tui.early_frame): the source opened and its first tick read on a thread while Textual is
imported, and that tick painted at once in the monitor's words, on a terminal only; the app then draws the
same tick and samples on from there."""

from __future__ import annotations

import os
import re

import pytest

from gputop.cli import parse
from gputop.telemetry.errors import SourceError
from gputop.tui.early_frame import PENDING, ALT_SCREEN, LEAVE, EarlyStart
from pilot_util import sync, wait_screen
from pty_util import Pty

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
BARS = re.compile("[█▏▎▍▌▋▊▉]")


@pytest.fixture
def term():
    """A pseudo-terminal of 100 x 30: ``out`` is the program's side, ``read()`` what it wrote."""
    t = Pty(100, 30)
    yield t
    t.close()


def early_lines(text: str) -> list[str]:
    assert text.startswith(ALT_SCREEN)  # drawn in the alternate screen, where Textual draws next
    return [ANSI.sub("", line) for line in text.split("\r\n")]


def test_the_early_frame_shows_the_tick_with_gpm_numbers_in_the_monitors_words(term):
    early = EarlyStart(parse(["--demo"])[0], out=term.out)
    early.join()
    config = early.config()
    assert early.painted
    first, second = term.read().split(ALT_SCREEN)[1:]  # the first tick at once, then the second (Textual is slow)
    rows = [ANSI.sub("", ln).strip() for ln in first.split("\n")]
    sm = next(row for row in rows if row.startswith("SM activity"))
    assert sm.endswith(PENDING)  # the first tick has no GPM rates yet: said so, not n/a
    lines = early_lines(ALT_SCREEN + second)
    assert len(lines) <= 30 and all(len(line) <= 100 for line in lines)
    assert "H200" in lines[0] and "DEMO" in lines[0] and "[1 monitor]" in lines[0]
    assert lines[1].strip().startswith("GPU 0 NVIDIA H200")
    sm = next(line for line in lines if line.strip().startswith("SM activity"))
    assert sm.split()[-1].endswith("%")  # the second tick: GPM's rates need two samples, the first has none
    assert any(line.strip().startswith("Memory") and "GiB" in line for line in lines)
    assert any("Clocks SM/mem" in line for line in lines)  # 30 rows: the monitor's compact rows (under 32)
    ticks = config.sampler.window()
    assert len(ticks) == 2 and ticks[0]["gpus"][0]["sm_active_pct"] is None
    assert not config.sampler.running  # the app starts the sampling thread


def test_the_early_frame_of_several_gpus_lists_each_in_the_strip(term):
    """A recorded 4-H100 node: the strip lists every GPU, the first selected, then the first GPU's rows (the
    early frame used to fail on more than one GPU, so Textual painted first)."""
    from pathlib import Path

    trace = Path(__file__).parent / "data" / "traces" / "corpus_multi_h100x4" / "comms_mlp.jsonl.gz"
    early = EarlyStart(parse(["--replay", str(trace)])[0], out=term.out)
    early.join()
    early.config()
    assert early.painted
    lines = early_lines(ALT_SCREEN + term.read().split(ALT_SCREEN)[-1])  # the last frame painted
    strip = [line for line in lines if re.match(r"\s*(▶ )?GPU\d H100", line)]
    assert [line.split()[0 if not line.strip().startswith("▶") else 1] for line in strip] == ["GPU0", "GPU1", "GPU2",
                                                                                              "GPU3"]
    assert strip[0].strip().startswith("▶")
    assert any(line.strip().startswith("SM activity") for line in lines)


@sync
async def test_the_app_draws_the_same_rows_from_the_same_tick(term):
    """The monitor's first frame draws the tick the early frame showed: each of the early frame's device rows
    (label and value) is on the monitor's screen, and the app's Sticky saw the ticks read before it."""
    from gputop.tui.app import make_app

    early = EarlyStart(parse(["--demo"])[0], out=term.out)
    early.join()
    config = early.config()
    config.start_sampler, config.fps = False, 0
    lines = early_lines(ALT_SCREEN + term.read().split(ALT_SCREEN)[-1])  # the last frame painted: the second tick
    app = make_app(config)
    early.hand_over(app)
    assert app.model.sticky.last[0]  # the first two ticks observed
    app.lifecycle.start_sampling()
    rows = [line for line in lines[2:-1] if line.strip()]
    assert len(rows) >= 10
    # the bar's width may differ (the panel is narrower than the terminal): compare the words
    wanted = [" ".join(BARS.sub(" ", row).split()) for row in rows]

    def every_row(text: str) -> bool:
        screen = [" ".join(BARS.sub(" ", line).split()) for line in text.splitlines()]
        return all(any(words in line for line in screen) for words in wanted)

    async with app.run_test(size=(100, 30)) as pilot:
        await wait_screen(pilot, every_row)


def test_nothing_is_painted_off_a_terminal_nor_when_asked_not_to(term, tmp_path):
    with open(tmp_path / "out", "w") as f:
        early = EarlyStart(parse(["--demo"])[0], out=f)
        early.join()
        early.config()
    assert not early.painted and (tmp_path / "out").read_text() == ""
    served = EarlyStart(parse(["--demo"])[0], paint=False, out=term.out)  # gputop --serve: a browser
    assert len(served.config().sampler.window()) == 1  # no second tick waited for either
    assert not served.painted and term.read() == ""


def test_without_a_gpu_the_monitor_draws_first(term):
    """The live source on a machine without a GPU: nothing early; the monitor's "no GPU" page says why."""
    early = EarlyStart(parse([])[0], out=term.out)
    config = early.config()
    if config.source.static():
        pytest.skip("this machine has a GPU")
    assert config.sampler.latest() is not None  # the host was read
    assert not early.painted and term.read() == ""


def test_textual_ready_first_is_not_kept_waiting_for_a_second_tick(term):
    """config() called before the second tick (Textual imported within a sampling interval): the thread does not
    wait for it (Textual's frame comes next; the first tick may have been painted, once); the app samples on from
    the first tick."""
    early = EarlyStart(parse(["--demo"])[0], out=term.out)
    config = early.config()  # at once: the demo's first tick has no GPM numbers, the second is not waited for
    assert term.read().count(ALT_SCREEN) == (1 if early.painted else 0)
    assert len(config.sampler.window()) == 1


def test_a_source_error_is_raised_by_config_and_nothing_is_painted(term):
    early = EarlyStart(parse(["--demo", "--gpu", "7"])[0], out=term.out)
    with pytest.raises(SourceError):
        early.config()
    assert not early.painted and term.read() == ""
    early.leave()  # nothing to leave
    assert term.read() == ""


def test_leave_returns_to_the_normal_screen_once(term):
    early = EarlyStart(parse(["--demo"])[0], out=term.out)
    early.join()
    early.config()
    term.read()
    early.leave()
    early.leave()
    assert term.read() == LEAVE


def test_settle_gc_turns_the_collector_back_on():
    """gputop's start-up runs with the collector off (main_tui); settle_gc, 3 s in, collects, freezes what start-up
    left and turns it on again."""
    import gc

    from gputop.tui.lifecycle import settle_gc

    gc.disable()
    try:
        settle_gc()
        assert gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_gputop_in_a_terminal_starts_draws_and_quits():
    """`gputop --demo` in a pseudo-terminal: the early frame (when the first ticks were read before Textual was
    imported) and then the monitor in the same alternate screen; q quits with 0 and the normal screen back."""
    import sys

    t = Pty(100, 30)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("NO_COLOR", None)
    try:
        t.spawn([sys.executable, "-m", "gputop", "--demo"], env=env)
        t.wait_text("quit", 60)  # the key bar: Textual's frame
        t.press("q")
        assert t.wait(30) == 0
        out = t.read()
    finally:
        t.close()
    assert out.startswith(ALT_SCREEN)
    body = out[len(ALT_SCREEN):]
    early, entered, textual = body.partition(ALT_SCREEN)  # Textual enters it again (no clear there)
    if not entered:  # no early frame: Textual was ready first
        early, textual = "", body
    assert "quit" in textual and "\x1b[?1049l" in textual[-200:]
    if early:  # the monitor's rows, no key bar (that is Textual's)
        assert "SM activity" in early and "quit" not in early


def test_after_leave_nothing_is_painted(term):
    """^C or an error before Textual took over: leave(), and a paint still under way draws nothing. The thread
    may have painted the first tick before leave() came (it starts at once): then leave() took the terminal back
    to the normal screen, and nothing came after that."""
    early = EarlyStart(parse(["--demo"])[0], out=term.out)
    early.leave()
    early.join()
    out = term.read()
    assert not early.painted
    assert out == "" or (out.startswith(ALT_SCREEN) and out.endswith(LEAVE) and out.count(LEAVE) == 1), out[-200:]
