"""Change detection: where the work on a GPU changed, so that a verdict judges one regime, not a blend.

A live verdict over a fixed "last 3 s" window blends the end of one phase with the start of the next (a
copy phase read "compute-bound (tensor)" for two seconds because the matmul before it still filled the
window). The detector here splits a stream of ticks into segments of one regime each; the live verdict
(TUI panel, ``--export``) judges the current segment and the JSON timeline judges each segment, so both
begin where the work changed.

Each tick becomes a few features on a 0..100 scale (:func:`features`): NVML's kernel duty cycle, GPM's SM
activity, DRAM bandwidth and busiest pipes, the PCIe link share, the share of device memory used,
whether the GPU did work in the sample
(0 or 100: the share of busy samples tells bursts from idleness), the watched process tree's CPU and
whether that process holds a CUDA context on the GPU. A sample
*deviates* from the current segment on a feature when it is further from the segment's mean than
``max(delta, Z x the segment's standard deviation)`` (a bursty segment, whose samples swing between idle and
busy, tolerates its own swings). A change is confirmed when ``CONFIRM_SAMPLES`` samples in a row deviate on
the same feature in the same direction (one odd sample, a GC pause or a single sync, is not a change:
hysteresis), or when the mean of the last ``SLOW_SAMPLES`` differs from the segment's by more than
``max(delta, Z_SLOW x std / sqrt(SLOW_SAMPLES))`` (a bursty segment turning steady). The new segment
starts at the first of those samples, so its verdict judges the new work only.

:class:`ChangeDetector` is fed tick by tick (the live monitor feeds it as ticks arrive); :func:`segment_starts`
runs the same detector over a recorded run. Pure: no NVML, no Textual.
"""

from __future__ import annotations

import math
from collections import deque

from gputop.analysis import thresholds as T
from gputop.analysis.evidence import is_busy, number

# feature -> the smallest change (on its 0..100 scale) that counts as a change of regime
DELTAS = {
    "util": T.CHANGE_DELTA_PCT, "sm": T.CHANGE_DELTA_PCT, "dram": T.CHANGE_DELTA_PCT,
    "tensor": T.CHANGE_DELTA_PCT, "fp32": T.CHANGE_DELTA_PCT, "fp64": T.CHANGE_DELTA_PCT,
    "fp16": T.CHANGE_DELTA_PCT, "pcie": T.CHANGE_PCIE_DELTA_PCT, "cpu": T.CHANGE_CPU_DELTA_PCT,
    "busy": T.CHANGE_DELTA_PCT, "context": T.CHANGE_CONTEXT_DELTA, "mem": T.CHANGE_MEM_DELTA_PCT,
}


NAMES = {"util": "kernel duty", "sm": "SM activity", "dram": "DRAM", "tensor": "tensor", "fp32": "FP32",
         "fp64": "FP64", "fp16": "FP16", "pcie": "PCIe link", "cpu": "process CPU", "busy": "busy samples",
         "context": "process on the GPU", "mem": "memory used"}


def features(tick: dict, gpu_pos: int, peaks: dict | None = None, watched_pid=None) -> dict:
    """The features of one tick (a whole tick with ``gpus`` and ``host``) for GPU position ``gpu_pos``;
    a feature that is n/a is left out."""
    gpus = tick.get("gpus") or []
    g = gpus[gpu_pos] if gpu_pos < len(gpus) else {}
    out = {}
    for name, key in (("util", "util_gpu_pct"), ("sm", "sm_active_pct"), ("dram", "dram_bw_pct"),
                      ("tensor", "tensor_pct"), ("fp32", "fp32_pct"), ("fp64", "fp64_pct"), ("fp16", "fp16_pct")):
        v = number(g.get(key))
        if v is not None:
            out[name] = v
    link = number((peaks or {}).get("pcie_bytes_per_s_per_dir"))
    flows = [v for v in (number(g.get("pcie_rx_bps")), number(g.get("pcie_tx_bps"))) if v is not None]
    if link and flows:
        out["pcie"] = 100.0 * max(flows) / link
    used, total = number(g.get("mem_used_bytes")), number(g.get("mem_total_bytes"))
    if used is not None and total:
        out["mem"] = 100.0 * used / total
    if g:
        out["busy"] = 100.0 if is_busy(g) else 0.0  # bursts: their share moves, one sample's flag does not confirm
    procs = (tick.get("host") or {}).get("procs") or {}
    pid = str(watched_pid) if watched_pid is not None else (next(iter(procs)) if len(procs) == 1 else None)
    entry = procs.get(pid) if pid is not None else None
    if entry and number(entry.get("cpu_pct")) is not None:
        out["cpu"] = min(T.CHANGE_CPU_CAP_PCT, entry["cpu_pct"] + (entry.get("children_cpu_pct") or 0.0))
    if pid is not None and g.get("processes") is not None:  # the process gets (or drops) its CUDA context
        out["context"] = 100.0 if any(str(p.get("pid")) == pid for p in g["processes"]) else 0.0
    return out


class _Stats:
    """Running mean and variance of each feature (sums; the segments are short enough)."""

    def __init__(self):
        self.n: dict[str, int] = {}
        self.s: dict[str, float] = {}
        self.ss: dict[str, float] = {}

    def add(self, f: dict) -> None:
        for k, v in f.items():
            self.n[k] = self.n.get(k, 0) + 1
            self.s[k] = self.s.get(k, 0.0) + v
            self.ss[k] = self.ss.get(k, 0.0) + v * v

    def remove(self, f: dict) -> None:
        for k, v in f.items():
            self.n[k] -= 1
            self.s[k] -= v
            self.ss[k] -= v * v

    def mean_std(self, k: str) -> tuple[float, float] | None:
        n = self.n.get(k, 0)
        if n < T.CHANGE_MIN_REF_SAMPLES:
            return None
        m = self.s[k] / n
        return m, math.sqrt(max(0.0, self.ss[k] / n - m * m))


