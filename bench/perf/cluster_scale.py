"""The cluster read from Prometheus at fleet scale (issue 26, "Scale, measured"); no GPU.

For each fleet size (``--gpus 256 512 1024 2048``: nodes of 8 GPUs) this script

1. generates 24 h (``--hours``) of the fleet's history at a 30 s scrape interval (``--step``) as OpenMetrics text:
   the synthetic fleet of gputop/evaluate/synthetic_fleet.py (its docstring says what it holds: 3 nodes in 4 run
   ``gputop --export``, the 4th dcgm-exporter only; jobs of 1-6 h over groups of 4 nodes, phases of 20-90 min);
2. backfills it with ``promtool tsdb create-blocks-from openmetrics``, one file per 2 h block (so no file holds
   the whole day and the blocks do not overlap);
3. starts Debian's ``prometheus`` on the blocks and waits for it to compact them (2 h -> 6 h -> 18 h blocks, as a
   server that scraped the day itself would hold them; on 13 uncompacted 2 h blocks the queries cost about 1.5x);
4. measures, with "now" ``--cpu-seconds`` + 90 s before the data's last sample plus the time since measuring
   began (the backfill leaves the data minutes behind the wall clock; the queries are those of the wall clock's now;
   every refresh reads a fleet that is reporting: the samples after "now" are the future, which Prometheus does not
   show, and none is older than the reader's OLD_S; the 24 h range stays within the 24 h + 10 min generated):
   * a cluster page refresh (``ClusterReader.snapshot``): the first, with nothing cached ("cold": the worst
     case, which recurs each time the judged GPUs' window moves on), then ``--cpu-seconds`` of refreshes at the
     page's cadence (``--cadence``, 5 s: the page's REFRESH_S) with their median and worst latency, this
     process' CPU (``resource.getrusage``) and Prometheus' (``/proc/PID/stat``), each as % of one core;
   * the job accounting over 24 h (``ClusterReader.accounting(86400)``, ``--accountings`` times): latency and
     CPU; the page's whole CPU adds one every ``--account-every`` (default: the page's ACCOUNT_S, 300 s);
   * where each read's time goes: the wall time a query to Prometheus was in flight ("prom"; the accounting
     sends several at once), this process' CPU decoding JSON ("json") and the rest of its CPU ("py": rows,
     judging the dcgm-exporter GPUs); and Prometheus' CPU for the read;
   * with ``--queries``: each query of one refresh and of one accounting sent again alone, one after the other:
     its wall time, Prometheus' CPU and the answer's size (which queries cost Prometheus what);
   * with ``--raw-accountings N``: N accountings more as without the recording rules (the raw series, a new
     reader each: nothing cached), their time and totals beside the rules' (the same jobs, the hours they count);
5. stops Prometheus and removes its temporary directory (also on Ctrl-C or an error).

Between 3 and 4 (unless ``--no-rules``), the accounting's recording rules (docs/prometheus/gputop-rules.yml, group
``gputop-accounting-parts``) are evaluated over the generated day by ``promtool tsdb create-blocks-from rules``
against the running Prometheus, their blocks moved into its TSDB and Prometheus restarted on it (once: ``--keep``
keeps them), as a server that had the rules loaded all day holds them. promtool writes no staleness markers: a
job's recorded series holds a step of the look-back (5 min) after the job's GPUs leave a class, on top of the
backfilled raw series' own (docs/benchmarks.md, "Cluster scale at 8,192 GPUs").

    python bench/perf/cluster_scale.py [--gpus 256 512 1024 2048] [--json FILE] [--keep DIR] [--queries]
        [--no-rules] [--raw-accountings N]

``--keep DIR`` keeps each fleet's TSDB under DIR and measures again on it the next time (its "now" stays the
data's end).

Prints a table (and writes ``--json``). Needs ``prometheus`` and ``promtool`` on PATH. On 2 cores the 2,048-GPU
fleet (156 M samples) took 6 min to generate and 11 min to backfill (promtool reading one block while the next is
written); the 8,192-GPU one (641 M samples, 2.0 GB of TSDB) 19 and 47 min, ~32 GB of disk at its peak (two blocks'
text, 14 GB each) and promtool ~17 GB of RSS (the text it maps included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputop.evaluate.synthetic_fleet import GPUS_PER_NODE, backfill, stop  # noqa: E402


# -- Prometheus ---------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_prometheus(data: Path, work: Path, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 30s\n")
    log = open(work / "prometheus.log", "w")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=15d",
         f"--web.listen-address=127.0.0.1:{port}", "--query.max-samples=200000000", *extra],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited ({proc.returncode}); see {work / 'prometheus.log'}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("prometheus not ready within 120 s")


def proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a process (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- measuring ----------------------------------------------------------------------------------------------------
class Timed:
    """Where a read's time goes: the wall time some query to Prometheus was in flight (HTTP request to the last byte
    of the answer; several at once count once) and the CPU this process spent decoding JSON."""

    def __init__(self):
        self.spans: list[tuple[float, float]] = []
        self.json_s = 0.0
        self.sent: list[tuple[tuple, dict]] = []  # each request's arguments (--queries sends them again)

    def install(self) -> None:
        import gputop.telemetry.prometheus as P
        timed, real_request, real_loads = self, P.request, json.loads  # (the modules, never patched)

        def request(*a, **k):  # the client's whole request (telemetry/urls.request): sent to its body's last byte
            timed.sent.append((a, k))
            t0 = time.perf_counter()
            try:
                return real_request(*a, **k)
            finally:
                timed.spans.append((t0, time.perf_counter()))

        class _Json:  # the client's json module: loads timed
            def __getattr__(self, name):
                return getattr(json, name)

            @staticmethod
            def loads(body, *a, **k):
                t = time.thread_time()  # this thread's CPU: threads decode side by side
                try:
                    return real_loads(body, *a, **k)
                finally:
                    timed.json_s += time.thread_time() - t

        P.request, P.json = request, _Json()
        self.real_request = real_request

    def reset(self) -> None:
        self.spans, self.json_s, self.sent = [], 0.0, []

    def each_alone(self, sent: list[tuple[tuple, dict]], prom_pid: int) -> list[dict]:
        """Each request of ``sent`` again, alone and in turn: wall time, Prometheus' CPU, answer bytes, the query."""
        out = []
        for a, k in sent:
            c, t = proc_cpu_s(prom_pid), time.perf_counter()
            answer = self.real_request(*a, **k)
            wall, cpu = time.perf_counter() - t, proc_cpu_s(prom_pid) - c
            url, data = a[0], k.get("data")
            form = urllib.parse.parse_qs(data.decode() if data else urllib.parse.urlparse(url).query)
            out.append({"wall_s": round(wall, 3), "prometheus_cpu_s": round(cpu, 2), "bytes": len(answer.body),
                        "endpoint": urllib.parse.urlparse(url).path,
                        "query": (form.get("query") or form.get("match[]") or [""])[0][:400],
                        "step": (form.get("step") or [None])[0]})
        return out

    def waited_s(self) -> float:
        total, end = 0.0, float("-inf")
        for t0, t1 in sorted(self.spans):
            if t1 > end:
                total += t1 - max(t0, end)
                end = t1
        return total


