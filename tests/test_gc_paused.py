"""The collector held off while a fleet's answers are read (gputop/fleet/gc_paused.py): off within, as it was after
the last holder leaves, whatever raised; holders nest and overlap across threads."""

from __future__ import annotations

import gc
import threading

import pytest

from gputop.fleet.gc_paused import paused, while_paused


@pytest.fixture(autouse=True)
def collector_as_it_was():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_within_and_back_after_even_where_the_read_raised():
    gc.enable()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer holder still reads
    assert gc.isenabled()
    with pytest.raises(ValueError), paused():
        raise ValueError("a read that failed")
    assert gc.isenabled()

    @while_paused
    def read():
        return gc.isenabled()
    assert read() is False and gc.isenabled()


def test_a_collector_someone_turned_off_stays_off():
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()


def test_two_threads_reading_at_once_turn_it_back_on_when_the_last_leaves():
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def other():
        with paused():
            inside.set()
            leave.wait(10)
    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread still reads
    leave.set()
    t.join(10)
    assert gc.isenabled()
