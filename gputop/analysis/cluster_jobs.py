"""A job judged whole, over every node it runs on (pure): the cluster page's and ``--once``'s job verdicts.

Each node's ``gputop --export`` judges its own GPUs, the node's jobs together (``analysis/comms.py``), but a job
that spans nodes is only whole here, where every node's GPUs are read. :func:`judge_jobs` groups the rows now by
job and node (a node: the scrape target that exported the GPU, so two exporters whose hosts share a name are two
nodes; a dcgm-exporter beside the node's gputop is one) and looks, in this order, for:

* **a stall**: some of the job's GPUs stalled (a collective that never completes, ``stalled``), others not in it:
  idle, waiting on their host, named ``culprit`` by their own node, or not reporting at all. The nodes of those
  others are the culprit nodes (their ranks left the collective or hang outside it; a node that stopped reporting
  may have died). Every GPU stalled: the whole job waits, no node stands out;
* **a straggler node**: some nodes' GPUs wait in collectives (comms-bound) while another node's GPUs work
  (compute- or memory-bound, throttled: more work, or a lower SM clock) or wait on their own host (input-starved,
  host-bound: its data pipeline or Python is slower), or a node whose GPUs run at a clock the job's other nodes'
  beat by ``STRAGGLER_CLOCK_RATIO`` (the thresholds are the node's own, ``analysis/collectives.py``);
* **comms-bound across nodes**: most of the job's GPUs comms- or PCIe-bound, NVLink idle where it is exported,
  PCIe busy both ways: the collectives cross the network (GPUDirect RDMA's NIC traffic crosses the GPU's PCIe),
  whose bandwidth, not the GPUs, sets the pace.

A job's words name its nodes as the rows do, with the scrape target where two of its nodes share a name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.analysis.collectives import STRAGGLER_CLOCK_RATIO, STRAGGLER_WORK_MARGIN_PCT, STRAGGLER_WORK_RATIO
from gputop.analysis.rules.comms_bound import NVLINK_ACTIVE_BYTES_PER_S, PCIE_COMMS_BALANCE, PCIE_COMMS_MIN_BPS
from gputop.analysis.vocabulary import Cls
from gputop.format import count, si

STALL = (Cls.STALLED,)
NOT_IN_IT = (Cls.IDLE, Cls.HOST_BOUND, Cls.INPUT_STARVED, Cls.CULPRIT, None)  # a GPU its stalled peers wait for
WORK = (Cls.COMPUTE_BOUND, Cls.MEMORY_BOUND, Cls.THROTTLED)
HOST = (Cls.INPUT_STARVED, Cls.HOST_BOUND)
COMMS = (Cls.COMMS_BOUND, Cls.PCIE_BOUND)


@dataclass
class JobNow:
    """One job over every node it runs on, now. ``finding``: "stall", "straggler", "comms across nodes" or None;
    ``culprit_nodes`` / ``straggler_node``: the node(s) it names; ``sentence``: the finding in words."""

    job: str
    nodes: list[str] = field(default_factory=list)  # its nodes as shown, most GPUs first
    gpus: int = 0
    finding: str | None = None
    culprit_nodes: list[str] = field(default_factory=list)
    straggler_node: str | None = None
    sentence: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"job": self.job, "nodes": self.nodes, "gpus": self.gpus, "finding": self.finding,
                "culprit_nodes": self.culprit_nodes, "straggler_node": self.straggler_node,
                "sentence": self.sentence, "evidence": self.evidence}


def node_key(row) -> str:
    """The node a row's GPU is on, for a job: its scrape target (two exporters whose hosts share a name are two
    nodes), else its node name."""
    return row.instance or row.node


def _names(rows) -> dict[str, str]:
    """node key -> the node as shown: its name, with its scrape target where another node of the job shares it."""
    by_name: dict[str, set[str]] = {}
    for r in rows:
        by_name.setdefault(r.node, set()).add(node_key(r))
    return {node_key(r): r.node if len(by_name[r.node]) == 1 else f"{r.node} ({node_key(r)})" for r in rows}


def _mean(values) -> float | None:
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got else None


def _busiest(rows) -> float | None:
    """The mean of each GPU's busiest unit it exports (tensor pipe or DRAM), %."""
    return _mean(max((v for v in (r.tensor_pct, r.dram_pct) if v is not None), default=None) for r in rows)


