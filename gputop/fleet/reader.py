"""The cluster read from Prometheus now: every GPU's row, kept apart by its identity, and what could not be read.

One :class:`ClusterReader` per server (``telemetry/prometheus.PrometheusClient``). ``snapshot()`` asks, side by side:

1. every whole GPU's row series now (``ROW_NAMES``: SM, DRAM and tensor activity, GPU utilisation, memory used;
   one instant query a name, whoever exported them: ``gputop --export`` and dcgm-exporter use the same names and
   labels), with the labels that say which GPU it is only (``series.by_gpu``); one of them
   (``META_NAME``) with the GPU's model and jobs too;
2. the verdicts the nodes' own gputop exported now: the class from ``gputop_verdict_confidence{class}`` (one series
   per GPU, where ``gputop_bottleneck`` has one per class: every verdict of ``gputop --export`` has a confidence),
   the subclass from ``gputop_bottleneck{subclass!=""}`` (only the current class carries one);
3. the GPUs whose newest sample is older than ``OLD_S`` though Prometheus held them within ``RECENT_S`` (an
   exporter that stopped, a node gone, an exporter whose clock is behind: its timestamps put its samples in the
   past), from the newest sample time of each GPU's ``DCGM_FI_DEV_GPU_UTIL``: of every GPU once a minute
   (``GONE_S``), and of those found late at every read between (whether they still are, and how late); those no
   longer in the rows asked for once a minute, and at once where a GPU the last read showed is not in this one;
4. for the GPUs without a verdict (dcgm-exporter's nodes), the ``DCGM_FI_*`` series the classifier reads over the
   last minute, which this process judges itself (``judged_here.HereJudge``: on a grid of 30 s marks, the window
   rolled on, each step's verdicts made once: by the step's first read, or before it by :meth:`ClusterReader.
   judge_ahead` when a mark has passed, as the cluster page does between its refreshes).

Rows are GPUs as ``analysis/cluster_identity.py`` defines them: a UUID through one scrape target, never merged by
host name or index; a dcgm-exporter beside the node's gputop is the same GPU (one row); any other two targets
claiming one UUID are two rows, both flagged. A GPU that stopped reporting within ``RECENT_S`` is a row too
(``reporting`` false, its age): the cluster is never silently smaller.

What a read could not do is said, one line each, in ``notes`` (the last snapshot's): a query that failed or timed
out (its part of the rows is missing, the rest are shown), answers Prometheus marked partial (its ``warnings``),
series without a ``gpu`` label (not a GPU's: skipped, counted). Only where neither the rows nor the verdicts could
be read does ``snapshot`` raise. The job accounting over a range is ``accounting.py``'s.

Cost (bench/perf/cluster_scale.py, docs/benchmarks.md "Cluster scale"): the classifier costs this process about
70 us per sample, so the dcgm-exporter GPUs are judged on few samples (3 per judging, at most once per 30 s), on
the series it reads (``JUDGE_NAMES``), asked for on their own nodes only (named by the rows, or by the label
index: ``/api/v1/label/…/values``).

An empty fleet (no whole-GPU series now nor within ``RECENT_S``) raises :class:`NoGpu`, saying whether the last
hour had GPUs (``/api/v1/series``: the exporters stopped) or none ever; the client raises the rest
(:mod:`gputop.telemetry.errors`).
"""

from __future__ import annotations

import time
from collections import defaultdict

from gputop.analysis import cluster as C
from gputop.analysis import cluster_identity as I
from gputop.fleet import series as S
from gputop.fleet.accounting import account
from gputop.fleet.gc_paused import while_paused
from gputop.fleet.judged_here import JUDGE_STEP_S, HereJudge
from gputop.format import count
from gputop.telemetry import dcgm_fields as F
from gputop.telemetry.dcgm import to_sample
from gputop.telemetry.errors import NoGpu, SourceError
from gputop.telemetry.prometheus import PrometheusClient