def wait_compacted(url: str, limit_s: float = 240.0) -> dict:
    """Prometheus compacts the backfilled 2 h blocks (6 h, 18 h) as a live server's would be after a day: wait
    until it has (the block count lower than at start and still for 45 s: at 8,192 GPUs the last compaction, three 6 h
    blocks into one, ran 24 s with the count unchanged), or ``limit_s``."""
    def blocks() -> int:  # Prometheus' own /metrics (it scrapes nothing here, itself included)
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("prometheus_tsdb_blocks_loaded "):
                    return int(float(line.split()[1]))
        raise RuntimeError("prometheus_tsdb_blocks_loaded not in Prometheus' /metrics")
    t0 = time.monotonic()
    first = last = blocks()
    still = time.monotonic()
    while first > 6 and time.monotonic() - t0 < limit_s:  # (a TSDB kept by --keep is compacted already)
        time.sleep(3)
        n = blocks()
        if n != last:
            last, still = n, time.monotonic()
        elif n < first and time.monotonic() - still >= 45:
            break
    return {"blocks_backfilled": first, "blocks_served": last, "compaction_wait_s": time.monotonic() - t0}


def measure(url: str, end: float, cadence: float, cpu_seconds: float, prom_pid: int, range_s: float,
            account_every: float, accountings: int, queries: bool = False, raw_accountings: int = 0,
            fixed_cadence: bool = False) -> dict:
    """The page's reads against Prometheus at ``url``; "now" is ``LEAD_S`` + ``cpu_seconds`` before the data's last
    sample ``end`` plus the time since this began (the wall clock's now, as if the data had been scraped until this
    moment: every refresh reads the fleet reporting, whatever ``cpu_seconds``)."""
    from gputop.analysis.cluster_jobs import judge_jobs
    from gputop.fleet.reader import ClusterReader
    from gputop.telemetry.prometheus import PrometheusClient
    t_start, begin = time.monotonic(), end - LEAD_S - cpu_seconds

    def clock() -> float:
        return begin + (time.monotonic() - t_start)

    from gputop.tui.cluster.model import page_gc
    page_gc()  # as the page's process does (its Refresher)
    client = PrometheusClient(url, timeout=300)
    timed = Timed()
    timed.install()
    out: dict = {}

    def timed_call(fn):
        timed.reset()
        c, p, t = self_cpu_s(), proc_cpu_s(prom_pid), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - t, self_cpu_s() - c
        return result, {"wall_s": wall, "cpu_s": cpu, "prometheus_s": timed.waited_s(), "json_s": timed.json_s,
                        "python_s": cpu - timed.json_s, "prometheus_cpu_s": proc_cpu_s(prom_pid) - p,
                        "queries": len(timed.spans)}

    def refresh(reader):  # what the page does each refresh: the rows, each job judged whole over its nodes
        rows = reader.snapshot(clock())
        return rows, judge_jobs(rows), list(reader.notes)

    # a refresh with nothing cached (a new page; thereafter once per judging step): the worst case
    (rows, jobs_now, notes), out["snapshot_cold"] = timed_call(lambda: refresh(ClusterReader(client)))
    out["gpus_seen"] = len(rows)
    out["gpus_duplicate"] = sum(r.duplicate for r in rows)
    out["gpus_not_reporting"] = sum(not r.reporting for r in rows)
    out["judged_here"] = sum(r.judged_by == "gputop" for r in rows)
    out["classes_now"] = sorted({r.cls for r in rows if r.cls})
    out["jobs_now"] = len(jobs_now)
    out["job_findings"] = sorted({j.finding for j in jobs_now.values() if j.finding})
    out["notes"] = notes  # what a read could not read: none, or the figures are not of a whole read
    # the page: one reader, a refresh every ``cadence`` for ``cpu_seconds``; this process' CPU and Prometheus'
    reader = ClusterReader(client)
    runs, aheads, seen = [], [], 0
    c0, p0, t0 = self_cpu_s(), proc_cpu_s(prom_pid), time.monotonic()
    from gputop.tui.cluster.model import CPU_SHARE, Refresher
    refresher = Refresher(reader, range_s, lambda *a: None, refresh_s=cadence, clock=clock)  # (its wait only)
    judge_ahead = reader.judge_ahead
    def timed_ahead(now):  # the page's judging ahead, timed where it judged
        judged, run = timed_call(lambda: judge_ahead(now))
        if judged:
            aheads.append({"at": now, **run})
        return judged
    reader.judge_ahead = timed_ahead
    waits = []
    while time.monotonic() - t0 < cpu_seconds:
        start = time.monotonic()
        at = clock()
        runs.append({"at": at, **timed_call(lambda: refresh(reader))[1]})
        # the page's cadence (tui/cluster/model.Refresher: a refresh's CPU and the judging ahead's before it), or
        # --fixed-cadence: every ``cadence`` s whatever it costs; between two, the judging ahead as the page does
        ahead_cpu, seen = sum(a["cpu_s"] for a in aheads[seen:]), len(aheads)
        waits.append(cadence if fixed_cadence else max(cadence, (runs[-1]["cpu_s"] + ahead_cpu) / CPU_SHARE))
        refresher.wait_judging(start + waits[-1])
    wall = time.monotonic() - t0
    out["refresh_runs"] = [{k: r[k] for k in ("at", "wall_s", "cpu_s", "prometheus_cpu_s", "queries")} for r in runs]
    out["judged_ahead_runs"] = [{k: r[k] for k in ("at", "wall_s", "cpu_s", "prometheus_cpu_s", "queries")}
                                for r in aheads]
    out["judged_ahead"] = len(aheads)
    out["judged_ahead_median"] = median_run(aheads) if aheads else None
    out["cadence_s"] = cadence
    out["cadence_median_s"] = statistics.median(waits)
    out["refreshes"] = len(runs)
    out["snapshot"] = median_run(runs)
    out["snapshot_worst_s"] = max(r["wall_s"] for r in runs)
    out["client_cpu_pct"] = 100 * (self_cpu_s() - c0) / wall
    out["prometheus_cpu_pct"] = 100 * (proc_cpu_s(prom_pid) - p0) / wall
    out["last_refresh_behind_data_end_s"] = round(end - clock())  # > 0: every refresh read the fleet reporting
    if queries:  # which queries cost Prometheus what: one refresh's, each sent again alone
        timed_call(lambda: refresh(reader))
        out["queries_refresh"] = timed.each_alone(list(timed.sent), prom_pid)
    # the job accounting over the range (the page reads it every ``account_every`` seconds)
    runs = []
    for _ in range(accountings):
        (jobs, step), run = timed_call(lambda: reader.accounting(range_s, clock()))
        runs.append(run)
    out["accounting_step_s"] = step
    out["accounting_jobs"] = len(jobs)
    out["accounting_gpu_hours"] = round(sum(j.gpu_hours for j in jobs), 1)
    out["accounting_win_back_gpu_hours"] = round(sum(j.win_back_gpu_hours for j in jobs), 1)
    out["accounting_notes"] = list(reader.accounting_notes)
    out["accounting_first"] = runs[0]
    out["accounting"] = median_run(runs)
    out["accounting_worst_s"] = max(r["wall_s"] for r in runs)
    # the page's whole CPU: the refreshes, and an accounting every ``account_every`` seconds
    out["account_every_s"] = account_every
    out["page_client_cpu_pct"] = out["client_cpu_pct"] + 100 * out["accounting"]["cpu_s"] / account_every
    out["page_prometheus_cpu_pct"] = out["prometheus_cpu_pct"] + 100 * statistics.median(
        r["prometheus_cpu_s"] for r in runs) / account_every
    if queries:  # ... and one accounting's
        timed_call(lambda: reader.accounting(range_s, clock()))
        out["queries_accounting"] = timed.each_alone(list(timed.sent), prom_pid)
    if raw_accountings:  # the accounting as without the recording rules (a new reader each: nothing cached)
        import gputop.fleet.accounting as A
        recorded, A.recorded = A.recorded, lambda *a: False
        try:
            runs = []
            for _ in range(raw_accountings):
                raw_reader = ClusterReader(client)
                (raw_jobs, _), run = timed_call(lambda: raw_reader.accounting(range_s, clock()))
                runs.append(run)
        finally:
            A.recorded = recorded
        out["raw_accounting"] = median_run(runs)
        out["raw_accounting_jobs"] = len(raw_jobs)
        out["raw_accounting_gpu_hours"] = round(sum(j.gpu_hours for j in raw_jobs), 1)
        out["raw_accounting_win_back_gpu_hours"] = round(sum(j.win_back_gpu_hours for j in raw_jobs), 1)
    return out


