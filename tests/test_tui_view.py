"""The TUI's pure parts: charts, device-panel rows, header, results parsing, verdict adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gputop.format as fmt
from gputop.analysis import thresholds as T
from gputop.analysis.live import LiveNode
from gputop.analysis.verdict import Verdict
from gputop.telemetry.trace import read_trace
from gputop.tui.results.lessons import roofline
from gputop.tui.model import view
from gputop.tui.monitor.verdict import Diagnosis
from gputop.tui.widgets import charts
from gputop.tui.results import view as results

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "gputop" / "data" / "demo.jsonl.gz"
RUN_DOCS = Path(__file__).parent / "data" / "tui_runs"


def demo():
    header, rows = read_trace(str(DEMO))
    return header["devices"][0], [r for r in rows if r["type"] == "tick"]


# -- charts ---------------------------------------------------------------------------------------
def test_bucket_means_and_gaps():
    ts = [0.0, 0.1, 0.2, 0.3, 1.5]
    vs = [10, 20, None, 30, 50]
    b = charts.bucket(ts, vs, t_end=1.9, span=2.0, n=4)  # buckets [0,.5) [.5,1) [1,1.5) [1.5,2)
    assert b == [20.0, None, None, 50.0]


def test_bucket_drops_points_outside_the_span():
    assert charts.bucket([0.0, 10.0], [1, 2], t_end=10.0, span=1.0, n=2) == [None, 2.0]


def test_bucket_series_fed_in_pieces_matches_bucketing_at_once():
    _, ticks = demo()
    ts = [t["t"] for t in ticks]
    vs = [t["gpus"][0]["sm_active_pct"] for t in ticks]
    series = charts.BucketSeries(span=20.0, n=37)
    seen = 0
    for end in range(7, len(ts), 13):  # frames every 13 ticks; the window moves on
        for t, v in zip(ts[seen:end], vs[seen:end]):
            series.add(t, v)
        seen = end
        assert series.values(ts[end - 1]) == pytest.approx(charts.bucket(ts[:end], vs[:end], ts[end - 1], 20.0, 37),
                                                            nan_ok=True)
        assert series.index(ts[end - 1]) in series.dirty
        series.dirty.clear()
    assert len(series._sums) <= 2 * 37 + 8  # old buckets are dropped


def test_dot_levels_scale_and_gaps():
    assert charts.dot_levels([0, 50, 100, None], width=2, height=2, lo=0, hi=100) == [0, 4, 8, 0]
    assert charts.dot_levels([1.0], width=2, height=1, lo=0, hi=100) == [0, 0, 0, 1]  # padded on the left
    assert charts.dot_level(0.01, 40, 0, 100) == 1 and charts.dot_level(250, 40, 0, 100) == 40


def test_area_rows_match_filling_each_cell():
    import random

    def cell_by_cell(levels, h):
        pairs = list(zip(levels[0::2], levels[1::2]))
        return ["".join(charts._FILL[min(4, max(0, a - 4 * (h - 1 - k)))][min(4, max(0, b - 4 * (h - 1 - k)))]
                        for a, b in pairs) for k in range(h)]

    rng = random.Random(7)
    for _ in range(500):
        h, w = rng.randint(1, 10), rng.randint(1, 40)
        kind = rng.choice(["idle", "full", "empty", "top", "any"])
        pick = {"idle": lambda: rng.choice([0, 1]), "full": lambda: 4 * h, "empty": lambda: 0,
                "top": lambda: rng.choice([4 * h - 1, 4 * h]), "any": lambda: rng.randint(0, 4 * h)}[kind]
        levels = [pick() for _ in range(2 * w)]
        assert charts.area_rows(levels, h) == cell_by_cell(levels, h), (kind, h, w)


def test_braille_area_full_empty_and_shape():
    rows = charts.braille_area([100] * 8, width=4, height=3, lo=0, hi=100)
    assert rows == ["⣿⣿⣿⣿"] * 3
    rows = charts.braille_area([0] * 8, width=4, height=2, lo=0, hi=100)
    assert rows == ["    "] * 2
    rows = charts.braille_area([50] * 4, width=4, height=2, lo=0, hi=100)  # older half missing
    assert rows[0] == "    " and rows[1] == "  ⣿⣿"
    tiny = charts.braille_area([0.5, None], width=1, height=1, lo=0, hi=100)
    assert tiny[0] != " "  # any activity shows at least one dot


def test_text_segments_are_what_rich_renders():
    from rich.console import Console
    from rich.text import Text

    from gputop.tui.widgets.lines import text_segments

    console = Console(width=80)
    cases = [Text("plain"), Text("styled", style="bold"), Text.assemble(("a", "bold"), " b ", ("c", "red")),
             Text.assemble((" gputop ", "bold reverse"), " H200 │ 10 Hz")]
    t = Text("evidence", style="dim")
    t.append(" more", style="green")
    t.append("")
    t.append("end")
    cases.append(t)
    t = Text.assemble(("verdict: ", "bold"), ("compute-bound (tensor)", "bold yellow"))
    t.append(": tensor 93% busy, DRAM 17% of 4.81 TB/s, SMs 96% active, SM clock 1476/1980 MHz")
    cases += list(t.wrap(console, 40, overflow="fold"))
    over = Text("overlap")
    over.stylize("bold", 0, 5)
    over.stylize("red", 2, 7)  # overlapping spans: falls back to Rich
    cases.append(over)
    for text in cases:
        assert text_segments(text, console) == list(text.render(console, end="")), text.plain


def test_hbar_eighths():
    assert charts.hbar(1.0, 4) == "████"
    assert charts.hbar(0.0, 4) == "    "
    assert charts.hbar(0.5, 4) == "██  "
    assert charts.hbar(None, 3) == "   "
    assert len(charts.hbar(0.37, 10)) == 10


def test_roofline_plot_marks_ridge_points_and_decades():
    roofs = [charts.Roof("theoretical", 4.8e12, 6.7e13, "cyan")]
    lines = charts.roofline_plot(60, 16, roofs, [(0.25, 1.2e12), (64.0, 6.0e13)])
    assert len(lines) == 16
    text = "\n".join(t.plain for t in lines)
    assert "◆" in text and text.count("●") == 2
    assert "10T" in text and "1" in lines[-1].plain  # decade labels on both axes


def test_roofline_plot_without_data_says_so():
    lines = charts.roofline_plot(40, 5, [], [])
    assert "no data" in lines[0].plain and len(lines) == 5


# -- device panel -----------------------------------------------------------------------------------
def test_device_rows_on_the_real_demo_trace():
    static, ticks = demo()
    peaks = view.peaks_for(static)
    busy = max(ticks, key=lambda t: t["gpus"][0].get("dram_bw_pct") or 0)["gpus"][0]
    rows = {r.label: r for r in view.device_rows(static, peaks, busy)}
    assert set(rows) >= {"SM activity", "SM occupancy", "DRAM bandwidth", "Tensor active", "Kernel duty",
                         "Memory", "PCIe rx", "PCIe tx", "SM clock", "Mem clock", "Power", "Temperature",
                         "Clock events"}
    dram = rows["DRAM bandwidth"]
    assert dram.fraction == pytest.approx(busy["dram_bw_pct"] / 100)
    assert "B/s of 4.8" in dram.text  # GB/s figure against the H200's 4.8 TB/s peak
    assert "duty cycle" in rows["Kernel duty"].text
    assert rows["Power"].text.endswith("/ 700 W")


def test_device_rows_without_gpm_say_why():
    static, ticks = demo()
    old = dict(static, gpm_supported=False, name="Tesla V100", compute_capability=[7, 0])
    s = dict(ticks[-1]["gpus"][0], sm_active_pct=None, dram_bw_pct=None, tensor_pct=None, sm_occupancy_pct=None)
    rows = {r.label: r for r in view.device_rows(old, {}, s)}
    for label in ("SM activity", "SM occupancy", "DRAM bandwidth", "Tensor active"):
        assert rows[label].text == fmt.GPM_NA and rows[label].fraction is None
    assert rows["Kernel duty"].text != fmt.GPM_NA  # NVML's own numbers stay


def test_device_rows_show_the_recorded_nvml_reason_where_there_is_one():
    static, ticks = demo()
    s = dict(ticks[-1]["gpus"][0], sm_active_pct=None, dram_bw_pct=None, tensor_pct=None, sm_occupancy_pct=None)
    no_gpm = dict(static, gpm_supported=False)
    rows = {r.label: r.text for r in view.device_rows(no_gpm, {}, s, {"gpm_supported": "NoPermission"})}
    assert rows["SM activity"] == rows["Tensor active"] == "n/a (NVML: NoPermission)"
    # a GPU with GPM whose metric failed: the metric's own reason first, then the GPM calls'
    reasons = {"tensor_pct": "NotSupported", "gpm_sample": "Unknown"}
    rows = {r.label: r.text for r in view.device_rows(static, {}, s, reasons)}
    assert rows["Tensor active"] == "n/a (NVML: NotSupported)" and rows["SM activity"] == "n/a (NVML: Unknown)"
    assert {r.label: r.text for r in view.device_rows(static, {}, s)}["SM activity"] == "n/a"  # none recorded
    # a static record may carry its own reasons; a long reason is cut to fit an 80-column panel
    st = dict(no_gpm, na_reasons={"gpm_supported": "ArgumentVersionMismatchAndMore"})
    text = fmt.gpm_na(view.na_reasons_for(st, {"gpm_supported": "NoPermission"}), "sm_active_pct", False)
    assert text == "n/a (NVML: ArgumentVersionMismatch…)" and len(text) <= 36


def test_throttle_reasons_in_words():
    assert view.throttle_row([]).text.startswith("none")
    hot = view.throttle_row(["software power cap", "hardware thermal slowdown"])
    assert hot.level == "hot" and "thermal" in hot.text
    assert view.throttle_row(["idle"]).level == ""
    assert view.throttle_row(None).text == "n/a"


def test_sticky_keeps_processes_between_refreshes():
    st = view.Sticky()
    st.observe({"gpus": [{"processes": [{"pid": 1}], "pcie_rx_bps": 5.0}]})
    st.observe({"gpus": [{"processes": None, "pcie_rx_bps": None}]})
    out = st.apply(0, {"processes": None, "pcie_rx_bps": None, "power_w": 3})
    assert out["processes"] == [{"pid": 1}] and out["pcie_rx_bps"] == 5.0 and out["power_w"] == 3


def test_header_drops_details_to_fit():
    static, _ = demo()
    parts = view.header_parts([static], "replay", 10.0, "myhost", paused=True, source_label="demo.jsonl.gz")
    full = view.fit_parts(parts, 500)
    assert "host myhost" in full and "driver 580" in full and "CUDA 13.0" in full and "10 Hz" in full
    assert "PAUSED" in full and "H200" in full
    short = view.fit_parts(parts, 50)
    assert "driver" not in short and "H200" in short and "REPLAY" in short
    assert "no GPU" in view.fit_parts(view.header_parts([], "live", 2, "h", False), 200)


def test_process_rows_tag_own_workload():
    rows = view.process_rows([{"pid": 7, "name": "python", "user": "u", "gpu_memory_bytes": 2**30},
                              {"pid": 9, "name": "big", "user": "v", "gpu_memory_bytes": 2**34}], {7})
    assert rows[0][0] == "9" and rows[1][4].startswith("◀ gputop")


# -- results ----------------------------------------------------------------------------------------
def test_roofline_points_from_the_roofline_workload_fields():
    pts = results.roofline_points([{"variant": "fma", "k": 8, "ai": 2.0, "gflops": 1500.0, "gbs": 750.0},
                                   {"variant": "fma", "k": 1}])
    assert pts == [(2.0, 1.5e12)]


def test_roofline_view_draws_both_roofs():
    doc = {"workload": "roofline", "status": "ok", "device": {"kind": "cuda",
           "peaks": {"dram_bytes_per_s": 4.8e12, "fp32_flops": 6.7e13}},
           "points": [{"ai": 0.25, "gflops": 1100.0}, {"ai": 250.0, "gflops": 50000.0}],
           "results": {"measured_roofs": {"dram_bytes_per_s": 4.3e12, "fp32_flops": 5.9e13}}}
    text = "\n".join(t.plain for t in roofline.view(doc, 100, 20))
    assert "theoretical 4.8 TB/s" in text and "measured 4.3 TB/s" in text
    assert "◆" in text and text.count("●") >= 3  # 2 points + the legend's marker


def test_bar_items_throughput_oom_and_lower_is_better():
    items = results.bar_items([{"phase": "batch=1", "batch": 1, "samples_per_s": 100.0},
                               {"phase": "batch=2", "batch": 2, "samples_per_s": 180.0},
                               {"phase": "batch=4", "batch": 4, "oom": True}])
    assert items[0][:4] == ("batch=1", 100.0, "samples_per_s", None)
    assert items[2][1] is None and items[2][2] == "out of memory"
    lines = [t.plain for t in results.bars_view({"points": [{"phase": "eager", "step_ms": 2.0},
                                                            {"phase": "graph", "step_ms": 1.0}]}, 80, 10)]
    assert "50% of best, lower is better" in lines[0] and "100% of best" in lines[1]


@pytest.mark.parametrize("name", sorted(p.stem for p in RUN_DOCS.glob("*.json")))
def test_results_of_recorded_runs_render(name):
    doc = json.loads((RUN_DOCS / f"{name}.json").read_text())
    lines = results.results_lines(doc, 100, 20)
    assert 0 < len(lines) <= 19
    text = "\n".join(t.plain for t in lines)
    if doc["workload"] == "roofline":
        assert "●" in text and "measured" in text
    else:
        assert "of best" in text or "out of memory" in text or "skipped" in text


# -- verdict ----------------------------------------------------------------------------------------
def test_verdict_from_the_classifier_on_the_demo_trace():
    static, ticks = demo()
    peaks = view.peaks_for(static)
    node = LiveNode([0], [static], [peaks])
    matmul = [t for t in ticks if (t["gpus"][0].get("tensor_pct") or 0) > 30][:30]
    for tick in matmul:
        node.feed(tick)
    diag = Diagnosis(node.snapshot(), 0)
    v = diag.verdict
    assert isinstance(v, Verdict) and v.cls == "compute-bound" and v.advice
    assert v.display_name() == "compute-bound (tensor cores)" and "%" in v.evidence_text
    judged = diag.judged.judged_t  # the window it judged: up to the tick it was judged at, within the last second
    assert v.window["t_end"] == judged and judged in [t["t"] for t in matmul] and matmul[-1]["t"] - judged < 1.0
    assert diag.span() == (v.t_start, v.t_end) and diag.now == matmul[-1]["t"]


def test_a_classifier_error_is_n_a_with_its_reason():
    diag = Diagnosis()
    assert diag.verdict is None and diag.error is None and diag.words() == ""
    node = LiveNode([0], [{}], [{}])
    node.feed({"t": 0.0, "gpus": "not a list", "host": {}})
    diag = Diagnosis(node.snapshot(), 0)
    assert diag.verdict is None and diag.error



def _h100_roofline_doc(with_tensor=True):
    measured = {"dram_bytes_per_s": 3.15e12, "fp32_flops": 65.3e12, "l2_bytes_per_s": 8.0e12, "fp64_flops": 33.4e12}
    if with_tensor:
        measured["tensor_dense_flops"] = {"bf16": 824e12, "fp16": 791e12}
    pts = [{"variant": v, "k": k, "ai": k / 4, "gflops": g, "gbs": g / (k / 4), "pct_roof_measured": pct}
           for v, k, g, pct in (("mul+add", 1, 570.0, 72.0), ("mul+add", 1000, 29180.0, 45.0),
                                ("fma", 1, 580.0, 74.0), ("fma", 1000, 59170.0, 91.0))]
    return {"workload": "roofline", "status": "ok",
            "device": {"kind": "cuda", "peaks": {"dram_bytes_per_s": 3.35e12, "fp32_flops": 66.9e12,
                                                 "tensor_dense_flops": {"bf16": 989e12}}},
            "points": pts, "results": {"measured_roofs": measured}}


def test_roofline_view_names_every_roof_and_marks_each_variant():
    doc = _h100_roofline_doc()
    roofs = {r.label: r for r in roofline.roofline_roofs(doc)}
    assert {"theoretical", "theoretical bf16", "measured", "DRAM", "L2", "FP64", "bf16 tensor"} <= set(roofs)
    assert roofs["theoretical"].dotted and not roofs["measured"].dotted  # theoretical vs measured distinct
    text = "\n".join(t.plain for t in roofline.view(doc, 150, 30))
    for name in ("DRAM 3.15 TB/s", "L2 8 TB/s", "FP32 65.3 T", "bf16 824 T", "FP64 33.4 T"):
        assert name in text, name
    assert "● mul+add" in text and "▲ fma" in text  # the legend: a marker per variant
    assert text.count("▲") >= 2 + 2  # the fma points (plot and table) besides the legend
    assert "%roof" in text and "  250 5.917e+04   236.7    91" in text  # the table: % of roof per point


def test_roofline_view_small_keeps_percent_of_roof_per_variant():
    lines = [t.plain for t in roofline.view(_h100_roofline_doc(with_tensor=False), 78, 12)]
    assert lines[-2].startswith("● mul+add k:%roof 1:72 1000:45")
    assert lines[-1].startswith("▲ fma k:%roof 1:74 1000:91")
    assert len(lines) == 12


def test_roofline_plot_labels_points_with_k_where_there_is_room():
    roofs = [charts.Roof("measured", 3e12, 6e13, "yellow", name="FP32 60 T")]
    lines = charts.roofline_plot(70, 14, roofs, [charts.Mark(0.25, 7e11, "●", "bold", "1"),
                                                 charts.Mark(250.0, 5.5e13, "▲", "bold", "1000")])
    text = "\n".join(t.plain for t in lines[:-1])  # without the x axis
    assert "1000" in text and "FP32 60 T" in text
    r = next(i for i, t in enumerate(lines) if "●" in t.plain)
    assert any("1" in lines[i].plain[7:] for i in (r - 1, r, r + 1))  # k=1 beside its point


def test_results_verdict_wraps_whole_at_80x24_widths():
    """A roofline's verdict names its ridge and both sides: in the results view's 38 columns (80x24) it
    wraps over lines, whole, as the monitor's verdict panel does, instead of ending in an ellipsis."""
    name = "memory-bound below 14.5 FLOP/byte (k < 58), compute-bound above: tensor cores at 93% of peak"
    doc = {"workload": "amp", "status": "ok", "points": [{"phase": "fp32", "step_ms": 2.0}],
           "verdict": {"class": "ridge", "label": name, "evidence_text": "DRAM 91% busy", "advice": "use bf16"}}
    lines = [t.plain for t in results.results_lines(doc, 38, 14)]
    verdict = [i for i, line in enumerate(lines) if line.startswith("verdict: ")]
    assert len(verdict) == 1
    joined = " ".join(line.strip() for line in lines[verdict[0]:verdict[0] + 3])
    assert name in joined and "…" not in joined
    assert all(len(line) <= 38 for line in lines[verdict[0]:])
    assert any(line.startswith("evidence: ") for line in lines)


