"""Host evidence of issue 11: the feeder's busiest thread (psutil per-thread times), NVML's per-process
utilisation samples through the one NVML choke point, and how the classifier uses and names them."""

from __future__ import annotations

import types

import pynvml
import pytest

from fake_nvml import FakeNvml
from gputop.analysis.classify import classify
from gputop.telemetry import host as host_mod
from gputop.telemetry.host import HostReader
from gputop.telemetry.nvml import Nvml
from gputop.telemetry.sample import GpuReader
from test_classify import COPY, H200, PEAKS, host, window
from test_nvml import recorded_static


class FakeProc:
    """A psutil.Process whose threads' CPU times the test sets."""

    def __init__(self, pid=4242):
        self.pid, self.times = pid, {}

    def threads(self):
        return [types.SimpleNamespace(id=tid, user_time=u, system_time=0.0) for tid, u in self.times.items()]


def test_busiest_thread_is_the_largest_cpu_time_delta_per_second(monkeypatch):
    clock = iter([100.0, 100.5, 101.5])
    monkeypatch.setattr(host_mod.time, "monotonic", lambda: next(clock))
    r, p = HostReader(), FakeProc()
    p.times = {1: 10.0, 2: 3.0}
    assert r.busiest_thread(p) is None  # the first call opens the window
    p.times = {1: 10.45, 2: 3.1, 3: 0.2}  # thread 1 ran 0.45 s of 0.5 s; a new thread counts from its start
    assert r.busiest_thread(p) == 90.0
    p.times = {1: 10.5, 2: 3.2}
    assert r.busiest_thread(p) == 10.0  # 0.1 s of 1 s (thread 2)


def test_nvml_process_utilization_samples_empty_and_unavailable():
    fake = FakeNvml(recorded_static())
    fake.proc_util = ((4242, 1_000, 40, 10), (4242, 2_000, 60, 20), (77, 2_000, 5, 1))
    nvml = Nvml(fake)
    got = nvml.process_utilization("handle0", 500, gpu=0)
    assert [(x["pid"], x["sm_pct"]) for x in got] == [(4242, 40.0), (4242, 60.0), (77, 5.0)]
    assert nvml.process_utilization("handle0", 2_000, gpu=0) == []  # NotFound: nothing ran since then
    assert "process_utilization" not in nvml.na_reasons
    nvml = Nvml(FakeNvml(recorded_static(), fail={"nvmlDeviceGetProcessUtilization": pynvml.NVML_ERROR_NOT_SUPPORTED}))
    assert nvml.process_utilization("handle0", 0, gpu=0) is None
    assert nvml.na_reasons["process_utilization"] == "NotSupported"


def test_a_sample_with_a_process_list_carries_each_process_sm_share():
    fake = FakeNvml(recorded_static())
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=4242, usedGpuMemory=1 << 30)]
    reader = GpuReader(Nvml(fake), 0, process_every=1)
    since = reader._util_since
    fake.proc_util = ((4242, since + 10, 30, 5), (4242, since + 20, 50, 5))
    s = reader.read()
    assert s["process_sm_pct"] == {"4242": 40.0}
    assert reader.read()["process_sm_pct"] == {}  # no new samples since: NotFound -> no process ran kernels


ON_GPU = dict(processes=[{"pid": 4242}], util_gpu_pct=1.0, sm_active_pct=0.1)


def with_proc(hosts, **extra):
    return [{**h, "procs": {"4242": {**h["procs"]["4242"], **extra}}} for h in hosts]


def test_host_bound_says_which_host_work_from_the_busiest_thread_and_the_workers():
    one = classify(window(**ON_GPU), H200, PEAKS, host=with_proc(host(99.0), busiest_thread_pct=98.0),
                   watched_pid="4242")
    assert (one.cls, one.subclass) == ("host-bound", "one thread"), one.scores
    assert any("busiest thread at 98% of a core" in n for n in one.notes), one.notes
    assert "py-spy" in one.advice
    pool = classify(window(**ON_GPU), H200, PEAKS,
                    host=with_proc(host(30.0, children=700.0), busiest_thread_pct=25.0), watched_pid="4242")
    assert (pool.cls, pool.subclass) == ("host-bound", "workers"), pool.scores
    assert any("child processes at 700%" in n for n in pool.notes), pool.notes