def judge_jobs(rows: list) -> dict[str, JobNow]:
    """Every job of the rows (``ClusterGpu``), judged whole (see the module's text): ``{job: JobNow}``."""
    by_job: dict[str, list] = {}
    for r in rows:
        for j in r.jobs:
            by_job.setdefault(j, []).append(r)
    return {job: judge_job(job, members) for job, members in by_job.items()}


def judge_job(job: str, rows: list) -> JobNow:
    names = _names(rows)
    nodes: dict[str, list] = {}
    for r in rows:
        nodes.setdefault(node_key(r), []).append(r)
    order = sorted(nodes, key=lambda n: (-len(nodes[n]), names[n]))
    out = JobNow(job, [names[n] for n in order], len(rows))
    for judge in (_stall, _straggler, _across):
        if judge(out, nodes, names):
            break
    return out


def _cls(r):
    return r.cls if r.reporting else None


def _stall(out: JobNow, nodes: dict, names: dict) -> bool:
    stalled = {n: [r for r in rs if _cls(r) in STALL] for n, rs in nodes.items()}
    waiting = [n for n, rs in stalled.items() if rs]
    if not waiting:
        return False
    others = {n: [r for r in rs if _cls(r) in NOT_IN_IT] for n, rs in nodes.items()}
    culprits = [n for n, rs in others.items() if rs]
    waits = sum(len(rs) for rs in stalled.values())
    out.finding = "stall"
    out.evidence = {"gpus_stalled": waits, "nodes_stalled": len(waiting)}
    if not culprits:
        out.sentence = (f"stalled: {count(waits, 'GPU')} on {count(len(waiting), 'node')} wait in a collective and no "
                        "GPU of the job is outside it here: a peer outside these GPUs, or a deadlock")
        return True
    out.culprit_nodes = [names[n] for n in sorted(culprits, key=lambda n: names[n])]
    parts = []
    for n in sorted(culprits, key=lambda n: names[n]):
        rs = others[n]
        gone = [r for r in rs if not r.reporting]
        here = [r for r in rs if r.reporting]
        said = []
        if here:
            classes = ", ".join(sorted({_cls(r) or "no verdict" for r in here}))
            said.append(f"{count(len(here), 'GPU')} {'is' if len(here) == 1 else 'are'} {classes}")
        if gone:
            said.append(f"{count(len(gone), 'GPU')} stopped reporting (its exporter or the node is gone)")
        parts.append(f"on {names[n]} the job's " + " and ".join(said))
    where = ", ".join(names[n] for n in sorted(waiting, key=lambda n: names[n]))
    out.evidence["gpus_outside"] = sum(len(rs) for rs in others.values())
    out.sentence = (f"stalled: {count(waits, 'GPU')} on {where} wait in a collective while "
                    + "; ".join(parts) + f": {', '.join(out.culprit_nodes)} "
                    + ("holds" if len(culprits) == 1 else "hold")
                    + " the job up (its ranks left the collective or hang outside it)")
    return True