@pytest.mark.parametrize("every_s", [T.LIVE_EVERY_S, T.LIVE_SLIDING_EVERY_S])
def test_a_recent_verdict_window_is_shaded_up_to_now_and_holds_still_between_judgements(every_s):
    """The live verdict is judged every second (every 5 s once its regime is older than its window); the
    frames between (4 a second) shade the same columns, up to the right edge, rather than stepping left and
    back (an idle chart then redraws nothing). A window that ended earlier (the previous phase) scrolls with
    its ticks."""
    from gputop.tui.widgets.history_chart import HistoryChart

    w = 80
    chart = HistoryChart("SM activity", "sm_active_pct", span=60.0)
    chart.series = charts.BucketSeries(60.0, 2 * w)
    seen = set()
    for judged in (100.0, 100.0 + every_s, 100.0 + 2 * every_s):  # a 30 s window, frames 0.25 s apart
        chart._mark = (judged - 30.0, judged)
        k = 0
        while 0.25 * k + 0.05 < every_s:  # judged again at the first frame every_s or more later
            chart._t_end = judged + 0.25 * k + 0.05
            seen.add(chart.mark_columns(w))
            k += 1
    assert len(seen) == 1 and next(iter(seen))[1] == w
    c0, c1 = next(iter(seen))
    assert abs((c1 - c0) - 30.0 / (2 * chart.series.dt)) <= 1  # 30 s of a 60 s chart: half its columns
    chart._mark = (80.0, 95.0)  # ended 7 s before now: where its ticks are
    cols = []
    for t in (102.0, 104.0, 106.0):
        chart._t_end = t
        cols.append(chart.mark_columns(w))
    assert cols[0][1] < w and cols[0][1] > cols[1][1] > cols[2][1]


