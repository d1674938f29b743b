"""The cluster page: ``gputop --source prometheus=URL`` (no ``--once``).

Snapshots at 80x24 and 160x48 are drawn from a stored cluster document, tests/data/cluster/page.json: the
``--once --json --range 2m`` document of the real Prometheus in test_cluster_prometheus.py (four ``gputop --export
--replay`` nodes, three dcgm-exporter nodes), read once and written by
``GPUTOP_WRITE_CLUSTER_PAGE=1 pytest tests/test_cluster_page.py -k stored``; the test of that name checks that a live
read still gives its rows. The pilot tests run the page against that real Prometheus: its rows, a filter, Enter on
a GPU and Escape, and Prometheus stopped (the page says stale) and started again on the same port and data
(the page recovers by itself). Every wait polls against a deadline.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from export_util import free_port, stop
from export_util import wait_for as wait_for_history
from gputop import exitcodes
from gputop.analysis import cluster as C
from gputop.analysis.cluster_accounting import JobHours, account
from gputop.analysis.cluster_text import class_text
from gputop.tui.cluster import view as V
from gputop.tui.cluster.detail import DetailScreen
from gputop.tui.cluster.model import ClusterState
from gputop.tui.cluster.page import ClusterApp
from pilot_util import sync, wait_for, wait_screen
from test_cluster_prometheus import DCGM_NODES, EXPORTERS, PROMETHEUS, cluster, cluster_json  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "tests" / "data" / "cluster" / "page.json"
STORED_GPU = ROOT / "tests" / "data" / "cluster" / "gpu.json"  # one GPU's query_range answers, for its detail
live = pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary on PATH (apt-get install prometheus)")


# -- the stored document as the page's state ----------------------------------------------------------------------
def rows_of(doc: dict) -> list[C.ClusterGpu]:
    fields = set(C.ClusterGpu.__dataclass_fields__) - {"cls", "key"}
    return [C.ClusterGpu(cls=g["class"], **{k: v for k, v in g.items() if k in fields}) for g in doc["gpus"]]


def jobs_of(doc: dict) -> list[JobHours]:
    return [JobHours(j["job"], {(c["class"], c["subclass"]): c["gpu_hours"] for c in j["classes"]},
                     {w["class"]: w["gpu_hours"] for w in j["win_back"]}) for j in doc["accounting"]["jobs"]]


def stored_state(**kwargs) -> ClusterState:
    doc = json.loads(STORED.read_text())
    t = calendar.timegm(time.strptime(doc["time"], "%Y-%m-%dT%H:%M:%SZ"))
    state = ClusterState(doc["source"]["url"], doc["accounting"]["range_s"], clock=lambda: t + 12, **kwargs)
    state.took_rows(rows_of(doc), t)
    state.took_accounting(jobs_of(doc), doc["accounting"]["step_s"])
    return state


class StoredAnswers:
    """A Prometheus client that gives back, in order, the ``query_range`` answers one ``read_gpu`` had from the
    real Prometheus (tests/data/cluster/gpu.json)."""

    def __init__(self, answers: list):
        self.answers = list(answers)

    def query_range(self, promql, start, end, step):
        return self.answers.pop(0)


class Recording:
    """A real client whose ``query_range`` answers are kept (to store them)."""

    def __init__(self, client):
        self.client, self.answers = client, []

    def query_range(self, promql, start, end, step):
        self.answers.append(self.client.query_range(promql, start, end, step))
        return self.answers[-1]


def stored_detail_app(size_note: str = "") -> ClusterApp:
    """The page on the stored document, its cursor on the stored GPU, whose detail reads the stored answers."""
    from gputop.fleet.gpu_history import read_gpu

    gpu = json.loads(STORED_GPU.read_text())
    state = stored_state()
    (row,) = rows_of({"gpus": [gpu["row"]]})
    state.selected = (None, row.key)  # (its group: any)
    return ClusterApp(state, reader=None, refresh_s=0, read_gpu=lambda r: read_gpu(
        StoredAnswers(gpu["answers"]), r, now=gpu["now"]))


async def open_detail(pilot) -> None:
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DetailScreen) and pilot.app.screen.history is not None)
    await pilot.pause()


# -- snapshots -----------------------------------------------------------------------------------------------------
def test_cluster_page_80x24(snap_compare):
    assert snap_compare(ClusterApp(stored_state(), reader=None, refresh_s=0), terminal_size=(80, 24))


def test_cluster_page_160x48(snap_compare):
    assert snap_compare(ClusterApp(stored_state(), reader=None, refresh_s=0), terminal_size=(160, 48))


def test_cluster_page_80x24_by_node_one_class_stale(snap_compare):
    state = stored_state()
    state.failed(f"{state.url}: cannot reach Prometheus ([Errno 111] Connection refused)")

    async def run_before(pilot):
        await pilot.press("g", "c")  # by node; the first class
    assert snap_compare(ClusterApp(state, reader=None, refresh_s=0), terminal_size=(80, 24), run_before=run_before)


def test_cluster_gpu_detail_80x24(snap_compare):
    assert snap_compare(stored_detail_app(), terminal_size=(80, 24), run_before=open_detail)


def test_cluster_gpu_detail_160x48(snap_compare):
    assert snap_compare(stored_detail_app(), terminal_size=(160, 48), run_before=open_detail)


def test_cluster_help_80x24(snap_compare):
    assert snap_compare(ClusterApp(stored_state(), reader=None, refresh_s=0), terminal_size=(80, 24),
                        press=["question_mark"])


def test_columns_drop_by_priority_and_the_grouping_column_goes_first():
    at80 = [c.key for c in V.fit_columns(80, "job")]
    assert at80[:2] == ["node", "gpu"] and {"class", "sm", "dram", "waste"} <= set(at80)
    assert "job" not in at80 and "model" not in at80  # grouped by job: its heading names it
    assert "job" in [c.key for c in V.fit_columns(80, "node")]
    assert [c.key for c in V.fit_columns(160, "job")] == [c.key for c in V.COLUMNS]
    for width in (80, 100, 160):
        for group in ("job", "node"):
            state = stored_state(group=group)
            for e in V.entries(state):
                if e.gpu is not None:
                    assert len(V.gpu_row(e.gpu, V.fit_columns(width, group), False)[0]) <= width


def test_the_page_rows_come_most_wasted_first_within_groups_and_filters_cycle():
    state = stored_state()
    for by in ("job", "node"):
        state.group = by
        for name, members in V.groups(state.shown(), by):
            assert members == C.order(members)
    firsts = [members[0].waste for _, members in V.groups(state.shown(), "node")]
    assert firsts == sorted(firsts, reverse=True)  # the group with the most wasted GPU first
    nodes = state.options("node")
    assert nodes == sorted({r.node for r in state.rows})
    assert [state.cycle("node") for _ in nodes] == nodes and state.cycle("node") is None  # then all again
    assert state.cycle("node", -1) == nodes[-1]
    assert [r.node for r in state.shown()] == [nodes[-1]]
    state.clear_filters()
    assert state.shown() == state.rows


@sync
async def test_the_cursor_walks_every_row_even_a_gpu_two_jobs_share_and_keeps_its_gpu_across_groupings():
    state = stored_state()
    shared = state.rows[0]
    shared.jobs = shared.jobs + ["7001"]  # held by two jobs: under both headings
    app = ClusterApp(state, reader=None, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one("#table")
        walked = [state.selected]
        for _ in range(len(state.rows)):
            await pilot.press("down")
            walked.append(state.selected)
        assert len(set(walked)) == len(walked) == len(state.rows) + 1  # every row once, the shared GPU twice
        assert [k[1] for k in walked].count(shared.key) == 2
        await pilot.press("end")
        last = state.selected
        node = table.selected_gpu().node
        await pilot.press("g")  # by node: the same GPU under its node
        assert state.selected == (node, last[1]) and table.selected_gpu().key == last[1]
        await pilot.press("home")
        assert state.selected[1] == state.rows[0].key  # the most wasted GPU comes first


def test_the_refresher_reads_rows_each_time_the_accounting_when_due_and_says_why_a_read_failed():
    """Refresher.read_once, one refresh at a time (its thread calls it every refresh_s), over the stored rows."""
    from gputop.telemetry.errors import SourceUnreachable
    from gputop.tui.cluster.model import Refresher

    stored = stored_state()

    class Reader:  # answers with the stored rows and accounting, or fails as the client does
        down = False
        calls: list[str] = []
        notes: list[str] = []
        accounting_notes: list[str] = []

        def snapshot(self, now):
            self.calls.append("rows")
            if self.down:
                raise SourceUnreachable("http://prom:9090: cannot reach Prometheus (refused)")
            return list(reversed(stored.rows))

        def accounting(self, range_s, now):
            self.calls.append(f"accounting {range_s:g}")
            return stored.jobs, stored.step_s

    reader, got = Reader(), []
    state = ClusterState("http://prom:9090", 120.0)
    refresher = Refresher(reader, 120.0, lambda kind, payload: got.append(kind), account_s=3600.0)
    for down in (False, False, True, False):
        reader.down = down
        refresher.read_once()
    assert reader.calls == ["rows", "accounting 120", "rows", "rows", "rows"]
    assert got == ["rows", "accounting", "rows", "error", "rows"]
    state.took_rows(reader.snapshot(0.0), 100.0)
    assert state.rows == C.order(stored.rows) and state.stale_s() is None  # kept most wasted first
    state.failed("cannot reach Prometheus")
    assert state.stale_s(now=112.0) == 12.0 and state.rows
    state.took_rows(reader.snapshot(0.0), 113.0)
    assert state.stale_s() is None


# -- against a real Prometheus ------------------------------------------------------------------------------------
@live
@pytest.mark.slow
def test_the_stored_page_data_is_what_a_live_prometheus_gives(cluster):
    from gputop.fleet.gpu_history import read_gpu
    from gputop.telemetry.prometheus import PrometheusClient

    write = bool(os.environ.get("GPUTOP_WRITE_CLUSTER_PAGE"))
    client = PrometheusClient(cluster["url"], env={})
    if write:  # the stored GPU's charts hold half a minute at least
        wait_for_history(lambda: len(client.query_range('DCGM_FI_PROF_SM_ACTIVE{Hostname="dcgm-a"}', time.time() - 60,
                                                        time.time(), 3)[0]["values"]) >= 10, 60, "30 s of dcgm-a")
    doc = cluster_json(cluster["url"], "--range", "2m")
    recording, now = Recording(client), time.time()
    (row,) = [g for g in doc["gpus"] if g["node"] == "dcgm-a"]
    history = read_gpu(recording, rows_of({"gpus": [row]})[0], now=now)  # dcgm-exporter's: judged here
    if write:
        STORED.parent.mkdir(parents=True, exist_ok=True)
        STORED.write_text(json.dumps(doc, indent=1) + "\n")
        STORED_GPU.write_text(json.dumps({"row": row, "now": now, "answers": recording.answers}) + "\n")
    gpu = json.loads(STORED_GPU.read_text())
    stored = read_gpu(StoredAnswers(gpu["answers"]), rows_of({"gpus": [gpu["row"]]})[0], now=gpu["now"])
    for h in (stored, history):
        assert h.samples and (h.verdict.cls, h.verdict.subclass) == ("compute-bound", "tensor") and h.classes == []

    def verdicts(d):
        return {(g["node"], g["gpu"], g["class"], g["subclass"], g["judged_by"], g["job"], g["duplicate"])
                for g in d["gpus"]}
    stored = json.loads(STORED.read_text())
    assert verdicts(stored) == verdicts(doc)
    assert {j["job"] for j in stored["accounting"]["jobs"]} == {j["job"] for j in doc["accounting"]["jobs"]}


def gputop(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)


def test_a_page_that_cannot_start_is_one_line_and_its_exit_code(tmp_path):
    r = gputop("--source", f"prometheus=http://127.0.0.1:{free_port()}")
    assert r.returncode == exitcodes.NO_GPU and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "cannot reach Prometheus" in r.stderr


@live
@pytest.mark.slow
def test_the_page_needs_a_terminal_once_prometheus_answers(cluster):
    r = gputop("--source", f"prometheus={cluster['url']}")
    assert r.returncode == exitcodes.USAGE and "needs a terminal" in r.stderr and r.stdout == ""


def row_line(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(node + " "))


def has_rows(text: str, nodes) -> bool:
    return all(any(line.strip().startswith(n + " ") for line in text.splitlines()) for n in nodes)


@live
@pytest.mark.slow
@sync
async def test_the_page_reads_filters_opens_a_gpu_goes_stale_and_recovers(cluster):
    from gputop.fleet.reader import ClusterReader
    from gputop.fleet.gpu_history import read_gpu
    from gputop.telemetry.prometheus import PrometheusClient

    client = PrometheusClient(cluster["url"], env={}, timeout=2.0)
    state = ClusterState(cluster["url"], 120.0)
    app = ClusterApp(state, ClusterReader(client), read_gpu=lambda row: read_gpu(client, row),
                     refresh_s=0.3, account_s=1.0, first_wait=0.0)
    nodes = set(EXPORTERS) | set(DCGM_NODES)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: {r.node for r in state.rows} == nodes and state.jobs is not None, 30)
        text = await wait_screen(pilot, lambda t: has_rows(t, nodes) and "job 7001 · 1 GPU" in t)
        for node, (cls, sub) in cluster["expected"].items():  # every class that went in, on its node's row
            assert class_text(cls, sub) in row_line(text, node) and "export" in row_line(text, node)
        assert "memory-bound" in row_line(text, "dcgm-b") and "gputop" in row_line(text, "dcgm-b")
        assert "job 7001 · 1 GPU" in text and "job 7001: " in text and "100% compute-bound (tensor)" in text

        # a filter: the node key cycles through the nodes (sorted) to dcgm-b
        await pilot.press("n", "n")
        assert state.filters["node"] == "dcgm-b"
        await wait_screen(pilot, lambda t: [w[0] for w in map(str.split, t.splitlines()) if w and w[0] in nodes]
                          == ["dcgm-b"])

        # Enter: the GPU's detail from query_range (judged here: dcgm-exporter's node); Escape goes back
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.history is not None, 20)
        detail = app.screen
        assert detail.error is None and detail.history.samples and detail.history.verdict is not None
        assert detail.history.verdict.cls == "memory-bound" and detail.history.classes == []
        await wait_screen(pilot, ("dcgm-b GPU 0", "memory-bound", "SM activity",
                                  "judged here from its last minute: memory-bound ("))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DetailScreen))

        # an exported GPU: its classes over the window, from gputop_bottleneck
        await pilot.press("x", "j", "j", "j")
        assert state.filters["job"] == "1003"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.history is not None, 20)
        cls, sub = cluster["expected"]["node-bf16"]
        assert (cls, sub) in {(c, s) for _, c, s in app.screen.history.classes}
        await wait_screen(pilot, f"% {class_text(cls, sub)}")
        await pilot.press("escape")
        await pilot.press("x")

        # Prometheus goes away: the rows stay, marked stale with their age and why
        prom = cluster["prometheus"]
        stop(prom["proc"])
        # (a read while it shut down may have had another answer; once it is gone, nothing answers)
        text = await wait_screen(pilot, "cannot reach Prometheus", 20)
        (stale,) = [line for line in text.splitlines() if line.startswith("stale ")]
        # its age: since the last good read (drawn at most now, rounded to the second)
        assert 0 <= int(stale.split()[1]) <= time.time() - state.t + 0.5
        assert all(row_line(text, n) for n in nodes)
        # ... and comes back on the same port and data: the page recovers by itself
        prom["proc"] = subprocess.Popen(prom["argv"], stdout=subprocess.DEVNULL, stderr=prom["log"])
        # (its first answers may come before every exporter is scraped again: recovered is every row back)
        await wait_for(pilot, lambda: state.error is None and {r.node for r in state.rows} == nodes, 90)
        await wait_screen(pilot, lambda t: "stale " not in t and has_rows(t, nodes))


@live
@pytest.mark.slow
def test_gputop_in_a_terminal_opens_the_page_and_quits_on_q_or_a_signal(cluster):
    """The real command line in a pseudo-terminal (80x24): the page with its rows; q quits with 0, SIGTERM with
    128+15."""
    import signal

    from pty_util import Pty

    for stop_with, code in ((b"q", exitcodes.OK), (signal.SIGTERM, 128 + signal.SIGTERM)):
        t = Pty(80, 24)
        try:
            p = t.spawn([sys.executable, "-m", "gputop", "--source", f"prometheus={cluster['url']}"],
                        env=dict(os.environ, PYTHONPATH=str(ROOT)))
            t.wait_text("dcgm-a", 60)
            t.wait_text("quit", 60)
            if isinstance(stop_with, bytes):
                t.press(stop_with)
            else:
                p.send_signal(stop_with)
            assert t.wait(30) == code
        finally:
            t.close()


# -- two GPUs that share a node and an index (two exporters, one host name) ----------------------------------------
def shared_answers() -> tuple[dict, list]:
    """The stored GPU's ``query_range`` answers as Prometheus gives them where two exporters (instances) export a
    GPU under the same node, index and UUID (a replay of one machine beside another): every series twice, and its
    class over the window from both gputop exporters: compute-bound at every step, one with the subclass
    ``tensor``, the other without one (an empty label: absent from Prometheus' answer)."""
    gpu = json.loads(STORED_GPU.read_text())
    series = []
    for inst in ("10.0.0.1:9400", "10.0.0.2:9400"):
        series += [dict(r, metric=dict(r["metric"], instance=inst)) for r in gpu["answers"][0]]
    steps = [t for t, _ in gpu["answers"][0][0]["values"]]
    labels = {k: v for k, v in gpu["answers"][0][0]["metric"].items() if k not in ("__name__", "instance")}
    classes = [{"metric": dict(labels, __name__="gputop_bottleneck", instance=inst, **{"class": "compute-bound"},
                               **sub), "values": [[t, "1"] for t in steps]}
               for inst, sub in (("10.0.0.1:9400", {"subclass": "tensor"}), ("10.0.0.2:9400", {}))]
    return gpu, [series, classes]


@pytest.mark.parametrize("instance,sub", [("10.0.0.1:9400", "tensor"), ("10.0.0.2:9400", None)])
def test_the_history_of_a_gpu_keeps_its_own_series_where_another_shares_its_node_and_index(instance, sub):
    """(issue 35: a row two GPUs filled raised TypeError on Enter; issue 38: they are two rows, each its own.)"""
    from gputop.fleet.gpu_history import read_gpu

    gpu, answers = shared_answers()
    (row,) = rows_of({"gpus": [dict(gpu["row"], instance=instance)]})
    history = read_gpu(StoredAnswers(answers), row, now=gpu["now"])
    steps = len(answers[1][0]["values"])
    assert len(history.classes) == steps and len(history.samples) == len(answers[0][0]["values"])
    assert history.class_shares() == [("compute-bound", sub, 1.0)]


@sync
async def test_enter_over_one_of_two_gpus_that_share_a_node_opens_its_own_detail():
    from gputop.fleet.gpu_history import read_gpu

    gpu, answers = shared_answers()
    state = stored_state()
    (row,) = rows_of({"gpus": [dict(gpu["row"], instance="10.0.0.1:9400")]})
    state.took_rows(state.rows + [row], state.t)
    state.selected = (None, row.key)
    app = ClusterApp(state, reader=None, refresh_s=0, read_gpu=lambda r: read_gpu(
        StoredAnswers(answers), r, now=gpu["now"]))
    async with app.run_test(size=(160, 48)) as pilot:
        await open_detail(pilot)
        assert app.screen.error is None and app.screen.row.instance == "10.0.0.1:9400"
        text = await wait_screen(pilot, "100% compute-bound (tensor)")
        assert "50%" not in text


# -- the accounting of a job that changed class many times ------------------------------------------------------
def many_classes_state() -> ClusterState:
    """The stored page, its job 1004 (the demo's node) counted over the demo's every phase: its GPU-hours in seven
    classes (the demo trace's phases, as ``gputop --export --demo`` exports them over a loop)."""
    state = stored_state()
    shares = [("compute-bound", "tensor", 0.26), ("memory-bound", None, 0.22), ("latency-bound", "launch", 0.17),
              ("pcie-bound", "pageable", 0.17), ("idle", "waiting", 0.12), ("host-bound", None, 0.04),
              ("idle", None, 0.02)]
    entries = [(j.job, c, s, h) for j in state.jobs if j.job != "1004" for (c, s), h in j.hours.items()]
    entries += [("1004", c, s, 0.5 * share) for c, s, share in shares]
    state.took_accounting(account(entries), state.step_s)  # (the most wasted job first, as the reader gives them)
    return state


@pytest.mark.parametrize("width", [80, 160])
def test_the_accounting_wraps_a_long_job_line_whole_and_headings_end_with_what_they_left_out(width):
    """(issue 35: the accounting line was cut at 80 and 160 columns.) Every job's classes are in the accounting,
    wrapped between its parts; a group's heading holds what fits and says how many classes it left out."""
    from gputop.analysis.cluster_text import job_parts

    state = many_classes_state()
    lines = V.accounting_lines(state, width, most=40)
    assert all(len(text) <= width and "…" not in text for text, *_ in lines)
    job = next(j for j in state.jobs if j.job == "1004").to_dict()
    name, hours, parts = job_parts(job)
    joined = " ".join(" ".join(text.split()) for text, *_ in lines)
    assert f"{name}: {hours}, " + ", ".join(parts) in joined
    head = next(e.heading for e in V.entries(state) if e.heading and e.heading.startswith("job 1004"))
    fitted = V.fit_heading(head, width)
    assert len(fitted) <= width and (fitted == head or re.search(r", \+\d+ more$", fitted)), fitted
    assert parts[0] in fitted


@sync
async def test_the_page_at_80x24_keeps_the_accounting_within_its_rows():
    app = ClusterApp(many_classes_state(), reader=None, refresh_s=0)
    async with app.run_test(size=(80, 24)) as pilot:
        text = await wait_screen(pilot, "GPU-hours by class")
        assert all(len(line) <= 80 for line in text.splitlines())
        acc = text.split("GPU-hours by class", 1)[1]
        assert "more job" in acc  # the rows it has: the rest counted, not cut
        assert not any(line.rstrip().endswith("…") for line in text.splitlines())


@sync
async def test_the_detail_says_the_span_its_charts_show_and_round_scales():
    """(issue 35: "the last 15m" over charts of 174 s; "scale 0-79.6465 GiB".) The stored GPU was exported for half a
    minute of the 15 asked: the head names the span the charts show (and what was asked), and the memory chart's
    scale reads as a person would write it."""
    from gputop.tui.widgets.history_chart import HistoryChart

    app = stored_detail_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_detail(pilot)
        text = await wait_screen(pilot, "15 min asked")
        spans = {c.span for c in app.screen.query(HistoryChart)}
        assert spans == {60.0}, spans
        head = text.splitlines()[1]
        assert head.startswith("the last 60 s ") and "15 min asked" in head, head
        assert "15m" not in text
        titles = [line for line in text.splitlines() if "  last " in line and "scale" in line]
        assert len(titles) == 4 and all("last 60 s, scale" in t for t in titles), titles
        assert "scale 0-140 GiB" in text, titles


def test_scales_and_spans_read_as_people_write_them():
    from gputop.format import scale_text, span_text

    assert [scale_text(v) for v in (0, 100, 700, 140.401, 79.6465, 2.5, 0.25, 1000)] == \
        ["0", "100", "700", "140", "79.6", "2.5", "0.25", "1000"]
    assert [span_text(s) for s in (60, 174, 900, 3600, 5400, 86400)] == \
        ["60 s", "2 min 54 s", "15 min", "60 min", "90 min", "24 h"]


def test_a_read_that_costs_more_than_5_percent_of_a_core_spaces_the_next():
    """(issue 38: 8,192 GPUs cost ~0.6 s of CPU a read.) The refresher waits refresh_s, or as long as keeps its reads'
    CPU at CPU_SHARE of a core: a read that burns 40 ms of CPU is followed by a wait of 0.8 s at least."""
    from gputop.tui.cluster.model import CPU_SHARE, Refresher

    class Reader:
        notes: list[str] = []
        accounting_notes: list[str] = []

        def __init__(self, burn_s):
            self.burn_s = burn_s

        def snapshot(self, now):
            t = time.process_time()
            while time.process_time() - t < self.burn_s:  # real CPU, not a sleep
                pass
            return []

        def accounting(self, range_s, now):
            return [], 1.0

    cheap = Refresher(Reader(0.0), 60.0, lambda kind, payload: None, refresh_s=0.1)
    assert 0.1 <= cheap.read_timed() < 0.04 / CPU_SHARE  # a read of a few ms: the page's cadence
    dear = Refresher(Reader(0.04), 60.0, lambda kind, payload: None, refresh_s=0.1)
    assert dear.read_timed() >= 0.04 / CPU_SHARE == pytest.approx(0.8)


def test_between_two_refreshes_the_refresher_judges_ahead_once_a_mark_has_passed():
    """The refresher's wait: where a mark of the reader's judging grid falls before the next refresh, it judges
    ahead JUDGE_LAG_S after the mark, once, and its CPU counts in the next cadence; a mark that passed during the
    refresh (its step not judged) is judged at once; a mark after the next refresh, or a reader without a grid yet,
    is just a wait; a wake ends the wait at once."""
    from gputop.tui.cluster.model import JUDGE_LAG_S, Refresher

    class Reader:  # a grid of 30 s marks from ``phase``; the step of ``judged`` judged already
        notes: list[str] = []
        accounting_notes: list[str] = []

        def __init__(self, phase, judged):
            self.phase, self.judged, self.ahead = phase, judged, []

        def slot(self, now):
            return now - (now - self.phase) % 30.0

        def next_mark_in(self, now):
            return None if self.phase is None else 30.0 - (now - self.phase) % 30.0

        def judge_ahead(self, now):
            if self.judged is not None and abs(self.slot(now) - self.judged) < 1e-3:  # (floats of ~1.8e9)
                return False
            self.judged = self.slot(now)
            self.ahead.append(now)
            t = time.process_time()
            while time.process_time() - t < 0.02:  # real CPU
                pass
            return True

        def snapshot(self, now):
            return []

        def accounting(self, range_s, now):
            return [], 1.0

    t0 = time.time()
    soon = Reader(t0 + 0.2, judged=t0 + 0.2 - 30.0)  # a mark in 0.2 s; the step before it judged
    r = Refresher(soon, 60.0, lambda kind, payload: None, refresh_s=0.1)
    start = time.monotonic()
    r.wait_judging(start + JUDGE_LAG_S + 0.6)
    assert len(soon.ahead) == 1 and soon.ahead[0] >= t0 + 0.2 + JUDGE_LAG_S - 0.05
    assert time.monotonic() - start >= JUDGE_LAG_S + 0.55  # and then waited on to the refresh
    assert r.read_timed() >= 0.02 / 0.05  # the judging's CPU spaced the next refresh
    t1 = time.time()
    passed = Reader(t1 - 2.0, judged=t1 - 32.0)  # a mark 2 s ago, during the refresh: its step not judged
    start = time.monotonic()
    Refresher(passed, 60.0, lambda kind, payload: None).wait_judging(start + 0.5)
    assert len(passed.ahead) == 1 and passed.ahead[0] - t1 < 0.3  # at once, then the wait
    t2 = time.time()
    for reader in (Reader(t2 + 5.0, judged=t2 - 25.0), Reader(None, judged=None)):  # after the refresh; no grid
        Refresher(reader, 60.0, lambda kind, payload: None).wait_judging(time.monotonic() + 0.3)
        assert reader.ahead == []
    woken = Refresher(Reader(t2 + 5.0, judged=t2 - 25.0), 60.0, lambda kind, payload: None)
    woken.wake()
    start = time.monotonic()
    woken.wait_judging(start + 10.0)
    assert time.monotonic() - start < 1.0


def test_the_pages_reads_set_off_a_full_collection_ten_times_less_often():
    """The page's process makes full collections rarer when its refresher starts (a read of a big fleet makes and
    drops ~10^5 objects: docs/benchmarks.md, "At 8,192 GPUs, measured"), and keeps a higher setting of its own."""
    import gc

    from gputop.tui.cluster.model import FULL_GC_EVERY, Refresher, page_gc

    was = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        refresher = Refresher(object(), 3600.0, lambda *a: None)
        refresher.read_timed = lambda: 60.0  # (no reader: the loop waits, then stops)
        refresher.start(first_wait=60.0)
        assert gc.get_threshold() == (700, 10, FULL_GC_EVERY) and FULL_GC_EVERY == 100
        refresher.stop()
        gc.set_threshold(500, 20, 1000)
        page_gc()
        assert gc.get_threshold() == (500, 20, 1000)
    finally:
        gc.set_threshold(*was)
