"""The node's live verdicts in one model (gputop.analysis.live.LiveNode), fed once per tick on the sampler's thread
and read by the TUI, --export and --serve (CPU only: the recorded multi-GPU corpus, tests/data/traces/corpus_multi_*).

* fed tick by tick, it gives every GPU the verdict the TUI's monitor page and the exporter computed themselves
  before it (their code as it was at acd2dca, restated here: a frame, or a scrape, after every tick), with the
  TUI's cadence (the selected GPU every LIVE_EVERY_S, the strip's others every LIVE_STRIP_EVERY_S), the exporter's
  (every GPU every LIVE_EVERY_S) and the TUI's watched pid;
* the one difference, on purpose: the node's jobs are judged afresh each time, where the frontends annotated the
  same verdict objects in place and an older judgement's groups stuck (judge_node annotates once);
* the sampler's thread feeds it each tick exactly once; a frame of the TUI judges nothing.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import pytest

from gputop.analysis import live, thresholds as T
from gputop.analysis.comms import judge_node
from gputop.analysis.live import LiveNode, LiveVerdict
from gputop.analysis.peaks import compute_peaks
from gputop.telemetry.sampler import Sampler
from gputop.telemetry.trace import ReplaySource

TRACES = Path(__file__).parent / "data" / "traces"
MULTI = sorted(TRACES.glob("corpus_multi_*/*.jsonl.gz"))
# each trace takes 0.6-2 s on 2 busy cores: the quick loop judges the 2-GPU node's straggler and its collective
# (comms_mlp), the full suite every trace of both nodes
QUICK = {("corpus_multi_h100x2", "straggler.jsonl.gz"), ("corpus_multi_h100x2", "comms_mlp.jsonl.gz")}
CASES = [p if (p.parent.name, p.name) in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in MULTI]


def load(path):
    src = ReplaySource(str(path), speed=float("inf"))
    statics = src.static()
    return src.ticks, statics, [compute_peaks(s) for s in statics]


def last_s(ticks, n, seconds):
    """The ticks of the ``seconds`` up to tick ``n``, oldest first (what the frontends read of the sampler)."""
    lo = n
    while lo > 0 and ticks[lo - 1]["t"] >= ticks[n]["t"] - seconds:
        lo -= 1
    return ticks[lo:n + 1]


def frontend_before(ticks, statics, peaks, selected=None, watched=lambda n: None, window_s=T.LIVE_MAX_S,
                    names=None):
    """(verdicts, previous flags) after every tick, as a frontend computed them before LiveNode: each GPU's
    LiveVerdict fed the last ``window_s`` of ticks, the selected GPU (None: every GPU) judged again every
    LIVE_EVERY_S and the others every LIVE_STRIP_EVERY_S, then the node's jobs together (judge_node; on copies:
    see test_the_nodes_jobs_are_judged_afresh_not_on_an_older_judgement)."""
    lives = [LiveVerdict() for _ in statics]
    positions = list(range(len(statics)))
    for n in range(len(ticks)):
        window = last_s(ticks, n, window_s)
        vs = [lv.update(window, statics[i], peaks[i], gpu_pos=i, watched_pid=watched(n),
                        every_s=T.LIVE_EVERY_S if selected in (None, i) else T.LIVE_STRIP_EVERY_S)
              for i, lv in enumerate(lives)]
        yield judge_node([copy.deepcopy(v) for v in vs], window, positions, names), [lv.previous for lv in lives]


def node_ticks(ticks, statics, peaks, selected=None, watched=lambda n: None):
    """The node's snapshot after every tick, fed one tick after another."""
    n_fed = [0]
    node = LiveNode(list(range(len(statics))), statics, peaks, watched_pid=lambda: watched(n_fed[0]),
                    selected=selected)
    for n, tick in enumerate(ticks):
        n_fed[0] = n
        node.feed(tick)
        yield node.snapshot()


def first_pid(ticks) -> int:
    return next(p["pid"] for t in ticks for g in t["gpus"] for p in g.get("processes") or [])


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_node_gives_each_gpu_the_verdict_the_tui_and_the_exporter_gave_at_every_tick(path):
    ticks, statics, peaks = load(path)
    pid, half = first_pid(ticks), len(ticks) // 2
    watched = lambda n: pid if n >= half else None  # noqa: E731  (a workload that starts: the TUI's watched pid)
    last = len(statics) - 1
    runs = {  # the TUI with its first or its last GPU selected; the exporter (a scrape after every tick)
        "tui": (dict(selected=0, watched=watched), dict()),
        "tui, last GPU selected": (dict(selected=last), dict()),
        "export": (dict(), dict(window_s=T.LIVE_MAX_S + T.LIVE_EVERY_S, names=[s["index"] for s in statics])),
    }
    for what, (mode, before) in runs.items():
        judged = 0
        for n, (snap, (want, previous)) in enumerate(zip(node_ticks(ticks, statics, peaks, **mode),
                                                         frontend_before(ticks, statics, peaks, **mode, **before))):
            assert snap.t == ticks[n]["t"]
            assert snap.verdicts() == want, (what, n)
            assert [g.previous for g in snap.gpus] == previous, (what, n)
            judged += sum(v is not None for v in want)
        assert judged > len(ticks), what  # verdicts there were, on most ticks