def test_nvml_per_process_samples_name_the_process_own_kernels_in_the_decision():
    samples = [dict(s, process_sm_pct={"4242": 0.0}) for s in window(**ON_GPU)]
    v = classify(samples, H200, PEAKS, host=host(99.0), watched_pid="4242")
    assert v.cls == "host-bound" and v.evidence["feeder_sm_pct"] == 0.0
    assert any("NVML's per-process samples" in n for n in v.notes), v.notes
    # another process keeps the GPU busy, the watched one holds a context and burns a core without kernels
    busy = [dict(s, process_sm_pct={"4242": 0.0, "999": 90.0}) for s in window(**dict(COPY, processes=[{"pid": 4242}]))]
    w = classify(busy, H200, PEAKS, host=host(99.0), watched_pid="4242")
    assert w.cls == "memory-bound" and "host-bound" in w.mixed, (w.cls, w.scores)  # the GPU first, then the process


def test_launch_bound_needs_the_launching_thread_busy():
    decode = dict(util_gpu_pct=9.0, sm_active_pct=0.4, sm_occupancy_pct=0.2, dram_bw_pct=0.5, processes=[{"pid": 4242}])
    busy = classify(window(**decode), H200, PEAKS, host=with_proc(host(100.0), busiest_thread_pct=99.0),
                    watched_pid="4242")
    idle = classify(window(**decode), H200, PEAKS, host=with_proc(host(100.0), busiest_thread_pct=20.0),
                    watched_pid="4242")
    assert busy.cls == "latency-bound" and busy.scores["latency-bound"] == pytest.approx(1.0)
    assert idle.scores["latency-bound"] == pytest.approx(0.5)  # gaps that are waits, not launches
    assert any("busiest thread at 99%" in n for n in busy.notes), busy.notes


def test_set_up_before_the_first_gpu_work_and_teardown_after_the_last_are_not_the_run_verdict():
    """torch.compile / XLA compilation: 20 s host-bound, then 8 s compute-bound; host-bound time between two
    stretches of work counts, host-bound time after the last work (teardown: results written, exit) does not."""
    from gputop.analysis.timeline import overall, timeline

    def busy(t0):
        return window(n=80, t0=t0, util_gpu_pct=100.0, sm_active_pct=96.0, sm_occupancy_pct=20.0, tensor_pct=93.0,
                      dram_bw_pct=17.0, processes=[{"pid": 4242}])

    compile_, work, after, more = window(n=200, **ON_GPU), busy(20.0), window(n=50, t0=28.0, **ON_GPU), busy(33.0)
    hosts = host(99.0, n=410)
    ticks = [{"t": smp["t"], "gpus": [smp], "host": h} for smp, h in zip(compile_ + work, hosts)]
    segs = timeline(ticks, 0, H200, PEAKS, watched_pid="4242")
    assert [s.cls for s in segs] == ["host-bound", "compute-bound"], [s.cls for s in segs]
    assert overall(segs).cls == "compute-bound"
    ticks += [{"t": smp["t"], "gpus": [smp], "host": h} for smp, h in zip(after, hosts)]
    late = timeline(ticks, 0, H200, PEAKS, watched_pid="4242")
    assert [s.cls for s in late][-1] == "host-bound"
    assert "host-bound" not in overall(late).time_by_class_s  # after the last work: teardown
    ticks += [{"t": smp["t"], "gpus": [smp], "host": h} for smp, h in zip(more, hosts[330:])]
    between = timeline(ticks, 0, H200, PEAKS, watched_pid="4242")
    assert overall(between).time_by_class_s.get("host-bound", 0) > 4.0  # between two stretches: the host's time
    assert overall(between).cls == "compute-bound"


