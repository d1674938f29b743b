"""The live verdict follows the work and never contradicts what it cites (CPU only: recorded traces).

* the change detector (gputop.analysis.segments) finds the demo's phase changes within half a second, and
  no change in a steady or a bursty (input-starved) recording;
* the TUI's verdict code path (the model's gputop.analysis.live.LiveNode fed every tick, as the sampler feeds it,
  and read through gputop.tui.monitor.verdict.Diagnosis as the monitor page reads it) replayed over every recorded
  trace: at every frame the verdict's class agrees with the numbers it cites, and those numbers are the means of
  the window it says it judged;
* the contradictions seen in ``gputop --demo`` (issue 11) are gone: the copy phase is not tensor-bound, the
  tiny kernels do not cite DRAM, the idle tail is not PCIe-bound;
* the live verdict names each demo phase within about a second of its start.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import is_busy, measure
from gputop.analysis.live import LiveNode
from gputop.analysis.peaks import compute_peaks
from gputop.analysis.rules import compute_bound, idle, input_starved, latency_bound, memory_bound, pcie_bound
from gputop.analysis.rules.compute_bound import best_pipe
from gputop.analysis.segments import segment_starts
from gputop.telemetry.trace import demo_trace_path, read_trace
from gputop.tui.monitor.verdict import Diagnosis
from verdict_util import check_text_quotes_evidence

DATA = Path(__file__).parent / "data"
TRACES = [Path(demo_trace_path())] + sorted((DATA / "traces").glob("*.jsonl.gz")) + [DATA / "tui_synthetic.jsonl.gz"]
DEMO_PHASES = {  # the demo's phase labels (scripts/record_demo.py) -> class
    "idle": "idle", "matmul bf16": "compute-bound", "device copy": "memory-bound",
    "tiny kernels": "latency-bound", "pageable host-to-device": "pcie-bound",
}
FOLLOW_S = 1.5  # the live verdict names a new phase within this long after its start


def load(path):
    header, rows = read_trace(str(path))
    ticks = [r for r in rows if r["type"] == "tick"]
    marks = [(r["t"], r["label"]) for r in rows if r["type"] == "mark"]
    static = header["devices"][0]
    return static, compute_peaks(static), ticks, marks


def replay(path):
    """(tick, verdict, words, window ticks) at every tick, through the TUI's verdict code path."""
    static, peaks, ticks, _ = load(path)
    node = LiveNode([0], [static], [peaks], selected=lambda: 0)
    for tick in ticks:
        node.feed(tick)
        diag = Diagnosis(node.snapshot(), 0)
        assert diag.error is None and node.node_error is None, (diag.error, node.node_error)
        yield tick, diag.verdict, diag.words(), ticks, static, peaks


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-3)


CITED = ("util_gpu_pct", "sm_active_pct", "dram_bw_pct", "tensor_pct", "fp32_pct", "fp64_pct", "pcie_rx_bps",
         "pcie_tx_bps", "feeder_cpu_pct", "busy_sample_pct")