# what a row shows and a job is judged on (GPU utilisation: every dcgm-exporter has it; a GPU exporting none of
# these is not seen)
ROW_NAMES = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
             "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")
ROW_SELECTOR = '{__name__=~"%s"}' % "|".join(ROW_NAMES)
# a GPU's memory total (used + free + reserved): it does not change; asked for again every TOTAL_S, and at once
# where a row's GPU was not there when they were last asked for
TOTAL_SELECTOR = '{__name__=~"%s"}' % "|".join(F.MEM_TOTAL_PARTS)
TOTAL_S = 300.0
GONE_S = 60.0  # which GPUs stopped reporting (GONE), asked for again every minute, and at once where a GPU the last
# read showed is not in this one's: the cluster is never silently smaller (0.11 s of Prometheus' CPU at 8,192 GPUs)
# what a job is judged whole on beyond the rows (analysis/cluster_jobs.py), asked for only of the GPUs whose node's
# gputop says they are in a class that reads it: the SM clock of working or waiting GPUs (a straggler; most GPUs:
# joined with their verdicts in Prometheus), PCIe and NVLink of comms- and PCIe-bound ones (across nodes; few: asked
# for by their UUIDs once the verdicts are read, a sixth of the join's cost at 8,192 GPUs); dcgm-exporter's GPUs
# have theirs in the window judged here
CLOCK = ("DCGM_FI_DEV_SM_CLOCK", ("compute-bound", "memory-bound", "throttled", "comms-bound"))
TRAFFIC = ("DCGM_FI_PROF_PCIE_TX_BYTES|DCGM_FI_PROF_PCIE_RX_BYTES|DCGM_FI_PROF_NVLINK_TX_BYTES|"
           "DCGM_FI_PROF_NVLINK_RX_BYTES", ("comms-bound", "pcie-bound"))
ON_GPU = "on(UUID, uuid, instance, job, gpu)"
ROW_PARALLEL = 8  # a refresh's queries in flight at once: small ones, Prometheus answers them on all its cores
META_NAME = "DCGM_FI_DEV_FB_USED"  # a GPU's model and jobs, from its row series every exporter has (read with them)
PRESENCE = "DCGM_FI_DEV_GPU_UTIL"  # the series whose newest sample says a GPU reports (every exporter has it)
OLD_S = 120.0  # a GPU whose newest sample is older than this is flagged (scrapes every 15-60 s)
RECENT_S = 900.0  # ... and one Prometheus held within this long, but not now, is a row that stopped reporting
EMPTY_LOOKBACK_S = 3600.0  # an empty fleet: were there GPUs this long ago (``series``)?
# the GPUs whose newest sample is older than OLD_S (per GPU: a job that changed leaves its old series behind for
# the look-back, not a GPU that stopped) ...
LATE = f"max by ({', '.join(S.META_LABELS)}) (timestamp({{selector}})) < time() - {OLD_S:.0f}"
OLD = LATE.format(selector=PRESENCE)  # (of every GPU: asked every GONE_S; of those found late, every read between)
LATE_BY_UUID = 1000  # ... by their UUIDs, up to this many (3,553 UUIDs cost Prometheus more than 8,192 GPUs' series)
# ... and those Prometheus held within RECENT_S but not now (a raw range: cheaper than the sample times of a
# subquery; their ages are asked for apart, of them alone: AGE)
GONE = (f"group by ({', '.join(S.META_LABELS)}) (last_over_time({PRESENCE}[{RECENT_S:.0f}s])) unless {ON_GPU} "
        f"{PRESENCE}")
AGE = "max by ({labels}) (max_over_time(timestamp({presence}{{UUID=~{uuids}}})[{recent:.0f}s:{step:.0f}s]))"