def test_the_nodes_jobs_are_judged_afresh_not_on_an_older_judgement():
    """Two jobs on one node (the composed 8-GPU trace, each job its own process group), fed tick by tick: each
    job's comms-bound GPUs say 4 and 3 of their group. The monitor page, a frame after every tick, said [4, 4, 3, 3]
    for the first job's: GPUs 2 and 3 kept the group of a judgement made while GPU 1 was not comms-bound yet.
    A hung job on 2 GPUs whose rank 1 leaves its GPU: once it has left, the stalled GPU 0 says so (a stuck
    collective, GPU 1 left), where the page kept GPU 0's judgement from before (a stall of its own: no subclass)."""
    from test_tui_eight_gpus import COMPOSED, TICK  # (its recordings' processes each in a group of their own)

    ticks, statics, peaks = load(COMPOSED)
    for snap in node_ticks(ticks[:TICK], statics, peaks, selected=0):
        pass
    evs = [v.evidence for v in snap.verdicts()]
    assert [evs[i].get("group_gpus") for i in (0, 1, 2, 3)] == [4] * 4
    assert [evs[i].get("group_gpus") for i in (4, 6, 7)] == [3] * 3

    ticks, statics, peaks = load(TRACES / "corpus_multi_h100x2" / "hang_idle.jsonl.gz")
    for snap in node_ticks(ticks, statics, peaks, selected=0):
        pass
    v0, v1 = snap.verdicts()
    assert (v0.cls, v0.subclass, v0.job["left"]) == ("stalled", "collective", [1]), v0.evidence_text
    assert v1.cls == "idle" and v1.job == {"stalled": [0]} and "left the job" in v1.notes[0]


def test_the_sampler_thread_feeds_the_node_once_per_tick():
    """A sampler thread replaying 4 GPUs: the node is fed every tick it read, once, on that thread."""
    src = ReplaySource(str(TRACES / "corpus_multi_h100x4" / "straggler.jsonl.gz"), speed=float("inf"))
    sampler = Sampler(src)
    node = LiveNode(list(range(4)), src.static(), [compute_peaks(s) for s in src.static()], selected=0)
    fed = []

    class Counted(LiveNode):
        def feed(self, tick):
            fed.append((threading.get_ident(), tick["t"]))
            super().feed(tick)

    node.__class__ = Counted
    node.attach(sampler)
    sampler.start()
    thread = sampler._thread
    thread.join(60.0)
    assert not thread.is_alive() and sampler.errors == 0, sampler.last_error
    assert [t for _, t in fed] == [t["t"] for t in sampler.window()] == [t["t"] for t in src.ticks]
    assert {ident for ident, _ in fed} == {thread.ident}
    assert node.ticks_fed == len(src.ticks) and node.snapshot().t == src.ticks[-1]["t"]
    assert 0 < node.judgements < len(src.ticks) / 2  # most ticks are not due: they judge nothing
    assert all(v is not None for v in node.snapshot().verdicts())


def test_a_node_attached_to_a_running_sampler_judges_the_ticks_it_holds_at_once():
    """A command's session (gputop --tui --run) or --export beside --run: the sampler ran before the node was
    attached. The ticks it holds (its last LIVE_MAX_S) are judged at once, as the monitor page's first frame
    judged them; the tick in flight while attaching is not fed twice."""
    src = ReplaySource(str(TRACES / "corpus_multi_h100x2" / "hang_exit.jsonl.gz"), speed=float("inf"))
    sampler = Sampler(src)
    statics = src.static()
    peaks = [compute_peaks(s) for s in statics]
    for _ in range(350):  # 35 s: more than LIVE_MAX_S
        sampler.step()
    node = LiveNode([0, 1], statics, peaks, selected=0).attach(sampler)
    window = sampler.window(T.LIVE_MAX_S)
    first = [LiveVerdict().update(window, statics[i], peaks[i], gpu_pos=i) for i in (0, 1)]
    want = judge_node(copy.deepcopy(first), window, [0, 1])
    assert node.snapshot().verdicts() == want and all(want) and node.ticks_fed == len(window) < 350
    node.feed(sampler.latest())  # the sampler's tick in flight: already held
    assert node.ticks_fed == len(window) and node.snapshot().t == window[-1]["t"]
    sampler.step()
    assert node.ticks_fed == len(window) + 1 and node.snapshot().t == sampler.latest()["t"]