def contradictions(v, ticks, static, peaks, watched_pid=None) -> list[str]:
    """What in verdict ``v`` disagrees with the numbers of its own window (empty: none); ``watched_pid``: the
    process the verdict took as the feeding one (bench/gpu/live_follow_gpu.py's live command)."""
    bad = []
    inside = [t for t in ticks if v.t_start <= t["gpus"][0]["t"] <= v.t_end]
    hosts = [t.get("host") or {} for t in inside]
    ev = measure([t["gpus"][0] for t in inside], static, peaks, hosts, watched_pid)
    for k in CITED:  # the cited numbers are the window's means
        if k in v.evidence and not close(v.evidence[k], ev.get(k)):
            bad.append(f"{k}: cites {v.evidence[k]}, the window's mean is {ev.get(k)}")
    e = v.evidence
    gpm = e.get("sm_active_pct") is not None
    dram = e.get("dram_bw_pct") or 0.0
    _, pipe = best_pipe(e)
    pipe = pipe or 0.0
    util, sm = e.get("util_gpu_pct") or 0.0, e.get("sm_active_pct") or 0.0
    link = e.get("pcie_link_fraction") or 0.0
    if v.cls == "compute-bound" and gpm:
        if pipe < compute_bound.PIPE_BUSY_PCT[0]:
            bad.append(f"compute-bound with its busiest pipe at {pipe:.0f}%")
        if v.subclass == "tensor" and (e.get("tensor_pct") or 0.0) < compute_bound.PIPE_BUSY_PCT[0]:
            bad.append(f"tensor-bound with tensor at {e.get('tensor_pct')}%")
    if v.cls == "memory-bound" and gpm and v.subclass == "kernel mix":  # a busy GPU, DRAM the busiest unit
        if dram < memory_bound.MIX_DRAM_PCT[0] or dram < pipe or util < T.BUSY_NOTHING_PEAK_UTIL_PCT[0]:
            bad.append(f"memory-bound (kernel mix) with DRAM {dram:.0f}%, pipe {pipe:.0f}%, duty {util:.0f}%")
    elif v.cls == "memory-bound" and gpm and v.subclass != "cache":
        if dram < memory_bound.DRAM_BUSY_PCT[0] or dram < pipe:
            bad.append(f"memory-bound with DRAM {dram:.0f}% (busiest pipe {pipe:.0f}%)")
    if v.cls == "latency-bound" and gpm:
        if max(dram, pipe) >= memory_bound.DRAM_BUSY_PCT[1]:
            bad.append(f"latency-bound with a unit near its peak (DRAM {dram:.0f}%, pipe {pipe:.0f}%)")
        if v.subclass == "launch" and sm > latency_bound.LAUNCH_SM_PER_UTIL[1] * max(util, 1.0):
            bad.append(f"launch-bound with SMs {sm:.1f}% busy of {util:.0f}% duty")
    if v.cls == "idle" and v.subclass != "startup":
        if util > idle.IDLE_UTIL_PCT[1] * 2 or sm > idle.IDLE_SM_ACTIVE_PCT[1] * 2 or link >= pcie_bound.PCIE_LINK_FRACTION[1]:
            bad.append(f"idle with duty {util:.0f}%, SMs {sm:.1f}%, PCIe {100 * link:.0f}% of the link")
    if v.cls == "pcie-bound" and link < pcie_bound.PCIE_LINK_FRACTION[0]:
        bad.append(f"PCIe-bound with the link {100 * link:.1f}% busy")
    if v.cls in ("input-starved", "host-bound") and util >= input_starved.STARVED_UTIL_PCT[1]:
        bad.append(f"{v.cls} with kernels active {util:.0f}% of the time")
    if v.cls == "host-bound" and (e.get("feeder_cpu_pct") or 0.0) < input_starved.FEEDER_CPU_PCT[0]:
        bad.append(f"host-bound with the process tree at {e.get('feeder_cpu_pct')}% CPU")
    return bad


# -- change detection -------------------------------------------------------------------------------------
def test_the_detector_finds_each_demo_phase_change_within_half_a_second():
    static, peaks, ticks, marks = load(demo_trace_path())
    starts = segment_starts(ticks, 0, peaks)
    for t, label in marks:
        work = any(label.startswith(k) for k in DEMO_PHASES if k != "idle")
        if work or label.startswith("idle") and t > ticks[0]["t"] + 10:  # the first idle follows start-up
            near = [s for s in starts if -0.2 <= s - t <= 0.5]
            assert near, f"no change found within 0.5 s of {label!r} at {t - ticks[0]['t']:.1f} s: {starts}"


@pytest.mark.parametrize("name", ["dataloader_starved.input-starved.jsonl.gz",
                                  "tiny_kernels_sync.latency-bound.jsonl.gz"])
def test_a_steady_or_bursty_run_is_one_segment_once_on_the_gpu(name):
    static, peaks, ticks, marks = load(DATA / "traces" / name)
    work = next(t["t"] for t in ticks if is_busy(t["gpus"][0]))  # the first kernel (after CPU set-up)
    starts = [s for s in segment_starts(ticks, 0, peaks) if work + 2.0 < s < ticks[-1]["t"] - 1.0]
    assert starts == [], starts  # bursts every few tenths of a second are one regime


def test_one_odd_sample_is_not_a_change():
    static, peaks, ticks, _ = load(demo_trace_path())
    matmul = [t for t in ticks if (t["gpus"][0].get("tensor_pct") or 0) > 80][:40]
    odd = [dict(t, gpus=[dict(t["gpus"][0], tensor_pct=0.0, sm_active_pct=0.0, util_gpu_pct=0.0)])
           if i in (15, 16, 30) else t for i, t in enumerate(matmul)]
    assert segment_starts(odd, 0, peaks) == [odd[0]["t"]]


# -- the TUI's live verdict over every recorded trace -----------------------------------------------------
# (the corpus' real programs are the slow loop's; the labelled traces, the demo and the workloads' the quick loop's)
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.name.startswith("corpus_") else p
                                  for p in TRACES], ids=lambda p: p.name)
def test_every_frame_agrees_with_what_it_cites(path):
    frames = 0
    for tick, v, words, ticks, static, peaks in replay(path):
        if v is None:
            continue
        frames += 1
        assert words and v.t_start is not None, (tick["t"], words)
        bad = contradictions(v, ticks, static, peaks)
        assert not bad, f"{path.name} at {tick['t'] - ticks[0]['t']:.1f} s: {v.display_name()} " \
                        f"[{words}] {v.evidence_text}: {bad}"
        check_text_quotes_evidence(v.to_dict())
    assert frames > 50