def _straggler(out: JobNow, nodes: dict, names: dict) -> bool:
    if len(nodes) < 2:
        return False
    waiting = {n for n, rs in nodes.items() if sum(_cls(r) == Cls.COMMS_BOUND for r in rs) * 2 > len(rs)}
    for n, rs in sorted(nodes.items(), key=lambda kv: names[kv[0]]):
        if n in waiting or not waiting:
            continue
        mine = [_cls(r) for r in rs]
        theirs = [r for w in waiting for r in nodes[w]]
        why = []
        if sum(c in HOST for c in mine) * 2 > len(mine):
            why.append(f"its host: its GPUs {', '.join(sorted({c for c in mine if c in HOST}))} (kernels active "
                       f"{_pct(_mean(r.util_pct for r in rs))} vs {_pct(_mean(r.util_pct for r in theirs))} on the "
                       "others)")
        elif sum(c in WORK for c in mine) * 2 > len(mine):
            a, b = _busiest(rs), _busiest(theirs)
            if a is not None and b is not None and a >= STRAGGLER_WORK_RATIO * b + STRAGGLER_WORK_MARGIN_PCT:
                why.append(f"more work: its GPUs' busiest unit {a:.0f}% vs {b:.0f}% on the others")
            clock, others = _mean(r.sm_clock_mhz for r in rs), _mean(r.sm_clock_mhz for r in theirs)
            if clock is not None and others and clock <= STRAGGLER_CLOCK_RATIO * others:
                why.append(f"slower: SM clock {clock:.0f} MHz vs {others:.0f} on the others")
            if not why:
                why.append("its GPUs work while the others wait for them")
        if why:
            _name_straggler(out, n, waiting, names, why)
            return True
    clocks = {n: _mean(r.sm_clock_mhz for r in rs if _cls(r) in WORK + (Cls.COMMS_BOUND,)) for n, rs in nodes.items()}
    known = {n: c for n, c in clocks.items() if c}
    for n, c in sorted(known.items(), key=lambda kv: kv[1]):
        rest = _mean(v for m, v in known.items() if m != n)
        if rest and c <= STRAGGLER_CLOCK_RATIO * rest:
            _name_straggler(out, n, set(known) - {n}, names, [f"slower: SM clock {c:.0f} MHz vs {rest:.0f} on the "
                                                                "job's other nodes"])
            return True
        break
    return False


def _name_straggler(out: JobNow, n: str, waiting, names: dict, why: list[str]) -> None:
    out.finding, out.straggler_node = "straggler", names[n]
    out.evidence = {"nodes_waiting": len(waiting)}
    who = ", ".join(sorted(names[w] for w in waiting))
    out.sentence = (f"straggler: {names[n]} is the job's slowest node, its peers on {who} wait for it "
                    f"({'; '.join(why)})")


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


def _across(out: JobNow, nodes: dict, names: dict) -> bool:
    rows = [r for rs in nodes.values() for r in rs]
    if len(nodes) < 2:
        return False
    comms = [r for r in rows if _cls(r) in COMMS]
    if len(comms) * 2 <= len(rows):
        return False
    nvlink = [r.nvlink_bps for r in comms if r.nvlink_bps is not None]
    if nvlink and max(nvlink) >= NVLINK_ACTIVE_BYTES_PER_S:
        return False  # their links carry it: comms within the nodes (each node says so)
    both = [r for r in comms if r.pcie_rx_bps is not None and r.pcie_tx_bps is not None
            and min(r.pcie_rx_bps, r.pcie_tx_bps) >= PCIE_COMMS_MIN_BPS
            and min(r.pcie_rx_bps, r.pcie_tx_bps) >= PCIE_COMMS_BALANCE * max(r.pcie_rx_bps, r.pcie_tx_bps)]
    if len(both) * 2 <= len(comms):
        return False
    rx, tx = _mean(r.pcie_rx_bps for r in both), _mean(r.pcie_tx_bps for r in both)
    out.finding = "comms across nodes"
    out.evidence = {"gpus_comms": len(comms), "pcie_rx_bps": rx, "pcie_tx_bps": tx,
                    "nvlink_bps": max(nvlink) if nvlink else None}
    link = "NVLink idle" if nvlink else "no NVLink traffic exported"
    out.sentence = (f"comms-bound across nodes: {len(comms)} of {count(len(rows), 'GPU')} on "
                    f"{count(len(nodes), 'node')} wait for each other's data, {link}, PCIe busy both ways (rx "
                    f"{si(rx, 'B/s')}, tx {si(tx, 'B/s')}: the NIC's traffic): the network between the nodes sets the "
                    "pace (fewer, larger collectives; overlap them with compute; the job on fewer nodes)")
    return True