def test_a_frame_of_the_tui_judges_nothing(monkeypatch):
    """The TUI (4 GPUs, ticks stepped by hand): its live verdicts are judged where the sampler's ticks feed its
    model's node; its frames only read them (the strip's and the panel's verdicts are the node's snapshot)."""
    import asyncio

    from test_tui_snapshots import make

    judged = []
    real = live.classify
    monkeypatch.setattr(live, "classify", lambda *a, **k: judged.append(threading.get_ident()) or real(*a, **k))

    async def go():
        app = make(TRACES / "corpus_multi_h100x4" / "straggler.jsonl.gz")
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            for _ in range(20):
                for _ in range(5):
                    app.model.sampler.step()
                before = len(judged)
                app.frame(force=True)
                assert len(judged) == before  # the frame judged nothing
                snap = app.model.live.snapshot()
                assert app.monitor.verdicts == snap.verdicts() and app.monitor.verdict is snap.gpus[0].verdict
            assert judged and app.monitor.diagnosis.words()

    asyncio.run(go())


def test_a_gpu_just_selected_is_judged_at_once_and_then_every_second():
    """The strip's GPUs are judged every LIVE_STRIP_EVERY_S; the one selected (the panel's) is judged at once
    (not shown with the strip's older verdict until the next tick) and then every LIVE_EVERY_S."""
    ticks, statics, peaks = load(TRACES / "corpus_multi_h100x4" / "comms_mlp.jsonl.gz")
    node = LiveNode(list(range(4)), statics, peaks, selected=0)
    ends = {i: [] for i in range(4)}
    for n, tick in enumerate(ticks):
        if n == 200:
            stale = node.snapshot().gpus[3].judged_t
            node.select(3)
            snap = node.snapshot()  # no new tick since: judged on the ticks it had
            assert stale < snap.t - T.LIVE_EVERY_S and snap.gpus[3].judged_t == snap.t
        node.feed(tick)
        for i, g in enumerate(node.snapshot().gpus):
            if g.verdict is not None and (not ends[i] or ends[i][-1][1] != g.judged_t):
                ends[i].append((n, g.judged_t, g.verdict.t_start))

    def gaps(i, lo, hi):  # between the judgements of one regime (a change is judged at once)
        js = [(t, s) for n, t, s in ends[i] if lo <= n < hi]
        return [b[0] - a[0] for a, b in zip(js, js[1:]) if a[1] == b[1]]

    assert gaps(3, 0, 200) and min(gaps(3, 0, 200)) >= T.LIVE_STRIP_EVERY_S - 0.11
    assert gaps(3, 200, len(ticks)) and max(gaps(3, 200, len(ticks))) <= T.LIVE_SLIDING_EVERY_S + 0.11
    assert min(gaps(3, 200, len(ticks))) >= T.LIVE_EVERY_S - 0.11
    assert min(gaps(0, 200, len(ticks))) >= T.LIVE_STRIP_EVERY_S - 0.11


def test_a_replay_that_starts_again_starts_the_verdicts_afresh():
    """Time going back (the demo loops, a replay restarted): the node forgets its ticks and judges anew."""
    ticks, statics, peaks = load(TRACES / "corpus_multi_h100x2" / "comms_mlp.jsonl.gz")
    first = list(node_ticks(ticks, statics, peaks, selected=0))
    node = LiveNode([0, 1], statics, peaks, selected=0)
    for tick in ticks:
        node.feed(tick)
    again = []
    for tick in ticks:
        node.feed(tick)
        again.append(node.snapshot())
    assert [s.verdicts() for s in again] == [s.verdicts() for s in first]


def test_the_nodes_jobs_are_judged_when_a_gpu_was_or_a_tick_lists_processes():
    """The node's jobs follow the process lists NVML gives (once a second live; every other tick in this
    recording), even while no GPU is due; any other tick publishes nothing new (the same verdicts)."""
    ticks, statics, peaks = load(TRACES / "corpus_multi_h100x2" / "comms_mlp.jsonl.gz")
    node = LiveNode([0, 1], statics, peaks)
    listed = {n for n, t in enumerate(ticks) if any(g.get("processes") is not None for g in t["gpus"])}
    published, judged = set(), set()
    for n, tick in enumerate(ticks):
        before, count = node.snapshot(), node.judgements
        node.feed(tick)
        if node.snapshot().gpus is not before.gpus:
            published.add(n)
        if node.judgements != count:
            judged.add(n)
        assert node.snapshot().t == tick["t"]
    assert listed and judged - listed and published == listed | judged