def test_host_line_names_a_replays_recorded_host():
    """A replay's CPU and RAM are the recording host's (16 cores there, not this machine's): the line says so."""
    host = {"cpu_pct": 5.0, "cpu_per_core_pct": [5.0] * 16, "ram_used_bytes": 2**30, "ram_total_bytes": 2**37}
    assert view.host_line(host).startswith("CPU 5")
    recorded = view.host_line(host, "vm")
    assert recorded.startswith("host vm (recorded): CPU 5") and "of 16 cores" in recorded
    assert view.host_line(None, "").startswith("host n/a (recorded)")


def test_status_line_names_a_recorded_runs_gpu_and_host():
    from gputop.tui.results import view as results

    doc = {"workload": "roofline", "status": "ok", "wall_time_s": 12.0,
           "device": {"kind": "cuda", "nvml_index": 0, "static": {"name": "NVIDIA H200"}}}
    assert "on GPU 0" in results.status_line(doc).plain and "recorded" not in results.status_line(doc).plain
    assert "on GPU 0 (H200) of host vm, recorded" in results.status_line(doc, None, "vm").plain


def test_bars_of_one_phase_are_told_apart_and_their_notes_are_never_cut():
    # the allreduce workload's points: three sizes of "bus bandwidth", three modes of "ddp step"
    pts = [{"phase": "bus bandwidth", "size_bytes": s, "busbw_gbps": b} for s, b in ((4096, 0.5), (2**20, 20.0),
                                                                                   (2**30, 300.0))]
    pts += [{"phase": "ddp step", "mode": m, "step_ms": t} for m, t in (("compute only", 10.0), ("overlap", 12.0),
                                                                       ("no overlap", 20.0))]
    labels = [i[0] for i in results.bar_items(pts)]
    assert labels == ["bus bandwidth 4.1 kB", "bus bandwidth 1.05 MB", "bus bandwidth 1.07 GB",
                      "ddp step compute only", "ddp step overlap", "ddp step no overlap"]
    for width in (80, 160):
        lines = [t.plain for t in results.bars_view({"points": pts}, width, 10)]
        assert all(len(ln) <= width for ln in lines)
        assert sum(ln.endswith("lower is better)") for ln in lines) == 3
    narrow = [t.plain for t in results.bars_view({"points": pts}, 50, 10)]  # the notes shorten, nothing runs over
    assert all(len(ln) <= 50 for ln in narrow) and all(ln.rstrip().endswith("of best)") for ln in narrow[3:])
    # a phase with one point keeps its plain name
    assert [i[0] for i in results.bar_items([{"phase": "eager", "step_ms": 2.0}, {"phase": "graph", "step_ms": 1.0}])] \
        == ["eager", "graph"]


def test_a_verdict_cut_short_at_80x24_says_v_and_v_shows_it_whole():
    # the H100 roofline's advice does not fit the rows its plot leaves at 80x24 (issue 24: "results lines are cut")
    doc = json.loads((RUN_DOCS / "roofline_h100.json").read_text())
    advice = " ".join(doc["verdict"]["advice"].split())
    cut = [t.plain for t in results.results_lines(doc, 78, 14)]
    assert any(ln.endswith(results.CUT) for ln in cut) and advice not in " ".join(cut)
    whole = [t.plain for t in results.results_lines(doc, 78, 14, whole_verdict=True)]
    assert len(whole) <= 13 and not any(ln.endswith(results.CUT) for ln in whole)
    text = " ".join(" ".join(whole).split())
    assert advice in text and " ".join(doc["verdict"]["evidence_text"].split()) in text
    assert whole[-1] == "v: the plot again"