def _at(path, since_mark: str, after_s: float):
    """The live verdict ``after_s`` seconds after the mark whose label starts with ``since_mark``."""
    _, _, _, marks = load(path)
    t0 = next(t for t, label in marks if label.startswith(since_mark))
    for tick, v, words, *_ in replay(path):
        if tick["t"] >= t0 + after_s:
            return v, words
    raise AssertionError("trace ended")


def test_demo_copy_phase_is_not_called_tensor_bound():
    """issue 11: 'during the copy phase (DRAM 88%, tensor 0%) it read compute-bound (tensor)'."""
    for after in (0.8, 1.2, 2.0):
        v, words = _at(demo_trace_path(), "device copy", after)
        assert v.cls == "memory-bound" and v.evidence["tensor_pct"] < 10, (after, v.evidence_text, words)


def test_demo_tiny_kernels_do_not_cite_dram():
    """issue 11: 'during tiny kernels (SM 1%, DRAM 0%) latency-bound (under-filled) ... DRAM 42%'."""
    for after in (1.0, 1.5, 3.0):
        v, words = _at(demo_trace_path(), "tiny kernels", after)
        assert v.cls == "latency-bound" and v.subclass == "launch", (after, v.evidence_text, words)
        assert v.evidence["dram_bw_pct"] < 1 and "DRAM" not in v.evidence_text


def test_demo_idle_tail_is_not_pcie_bound():
    """issue 11: 'during idle PCIe/transfer-bound 8.36 GB/s'."""
    for after in (1.0, 2.0, 3.0):
        v, words = _idle_tail(after)
        assert v.cls == "idle" and (v.evidence.get("pcie_link_fraction") or 0) < 0.04, (after, v.evidence_text, words)


def _idle_tail(after_s):
    _, _, _, marks = load(demo_trace_path())
    t0 = [t for t, label in marks if label.startswith("idle")][-1]
    for tick, v, words, *_ in replay(demo_trace_path()):
        if tick["t"] >= t0 + after_s:
            return v, words
    raise AssertionError("trace ended")


def test_the_live_verdict_names_each_demo_phase_within_a_second_and_a_half():
    _, _, ticks, marks = load(demo_trace_path())
    frames = list(replay(demo_trace_path()))
    for i, (t, label) in enumerate(marks):
        want = next((c for k, c in DEMO_PHASES.items() if label.startswith(k)), None)
        end = marks[i + 1][0] if i + 1 < len(marks) else ticks[-1]["t"] - 1.0  # the recorder's teardown
        if want is None or end - t < 3.0:
            continue
        got = [(f[0]["t"] - t, f[1].cls) for f in frames if t + FOLLOW_S <= f[0]["t"] < end - 0.5]
        assert got and all(c == want for _, c in got), f"{label}: {[g for g in got if g[1] != want][:5]}"


# -- the same through the running TUI (Textual pilot) -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_the_tui_panel_shows_the_window_and_agrees_with_it_at_every_frame(size):
    """The demo replayed as ``gputop --demo`` replays it (looping: twice through, about 80 s of telemetry)
    through the app, a frame after every tick: the verdict panel names the window its verdict judged, quotes
    that verdict's numbers, and the verdict agrees with them; the charts shade that window."""
    from pilot_util import DEMO, sync
    from test_tui import specs

    from gputop.telemetry.trace import ReplaySource
    from gputop.tui.app import GputopApp, TuiConfig

    @sync
    async def run():  # the test app of tests/test_tui.py, with a looping source as --demo has
        app = GputopApp(TuiConfig(ReplaySource(str(DEMO), speed=float("inf"), loop=True), start_sampler=False,
                                  hostname="test-host", specs=specs(), device="cpu", fps=0))
        async with app.run_test(size=size) as pilot:
            static, peaks, one, _ = load(demo_trace_path())
            seen: list[dict] = []
            frames = 0
            for _ in range(2 * len(one)):
                tick = app.model.sampler.step()
                if tick is None:
                    break
                seen.append(tick)
                app.frame(force=True)
                v = app.monitor.verdict
                if v is None:
                    continue
                frames += 1
                panel = app.monitor.verdict_panel
                words = app.monitor.diagnosis.words()
                assert panel.verdict is v and panel.words == words and words
                text = " ".join(" ".join(t.plain for t in panel._lines).split())  # the wrapped lines, re-joined
                assert "verdict: " + v.display_name() in text and " ".join(words.split()) in text
                bad = contradictions(v, seen, static, peaks)
                assert not bad, (round(tick["t"], 1), v.display_name(), v.evidence_text, bad)
                if frames % 100 == 0:
                    await pilot.pause()
                    shaded = [c for c in app.monitor.charts if c.display and c.mark_columns(c.wh[0] - c.EDGE)]
                    assert shaded, "no chart marks the verdict's window"
            assert frames > 1.5 * len(one)

    run()