LEAD_S = 90.0  # "now" starts this long + --cpu-seconds before the data's end (cold refresh, the last one's overrun)
MARGIN_S = 600  # the history generated beyond --hours: "now" may start at most this long (less a step) before the end


def backfill_rules(url: str, work: Path, start: float, end: float) -> float:
    """The recording rules the accounting sums (docs/prometheus/gputop-rules.yml, group ``RULES_GROUP``) evaluated
    over the generated history by ``promtool tsdb create-blocks-from rules`` against the running Prometheus, as a
    server that had them loaded all day would hold them, and moved into its TSDB (read at its next start): the
    seconds it took."""
    import yaml

    from gputop.fleet.accounting import RULES_FILE, RULES_GROUP
    groups = yaml.safe_load((Path(__file__).resolve().parents[2] / RULES_FILE).read_text())["groups"]
    rules = work / "accounting-rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [g for g in groups if g["name"] == RULES_GROUP]}))
    out = work / "rules-blocks"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "rules", f"--start={int(start)}", f"--end={int(end)}",
                    f"--url={url}", f"--output-dir={out}", "--eval-interval=60s", str(rules)], check=True,
                   stdout=subprocess.DEVNULL)
    for block in out.iterdir():
        if block.is_dir():
            block.rename(work / "data" / block.name)
    shutil.rmtree(out, ignore_errors=True)
    return time.perf_counter() - t