class ClusterReader:
    """The cluster as one Prometheus server sees it. ``notes``: what the last snapshot could not read (one line
    each)."""

    def __init__(self, client: PrometheusClient):
        self.client = client
        self.notes: list[str] = []
        self._totals: dict[tuple, dict] = {}  # each GPU's memory total's parts, as last asked for ...
        self._totals_at: float | None = None  # ... at this time ...
        self._totals_of: set[tuple] = set()  # ... of these GPUs
        self._gone: list[dict] = []  # GONE's answer ...
        self._gone_at: float | None = None  # ... at this time
        self._late: list[dict] = []  # the labels of the GPUs the last read found late (OLD) ...
        self._old_at: float | None = None  # ... where the last of every GPU was at this time
        self._shown: set[tuple] = set()  # the GPUs the last snapshot read (by their rows or verdicts)
        self.judge = HereJudge(client)  # the GPUs that export no verdict, judged here
        self._accounted: dict = {}  # the accounting's verdicts of dcgm-exporter's GPUs, for one step of its grid

    @while_paused
    def accounting(self, range_s: float, now: float | None = None):
        """Each job's GPU-hours by class over the last ``range_s`` seconds, what a fix would win back, and the step
        it was counted at (``accounting.account``); what it could not count is in ``accounting_notes``."""
        jobs, step, self.accounting_notes = account(self.client, range_s, time.time() if now is None else now,
                                                    self._accounted)
        return jobs, step

    @while_paused
    def judge_ahead(self, now: float | None = None) -> bool:
        """The GPUs without an exported verdict judged for the step of the grid ``now`` is in, ahead of the step's
        first snapshot (which then reuses the verdicts): True if it judged. The cluster page calls it once a mark has
        passed, between its refreshes."""
        return self.judge.ahead(time.time() if now is None else now)

    def next_mark_in(self, now: float | None = None) -> float | None:
        """Seconds to the judging grid's next mark (None before the first snapshot)."""
        return self.judge.next_mark_in(time.time() if now is None else now)

    @while_paused
    def snapshot(self, now: float | None = None) -> list[C.ClusterGpu]:
        """Every GPU now, most wasted first (``analysis.cluster.order``); ``notes`` says what could not be read.
        Raises SourceError where neither the rows nor the verdicts could be (NoGpu: none)."""
        now = time.time() if now is None else now
        slot = self.judge.slot(now)  # the refreshes within one step of the judging grid reuse its verdicts
        fresh = self.judge.fresh(slot)
        def grouped(promql: str):  # an answer made GPUs in its own thread, beside the others' waiting on Prometheus
            answer = self.client.query(promql, at=now)
            return S.groups(answer), S.skipped(answer)
        calls = {("rows", n): lambda n=n: grouped(S.by_gpu(n, S.META_LABELS if n == META_NAME else S.ID_LABELS))
                 for n in ROW_NAMES}  # side by side: one a name
        calls["verdicts"] = S.Once(lambda: self.client.query("gputop_verdict_confidence", at=now))
        calls["subclasses"] = lambda: self.client.query('gputop_bottleneck{subclass!=""}', at=now)
        # which GPUs report late (OLD), else whether those found late still are, and how late (where they are many,
        # a selector of their UUIDs costs more than every GPU's newest sample)
        every_gpu = self._old_at is None or now - self._old_at >= GONE_S or len(self._late) > LATE_BY_UUID
        if every_gpu or self._late:
            late = OLD if every_gpu else LATE.format(selector=S.of_gpus(PRESENCE, self._late))
            calls["old"] = lambda: self.client.query(late, at=now)
        if self._gone_at is None or now - self._gone_at >= GONE_S:
            calls["gone"] = lambda: self.client.query(GONE, at=now)
        names, classes = CLOCK
        calls["clock"] = lambda: grouped(S.by_gpu(f'{{__name__=~"{names}"}} and {ON_GPU} '
                                                  f'gputop_verdict_confidence{{class=~"{"|".join(classes)}"}}'))
        calls["traffic"] = lambda: self._traffic(calls["verdicts"].result(), grouped)
        if self._totals_at is None or now - self._totals_at >= TOTAL_S:
            calls["totals"] = lambda: grouped(S.by_gpu(TOTAL_SELECTOR))
        if fresh:  # the last minute of the nodes that export no verdict (the label index names them), meanwhile
            calls["history"] = lambda: self.judge.meanwhile(slot)
        answers, failed = S.each(calls, parallel=ROW_PARALLEL)
        rows_failed = [k for k in failed if isinstance(k, tuple) and k[0] == "rows"]
        if len(rows_failed) == len(ROW_NAMES):
            failed["rows"] = failed[rows_failed[0]]
        else:
            notes_rows = [f"the GPUs' {k[1]}{' (and their models and jobs)' if k[1] == META_NAME else ''} not read: "
                          f"{failed[k]}" for k in rows_failed]
        notes = [f"{what} not read: {failed[part]}" for part, what in (
            ("rows", "the GPUs' numbers"), ("verdicts", "the exported verdicts"),
            ("subclasses", "the exported subclasses"), ("old", "which GPUs report late"),
            ("gone", "which GPUs stopped reporting"), ("clock", "the SM clocks a job is judged on"),
            ("traffic", "the PCIe and NVLink traffic a job is judged on"),
            ("totals", "the GPUs' memory totals")) if part in failed]
        if len(rows_failed) != len(ROW_NAMES):
            notes += notes_rows
        if "rows" in failed and "verdicts" in failed:
            raise failed["rows"]
        gpus, skipped = {}, 0
        for name in ROW_NAMES:
            if ("rows", name) in answers:
                S.add_series(gpus, answers[("rows", name)][0], new=True)
                skipped += answers[("rows", name)][1]
        if skipped:
            notes.append(f"{count(skipped, 'series', 'series')} without a gpu label skipped (not a GPU's: an exporter "
                         "relabelled, or not a GPU exporter)")
        for extra in ("clock", "traffic"):
            S.add_series(gpus, answers.get(extra, ({},))[0])
        S.add_meta(gpus, answers[("rows", META_NAME)][0] if ("rows", META_NAME) in answers else {})
        if "totals" not in calls and set(gpus) - self._totals_of:  # a GPU new since they were asked for
            got, bad = S.each({"totals": lambda: grouped(S.by_gpu(TOTAL_SELECTOR))})
            answers.update(got)
            notes += [f"the GPUs' memory totals not read: {bad['totals']}"] if bad else []
        if "totals" in answers:
            self._totals = {k: g["series"] for k, g in answers["totals"][0].items()}
            self._totals_at, self._totals_of = now, set(gpus)
        for key, g in gpus.items():  # the memory total's parts as last asked for
            for name, points in self._totals.get(key, {}).items():
                g["series"].setdefault(name, points)
        verdict_labels: dict[tuple, dict] = {}  # GPU -> the labels of its exported class
        verdict_jobs: dict[tuple, list[str]] = defaultdict(list)
        confidence = {}
        for r in answers.get("verdicts", []):
            if C.whole_gpu(r["metric"]):
                key, job = I.gpu_id(r["metric"]), C.job_of(r["metric"])
                if key not in verdict_labels:
                    verdict_labels[key], confidence[key] = r["metric"], S.number(r["value"][1])
                if job and job not in verdict_jobs[key]:
                    verdict_jobs[key].append(job)
        subclass = {}
        for r in answers.get("subclasses", []):
            if C.whole_gpu(r["metric"]):
                subclass.setdefault((I.gpu_id(r["metric"]), r["metric"].get("class")), r["metric"]["subclass"])
        self._read_gone(answers, failed, set(gpus) | set(verdict_labels), now, notes)
        if "old" in answers:
            self._late = [r["metric"] for r in answers["old"] if C.whole_gpu(r["metric"])]
            self._old_at = now if every_gpu else self._old_at
        elif "old" in failed:  # asked of every GPU next time
            self._late, self._old_at = [], None
        aged = {}  # GPU -> (labels, its newest sample time)
        for r in answers.get("old", []):
            if C.whole_gpu(r["metric"]):
                aged.setdefault(I.gpu_id(r["metric"]), (r["metric"], float(r["value"][1])))
        gone_labels = {I.gpu_id(r["metric"]): r["metric"] for r in self._gone if C.whole_gpu(r["metric"])}
        gone_labels = {k: v for k, v in gone_labels.items() if k not in gpus and k not in aged}
        if gone_labels:
            aged.update(self._ages(gone_labels, now, notes))
        # one GPU seen through two targets: a dcgm-exporter beside the node's gputop is the same GPU; the others
        # claiming one UUID are rows of their own, flagged
        ids = {k: g["labels"] for k, g in gpus.items()}
        ids.update({k: v for k, v in verdict_labels.items() if k not in ids})
        merged, duplicates = I.resolve(ids, set(verdict_labels))
        for other, into in merged.items():
            if other in gpus:
                if into in gpus:
                    S.merge(gpus[into], gpus.pop(other))
                else:
                    gpus[into] = dict(gpus.pop(other), labels=verdict_labels[into])
        gone = {k: v for k, v in aged.items() if k not in gpus and k not in verdict_labels and k not in merged}
        if not gpus and not verdict_labels and not gone:
            raise NoGpu(self._empty(now))
        rows, labels_of = {}, {}
        for key in list(gpus) + [k for k in verdict_labels if k not in gpus]:
            g = gpus.get(key) or {"labels": verdict_labels[key], "series": {}, "jobs": []}
            labels_of[key] = g["labels"]
            rows[key] = self._row(key, g, verdict_jobs.get(key, []))
            if key in verdict_labels:
                cls = verdict_labels[key].get("class")
                rows[key].cls, rows[key].subclass = cls, subclass.get((key, cls)) or None
                rows[key].confidence = confidence.get(key)
            if key in aged:
                rows[key].age_s = round(now - aged[key][1], 1)
                rows[key].flags.append(f"its newest sample is {rows[key].age_s:.0f} s old: its exporter's clock is "
                                       "behind, or Prometheus stopped scraping it")
        for key, (labels, t) in gone.items():
            row = rows[key] = self._row(key, {"labels": labels, "series": {}, "jobs": []}, [])
            row.reporting, row.age_s = False, round(now - t, 1)
            row.flags.append(f"not reporting: its newest sample is {row.age_s:.0f} s old (its exporter stopped, its "
                             "node is gone, or its clock is behind)")
        for key, others in duplicates.items():
            if key in rows:
                rows[key].flags.insert(0, I.duplicate_note(key[1], others))
        unjudged = [k for k in rows if k not in verdict_labels and rows[k].reporting]
        judged = self.judge.verdicts({k: labels_of[k] for k in unjudged}, slot, answers.get("history"), notes)
        for key in unjudged:
            row = rows[key]
            row.judged_by = C.JUDGED
            row.cls, row.subclass, row.confidence, missing, extras = judged.get(key, (None, None, None, (), {}))
            row.missing = list(missing)
            for name, v in extras.items():
                if getattr(row, name) is None:
                    setattr(row, name, v)
        self.notes = notes + [f"Prometheus said its answer is partial: {w}" for w in self.client.take_warnings()]
        return C.order(list(rows.values()))

    def _traffic(self, verdicts: list[dict], grouped) -> tuple:
        """The PCIe and NVLink series (``TRAFFIC``) of the GPUs whose exported class reads them, as ``grouped``
        makes them: asked for by their UUIDs (by their targets, of GPUs without one), only theirs kept."""
        names, classes = TRAFFIC
        theirs = {I.gpu_id(r["metric"]): r["metric"] for r in verdicts
                  if r["metric"].get("class") in classes and C.whole_gpu(r["metric"])}
        if not theirs:
            return {}, 0
        got = grouped(S.by_gpu(S.of_gpus(names, theirs.values())))
        return {k: g for k, g in got[0].items() if k in theirs}, *got[1:]

    def _read_gone(self, answers: dict, failed: dict, shown: set[tuple], now: float, notes: list[str]) -> None:
        """``self._gone``: this read's GONE answer; else the one kept, read again now where a GPU the last read showed
        is in neither it nor ``shown`` (this read's); nothing where it failed (said in ``notes``)."""
        if "gone" in answers:
            self._gone, self._gone_at = answers["gone"], now
        elif "gone" in failed:
            self._gone, self._gone_at = [], None
        elif self._shown - shown - {I.gpu_id(r["metric"]) for r in self._gone}:
            try:
                self._gone, self._gone_at = self.client.query(GONE, at=now), now
            except SourceError as exc:
                self._gone, self._gone_at = [], None
                notes.append(f"which GPUs stopped reporting not read: {exc}")
        self._shown = shown

    def _ages(self, gone: dict[tuple, dict], now: float, notes: list[str]) -> dict[tuple, tuple]:
        """The newest sample time of the GPUs that stopped reporting (asked for of them alone: few)."""
        uuids = {I.uuid_of(labels) for labels in gone.values()} - {None}
        try:
            got = self.client.query(AGE.format(labels=", ".join(S.META_LABELS), presence=PRESENCE,
                                               uuids=S.values_regex(uuids), recent=RECENT_S, step=JUDGE_STEP_S),
                                    at=now) if uuids else []
        except SourceError as exc:
            notes.append(f"when the GPUs that stopped reporting last did not read: {exc}")
            got = []
        times = {I.gpu_id(r["metric"]): float(r["value"][1]) for r in got}
        return {k: (labels, times.get(k, now - RECENT_S)) for k, labels in gone.items()}

    def _empty(self, now: float) -> str:
        """Why the fleet is empty, in words: nothing ever, or nothing now of series seen in the last hour."""
        seen = self.client.series(S.SELECTOR, "gputop_bottleneck", start=now - EMPTY_LOOKBACK_S, end=now)
        gpus = {I.gpu_id(s) for s in seen if C.whole_gpu(s)}
        if gpus:
            return (f"{self.client.url}: no GPU series now ({count(len(gpus), 'GPU')} exported in the last hour, "
                    "none since: have the exporters stopped, or Prometheus stopped scraping them?)")
        return (f"{self.client.url}: no GPU series (neither dcgm-exporter's DCGM_FI_* nor gputop's) in this "
                "Prometheus: is it scraping the exporters?")

    @staticmethod
    def _row(key: tuple, g: dict, verdict_jobs: list[str]) -> C.ClusterGpu:
        values = S.latest(g)
        sample = to_sample(S.index(g), 0.0, values)
        labels = g["labels"]
        nvlink = [values.get(n) for n in ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES")]
        return C.ClusterGpu(
            node=I.node_of(labels), gpu=labels.get(F.LABEL_GPU, "?"), uuid=I.uuid_of(labels),
            model=labels.get(F.LABEL_MODEL_NAME) or None, jobs=list(dict.fromkeys(g["jobs"] + verdict_jobs)),
            sm_pct=sample["sm_active_pct"], dram_pct=sample["dram_bw_pct"], tensor_pct=sample["tensor_pct"],
            mem_used_bytes=sample["mem_used_bytes"], mem_total_bytes=sample["mem_total_bytes"],
            util_pct=sample["util_gpu_pct"], sm_clock_mhz=sample["sm_clock_mhz"], pcie_tx_bps=sample["pcie_tx_bps"],
            pcie_rx_bps=sample["pcie_rx_bps"], nvlink_bps=None if None in nvlink else sum(nvlink),
            instance=labels.get("instance") or None, scrape_job=labels.get("job") or None, key=key)