def test_a_launchers_ranks_hold_the_gpu_its_tree_is_host_bound_and_a_gpu_they_left_is_idle():
    """torchrun (pid 4242) is on no GPU; its rank (pid 5000) is. After the run saw its tree on the GPU (the
    timeline's on_gpu hint), the GPU idle while the tree keeps 4 cores busy is host-bound, not idle; the tree's
    children are the ranks, not DataLoader workers; a GPU its rank left (empty process list) stays idle."""
    rank = dict(processes=[{"pid": 5000}], util_gpu_pct=0.0, sm_active_pct=0.0, process_sm_pct={"5000": 0.0})
    tree = host(400.0, children=398.0)  # the ranks' CPU is the launcher's children's
    v = classify(window(**rank), H200, PEAKS, host=tree, watched_pid="4242", hints={"on_gpu": True})
    assert v.cls == "host-bound" and v.subclass is None, (v.cls, v.subclass, v.scores)
    assert v.evidence["feeder_on_gpu_fraction"] == 0 and v.evidence["gpu_held_fraction"] == 1
    assert "whose child holds its CUDA context" in v.evidence_text
    assert classify(window(**rank), H200, PEAKS, host=tree, watched_pid="4242").cls == "idle"  # no run's mark
    left = dict(rank, processes=[])
    assert classify(window(**left), H200, PEAKS, host=tree, watched_pid="4242", hints={"on_gpu": True}).cls == "idle"


STAT = """cpu  {all}
cpu0 {c0}
cpu1 {c1}
intr 12345 0 0
ctxt 999
"""
MEMINFO = "MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:    4096000 kB\nBuffers: 1 kB\n"


def test_host_cpu_and_ram_from_proc_follow_psutils_formula(tmp_path):
    """ProcStat (the sampler's host read) gives psutil.cpu_percent(percpu=True)'s numbers: busy = total - idle -
    iowait with guest time already in user time, a counter that went back as 0, one decimal; and
    virtual_memory()'s total and available."""
    (tmp_path / "meminfo").write_text(MEMINFO)
    # user nice system idle iowait irq softirq steal guest guest_nice
    first = ("100 0 50 800 50 0 0 0 0 0", "100 0 0 900 0 0 0 0 0 0")
    # core 0: +30 user (of which 10 guest), +10 system, +50 idle, +10 iowait -> busy 40 of 100 -> 40.0%
    # core 1: idle went back by 5 (counted as 0), +3 user -> busy 3 of 3 -> 100.0%
    second = ("130 0 60 850 60 0 0 0 10 0", "103 0 0 895 0 0 0 0 0 0")
    (tmp_path / "stat").write_text(STAT.format(all="1 2 3", c0=first[0], c1=first[1]))
    stat = host_mod.ProcStat(str(tmp_path))
    assert stat.ok and stat.read_memory() == (16384000 * 1024, 4096000 * 1024)
    (tmp_path / "stat").write_text(STAT.format(all="1 2 3", c0=second[0], c1=second[1]))
    assert stat.read_cpu() == [40.0, 100.0]
    assert stat.read_cpu() == [0.0, 0.0]  # nothing moved since
    assert not host_mod.ProcStat(str(tmp_path / "nowhere")).ok  # no /proc: HostReader falls back to psutil


def test_host_read_on_this_machine_agrees_with_psutil():
    import psutil

    reader = HostReader()
    h = reader.read()
    vm = psutil.virtual_memory()
    assert len(h["cpu_per_core_pct"]) == psutil.cpu_count() and h["ram_total_bytes"] == vm.total
    assert all(0.0 <= v <= 100.0 for v in h["cpu_per_core_pct"])
    assert abs(h["ram_used_bytes"] - (vm.total - vm.available)) < 0.05 * vm.total


def test_the_host_is_read_every_half_second_while_a_process_is_watched_else_every_second():
    class Counting:
        watched: set = set()
        reads = 0

        def read(self):
            self.reads += 1
            return {"n": self.reads}

    reader = Counting()
    periodic = host_mod.PeriodicHost(reader)
    for k in range(31):  # 3 s of ticks at 10 Hz, nothing watched
        periodic.read(k / 10)
    assert reader.reads == 4  # at 0, 1, 2 and 3 s
    reader.watched = {4242}
    reader.reads = 0
    for k in range(31, 62):
        periodic.read(k / 10)
    assert reader.reads == 6  # every 0.5 s while a process tree is watched