def median_run(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "at"}


def one_fleet(gpus: int, args, root: Path) -> dict:
    """Generate (or, under ``--keep``, reuse) one fleet's TSDB, start Prometheus on it, measure, stop."""
    work = root / f"gpus{gpus}-{args.hours:g}h-{args.step}s"
    meta = work / "fleet.json"
    if meta.exists():
        made = json.loads(meta.read_text())
    else:
        shutil.rmtree(work, ignore_errors=True)
        (work / "data").mkdir(parents=True)
        end = int(time.time()) // args.step * args.step + args.step
        start = end - int(args.hours * 3600) - MARGIN_S  # 10 min more than the range: "now" may start before the end
        t = time.perf_counter()
        made = backfill(work / "data", gpus, start, end, args.step, work)
        made.update(end=end, backfill_s=time.perf_counter() - t)
        made["tsdb_bytes"] = sum(p.stat().st_size for p in (work / "data").rglob("*") if p.is_file())
        meta.write_text(json.dumps(made))
    proc = None
    try:
        t = time.perf_counter()
        proc, url = start_prometheus(work / "data", work)
        made["prometheus_start_s"] = time.perf_counter() - t
        made.update(wait_compacted(url))
        if not args.no_rules and "rules_backfill_s" not in made:  # the accounting's recording rules over the day
            made["rules_backfill_s"] = backfill_rules(url, work, made["end"] - args.step - args.hours * 3600 - MARGIN_S,
                                                      made["end"])
            meta.write_text(json.dumps(made))
            stop(proc)
            proc, url = start_prometheus(work / "data", work)
            made["rules_compaction"] = wait_compacted(url)  # (the rules' blocks beside the day's: merged)
        result = measure(url, made["end"] - args.step, args.cadence, args.cpu_seconds, proc.pid,
                         args.hours * 3600, args.account_every, args.accountings, args.queries, args.raw_accountings,
                         args.fixed_cadence)
    finally:
        stop(proc)
    return {"gpus": gpus, "nodes": gpus // GPUS_PER_NODE, **made, **result}


TABLE = (("GPUs", "gpus", "{:d}"), ("samples", "samples", "{:,}"),
         ("cold s", ("snapshot_cold", "wall_s"), "{:.2f}"), ("prom", ("snapshot_cold", "prometheus_s"), "{:.2f}"),
         ("json", ("snapshot_cold", "json_s"), "{:.2f}"), ("py", ("snapshot_cold", "python_s"), "{:.2f}"),
         ("refresh s", ("snapshot", "wall_s"), "{:.2f}"), ("worst s", "snapshot_worst_s", "{:.2f}"),
         ("cadence s", "cadence_median_s", "{:.1f}"),
         ("client %", "client_cpu_pct", "{:.1f}"), ("prom %", "prometheus_cpu_pct", "{:.1f}"),
         ("acct s", ("accounting", "wall_s"), "{:.2f}"), ("prom", ("accounting", "prometheus_s"), "{:.2f}"),
         ("json", ("accounting", "json_s"), "{:.2f}"), ("py", ("accounting", "python_s"), "{:.2f}"),
         ("prom cpu", ("accounting", "prometheus_cpu_s"), "{:.2f}"),
         ("page client %", "page_client_cpu_pct", "{:.1f}"), ("page prom %", "page_prometheus_cpu_pct", "{:.1f}"))


def table(results: list[dict]) -> str:
    def cell(r, key, fmt):
        v = r[key[0]][key[1]] if isinstance(key, tuple) else r[key]
        return fmt.format(v)
    rows = [[h for h, _, _ in TABLE]] + [[cell(r, k, f) for _, k, f in TABLE] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows)


def main() -> int:
    from gputop.tui.cluster.model import ACCOUNT_S, REFRESH_S
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[256, 512, 1024, 2048], help="fleet sizes (x8 per node)")
    ap.add_argument("--hours", type=float, default=24.0, help="history generated (and the accounting's range)")
    ap.add_argument("--step", type=int, default=30, help="scrape interval of the generated data, s")
    ap.add_argument("--cadence", type=float, default=REFRESH_S,
                    help="the cluster page's refresh interval, s (its REFRESH_S)")
    ap.add_argument("--account-every", type=float, default=ACCOUNT_S,
                    help="the page's accounting interval, s (its ACCOUNT_S): for the page's whole CPU")
    ap.add_argument("--fixed-cadence", action="store_true",
                    help="refresh every --cadence s whatever a refresh costs (the page stretches its cadence to keep "
                    "a refresh's CPU within 5%% of a core): what a refresh costs at that cadence")
    ap.add_argument("--cpu-seconds", type=float, default=60.0, help="refreshes at the cadence for this long")
    ap.add_argument("--accountings", type=int, default=3, help="accountings timed")
    ap.add_argument("--queries", action="store_true",
                    help="also send each query of one refresh and one accounting again alone: its cost to Prometheus")
    ap.add_argument("--no-rules", action="store_true",
                    help="do not backfill the accounting's recording rules (the accounting then reads the raw series)")
    ap.add_argument("--raw-accountings", type=int, default=0,
                    help="also time this many accountings from the raw series (as without the rules), and compare")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--keep", help="keep the TSDBs under this directory, and reuse those already there (default: "
                    "a temporary directory, removed)")
    args = ap.parse_args()
    if LEAD_S + args.cpu_seconds > MARGIN_S - args.step:
        print(f"--cpu-seconds {args.cpu_seconds:g}: at most {MARGIN_S - args.step - LEAD_S:g} (the refreshes read the "
              f"generated data's last {MARGIN_S} s)", file=sys.stderr)
        return 2
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            print(f"{tool} not on PATH (apt-get install prometheus)", file=sys.stderr)
            return 2
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cluster_scale-"))
    root.mkdir(parents=True, exist_ok=True)
    results = []
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for gpus in args.gpus:
            r = one_fleet(gpus, args, root)
            results.append(r)
            print(f"{gpus} GPUs: {json.dumps(r)}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted: Prometheus stopped" + ("" if args.keep else ", temporary files removed"), file=sys.stderr)
        return 130
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(table(results))
    print(f"(refreshes every {args.cadence:g} s or more (the page's cadence: a read's CPU at most 5% of a core) for "
          f"{args.cpu_seconds:g} s, CPU as % of one core; accounting over "
          f"{args.hours:g} h, counted in the page's CPU every {args.account_every:g} s; data every {args.step} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