def test_the_json_timeline_begins_its_segments_where_the_work_changed():
    """The run's timeline (gputop --run's JSON) uses the live verdict's change detection: each demo phase's
    segment starts within half a second of the phase's mark, not on a 2 s window edge."""
    from gputop.evaluate.labelled import diagnose_trace

    _, _, ticks, marks = load(demo_trace_path())
    a = diagnose_trace(demo_trace_path())
    t0 = ticks[0]["t"]
    starts = [s["t_start"] for s in a["gpus"][0]["timeline"]]
    for t, label in marks:
        if any(label.startswith(k) for k in DEMO_PHASES if k != "idle"):
            assert any(-0.2 <= s - (t - t0) <= 0.5 for s in starts), (label, round(t - t0, 2), starts)


@pytest.mark.slow
def test_the_gpu_strip_shows_the_panels_verdict_and_follows_the_phases(tmp_path):
    """Several GPUs: the strip's line for each GPU is that GPU's live verdict - for the selected one the very
    verdict the panel shows - so it follows the demo's phases as the panel does (not a fixed last 3 s)."""
    from pilot_util import sync, two_gpu_trace
    from test_tui import specs

    from gputop.telemetry.trace import ReplaySource
    from gputop.tui.app import GputopApp, TuiConfig

    _, _, one, marks = load(demo_trace_path())

    @sync
    async def run():
        app = GputopApp(TuiConfig(ReplaySource(str(two_gpu_trace(tmp_path)), speed=float("inf")), start_sampler=False,
                                  hostname="test-host", specs=specs(), device="cpu", fps=0))
        async with app.run_test(size=(120, 40)) as pilot:
            strip, named = app.monitor.strip, []
            for _ in range(len(one)):
                tick = app.model.sampler.step()
                if tick is None:
                    break
                app.frame(force=True)
                vs = app.monitor.verdicts
                if app.monitor.verdict is None:
                    continue
                assert len(vs) == 2 and vs[app.model.selected] is app.monitor.verdict
                line = strip._lines[app.model.selected].plain
                assert app.monitor.verdict.display_name() in line, (line, app.monitor.verdict.display_name())
                named.append((tick["t"], vs[0].cls))
            await pilot.pause()
        return named

    named = run()
    for i, (t, label) in enumerate(marks):
        want = next((c for k, c in DEMO_PHASES.items() if label.startswith(k)), None)
        end = marks[i + 1][0] if i + 1 < len(marks) else one[-1]["t"] - 1.0
        if want is None or end - t < 3.0:
            continue
        got = [c for tt, c in named if t + FOLLOW_S <= tt < end - 0.5]
        assert got and set(got) == {want}, (label, sorted(set(got)))


def test_a_steady_regime_is_judged_again_every_every_s_and_a_change_at_once():
    """``every_s`` (the strip's other GPUs: thresholds.LIVE_STRIP_EVERY_S) spaces the judgements of a regime
    that does not change; a new regime is judged as soon as it is old enough (LIVE_MIN_S), as by default."""
    from gputop.analysis.live import LiveVerdict

    static, peaks, ticks, marks = load(demo_trace_path())
    live, judged, lo = LiveVerdict(), [], 0  # (tick time, start of the regime judged)
    for i, tick in enumerate(ticks):
        while ticks[lo]["t"] < tick["t"] - T.LIVE_MAX_S:
            lo += 1
        before = live.judged_t
        live.update(ticks[lo:i + 1], static, peaks, gpu_pos=0, every_s=T.LIVE_STRIP_EVERY_S)
        if live.judged_t != before:
            judged.append((live.judged_t, live.segment_start))
    same = [b[0] - a[0] for a, b in zip(judged, judged[1:]) if a[1] == b[1]]
    assert same and min(same) >= T.LIVE_STRIP_EVERY_S - 0.11, same  # a steady regime: every 5 s, no sooner
    first = {}
    for t, start in judged:
        first.setdefault(start, t)
    assert len(first) >= len(marks) - 1  # every phase of the demo got judged as a regime of its own
    late = {round(s, 1): round(t - s, 2) for s, t in first.items() if t - s > T.LIVE_MIN_S + 0.25}
    assert not late, late  # each new regime judged within ~LIVE_MIN_S of its start