class ChangeDetector:
    """Online change detection over ticks of one GPU. ``push(tick)`` returns True when the tick confirms a
    change; then ``start_t`` is the time of the first tick of the new segment (earlier than the tick pushed)."""

    def __init__(self, gpu_pos: int = 0, peaks: dict | None = None, watched_pid=None):
        self.gpu_pos, self.peaks, self.watched_pid = gpu_pos, peaks or {}, watched_pid
        self.start_t: float | None = None  # first tick of the current segment
        self.changes: list[float] = []  # start times of every segment after the first
        self.why: str | None = None  # what changed at the last change ("DRAM 88% -> 0%")
        self._stats = _Stats()
        self._pending: list[tuple[float, dict]] = []  # samples deviating the same way, not yet a change
        self._keys: set = set()  # the (feature, sign) they share
        self._recent: deque[tuple[float, dict]] = deque()  # the last SLOW_SAMPLES (time, features): slow test
        self._recent_sums = _Stats()  # their sums (kept as samples come and go: the slow test runs every tick)
        self._n = 0  # samples in the segment (settled and pending)

    def push(self, tick: dict) -> bool:
        t = tick["t"]
        f = features(tick, self.gpu_pos, self.peaks, self.watched_pid)
        if self.start_t is None:
            self.start_t = t
        self._n += 1
        self._remember(t, f)
        dev = self._deviations(f)
        if self._pending and not dev and not any(k in f for k, _ in self._keys):
            self._pending.append((t, f))  # this sample lacks the feature that moved (a process list every
            return False                  # other tick): it neither confirms the change nor breaks it
        if dev:
            keys = dev if not self._pending else self._keys & dev
            if not keys:  # deviates, but another way: the pending run was noise
                self._settle()
                keys = dev
            self._pending.append((t, f))
            self._keys = keys
            if sum(1 for _, p in self._pending if any(k in p for k, _ in keys)) >= T.CONFIRM_SAMPLES:
                self._change(list(self._pending), sorted(self._keys)[0][0])
                return True
            return False
        self._settle()
        self._stats.add(f)
        return self._slow_change()

    def _remember(self, t: float, f: dict) -> None:
        self._recent.append((t, f))
        self._recent_sums.add(f)
        while len(self._recent) > T.CHANGE_SLOW_SAMPLES:
            self._recent_sums.remove(self._recent.popleft()[1])

    def _deviations(self, f: dict) -> set:
        out = set()
        for k, v in f.items():
            ms = self._stats.mean_std(k)
            if ms is None:
                continue
            m, sd = ms
            thr = max(DELTAS.get(k, T.CHANGE_DELTA_PCT), T.CHANGE_Z * sd)
            if v > m + thr:
                out.add((k, 1))
            elif v < m - thr:
                out.add((k, -1))
        return out

    def _settle(self) -> None:
        for _, f in self._pending:
            self._stats.add(f)
        self._pending, self._keys = [], set()

    def _slow_change(self) -> bool:
        n = T.CHANGE_SLOW_SAMPLES
        if self._n < 2 * n or len(self._recent) < n:
            return False
        rs = self._recent_sums
        for k in DELTAS:
            cnt = self._stats.n.get(k, 0)
            if rs.n.get(k, 0) < n or cnt - n < T.CHANGE_MIN_REF_SAMPLES:
                continue
            s = self._stats.s[k] - rs.s[k]  # the segment before the recent samples
            ss = self._stats.ss[k] - rs.ss[k]
            m = s / (cnt - n)
            sd = math.sqrt(max(0.0, ss / (cnt - n) - m * m))
            recent = rs.s[k] / n
            if abs(recent - m) > max(DELTAS[k], T.CHANGE_Z_SLOW * sd / math.sqrt(n)):
                self._change(list(self._recent), k, m)
                return True
        return False

    def _change(self, run: list[tuple[float, dict]], k: str, before: float | None = None) -> None:
        if before is None:
            ms = self._stats.mean_std(k)
            before = ms[0] if ms else None
        after = [f[k] for _, f in run if k in f]
        if before is not None and after:
            self.why = f"{NAMES.get(k, k)} {before:.0f}% -> {sum(after) / len(after):.0f}%"
        self._stats = _Stats()
        for _, f in run:
            self._stats.add(f)
        self._pending, self._keys = [], set()
        self._n = len(run)
        self._recent, self._recent_sums = deque(), _Stats()
        for t, f in run:
            self._remember(t, f)
        self.start_t = run[0][0]
        self.changes.append(self.start_t)


def segment_starts(ticks: list[dict], gpu_pos: int = 0, peaks: dict | None = None, watched_pid=None) -> list[float]:
    """The times at which a new segment starts, the first tick's included: the detector run over a recording."""
    if not ticks:
        return []
    d = ChangeDetector(gpu_pos, peaks, watched_pid)
    for t in ticks:
        d.push(t)
    return [ticks[0]["t"]] + d.changes


def split(ticks: list[dict], starts: list[float]) -> list[list[dict]]:
    """``ticks`` cut at ``starts`` (times from :func:`segment_starts`)."""
    out: list[list[dict]] = []
    cuts = sorted(starts)
    j = 0
    for t in ticks:
        while j < len(cuts) and t["t"] >= cuts[j]:
            out.append([])
            j += 1
        if not out:
            out.append([])
        out[-1].append(t)
    return [s for s in out if s]
