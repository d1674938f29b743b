"""The profiler window summed up from torch's raw events (gputop/runner/profile_loader/kineto_summary.py): by
construction on hand-built events (kernels, a GPU-side annotation, launches inside nested ops), and against
torch.profiler's own key averages on a real CPU window."""

from __future__ import annotations

import pytest

from gputop.runner.profile_loader.cupti_window import union
from gputop.runner.profile_loader.kineto_summary import summarize

CPU, CUDA = "cpu", "cuda"


class Ev:
    def __init__(self, name, start_us, dur_us, device=CPU, corr=0, stream=7, thread=1, annotation=False):
        self._n, self._s, self._d, self._dev = name, start_us, dur_us, device
        self._c, self._st, self._t, self._a = corr, stream, thread, annotation

    def name(self):
        return self._n

    def start_ns(self):
        return int(self._s * 1000)

    def duration_ns(self):
        return int(self._d * 1000)

    def device_type(self):
        return self._dev

    def correlation_id(self):
        return self._c

    def device_resource_id(self):
        return self._st

    def start_thread_id(self):
        return self._t

    def is_user_annotation(self):
        return self._a


def test_kernels_ops_and_busy_time_by_construction():
    events = [
        Ev("aten::linear", 0, 100), Ev("aten::addmm", 10, 80), Ev("cudaLaunchKernel", 20, 5, corr=1),
        Ev("aten::relu", 120, 30), Ev("cudaLaunchKernel", 125, 5, corr=2),
        Ev("Optimizer.step#SGD.step", 200, 50), Ev("cudaLaunchKernel", 210, 5, corr=3),
        Ev("gemm_kernel", 30, 40, CUDA, corr=1), Ev("relu_kernel", 60, 20, CUDA, corr=2),  # overlaps the gemm
        Ev("sgd_kernel", 220, 10, CUDA, corr=3),
        Ev("Optimizer.step#SGD.step", 205, 40, CUDA, annotation=True),  # the annotation on the GPU: not a kernel
    ]
    got = summarize(events, CUDA)
    kernels = {k["name"]: k for k in got["kernels"]}
    assert set(kernels) == {"gemm_kernel", "relu_kernel", "sgd_kernel"}
    assert kernels["gemm_kernel"] == {"name": "gemm_kernel", "count": 1, "device_us": 40.0}
    assert union(got["intervals"]) == pytest.approx(50 + 10)  # [30, 70] and [60, 80] overlap: 50 us; then [220, 230]
    ops = {o["name"]: o for o in got["ops"]}
    assert "cudaLaunchKernel" not in ops  # runtime calls are launches, not ops
    assert ops["aten::linear"]["self_cpu_us"] == pytest.approx(20)  # 100 less its child addmm's 80
    assert ops["aten::linear"]["cpu_us"] == pytest.approx(100)
    assert ops["aten::addmm"]["self_cpu_us"] == pytest.approx(75)  # less the launch inside it
    assert ops["aten::linear"]["device_us"] == pytest.approx(40)  # inclusive: the gemm its addmm launched
    assert ops["aten::addmm"]["device_us"] == pytest.approx(40)
    assert ops["aten::relu"]["device_us"] == pytest.approx(20)
    assert ops["Optimizer.step#SGD.step"]["device_us"] == pytest.approx(10)
    assert got["launches"] == {1: 20.0, 2: 125.0, 3: 210.0}
    assert sorted(got["kernels_raw"]) == [(7, 30.0, 70.0, 1), (7, 60.0, 80.0, 2), (7, 220.0, 230.0, 3)]


def test_device_work_after_the_windows_end_mark_is_not_the_windows():
    """A job's rank stops without draining its device (torch_window.py): the kernels still queued run during the
    profiler's stop, and a collective among them waits for a peer's own stop. The end mark, a host range in the
    events' clock, ends the window: a kernel that began after it is left out, one across it counts up to it."""
    mark = "gputop::window_end"
    events = [
        Ev("aten::mm", 0, 30), Ev("cudaLaunchKernel", 5, 5, corr=1), Ev("cudaLaunchKernel", 20, 5, corr=2),
        Ev("c10d::allreduce_", 40, 20), Ev("cudaLaunchKernel", 45, 5, corr=3),
        Ev("cudaLaunchKernel", 70, 5, corr=4),
        Ev(mark, 100, 1),
        Ev("gemm", 10, 40, CUDA, corr=1), Ev("gemm", 50, 30, CUDA, corr=2),
        Ev("ncclDevKernel_AllReduce", 80, 270, CUDA, corr=3),  # waits across the mark for a peer's stop
        Ev("gemm", 350, 30, CUDA, corr=4),  # queued: ran during the stop
    ]
    got = summarize(events, CUDA, end_mark=mark)
    assert got["ended_at_us"] == 100.0
    kernels = {k["name"]: k for k in got["kernels"]}
    assert kernels["gemm"] == {"name": "gemm", "count": 2, "device_us": 70.0}
    assert kernels["ncclDevKernel_AllReduce"]["device_us"] == pytest.approx(20.0)
    assert union(got["intervals"]) == pytest.approx(90.0)
    assert max(b for _, _, b, _ in got["kernels_raw"]) == 100.0
    assert mark not in {o["name"] for o in got["ops"]}
    assert {o["name"]: o for o in got["ops"]}["c10d::allreduce_"]["device_us"] == pytest.approx(20.0)
    unmarked = summarize(events, CUDA)  # no mark named: every kernel whole (a window drained before its stop)
    assert unmarked["ended_at_us"] is None
    assert sum(k["device_us"] for k in unmarked["kernels"]) == pytest.approx(40 + 30 + 270 + 30)


def test_an_op_the_dispatcher_enters_twice_is_one_op_as_key_averages_counts_it():
    events = [
        Ev("aten::mean", 0, 100), Ev("aten::mean", 5, 80), Ev("aten::sum", 10, 30), Ev("aten::div_", 50, 20),
        Ev("aten::mul", 200, 50), Ev("aten::mul", 205, 10), Ev("aten::add", 220, 10),  # two children: both ops
        Ev("aten::to", 300, 40), Ev("aten::to", 305, 10), Ev("aten::to", 320, 10),  # two same-named children
    ]
    ops = {o["name"]: o for o in summarize(events, CUDA)["ops"]}
    assert ops["aten::mean"] == {"name": "aten::mean", "count": 1, "self_cpu_us": 50.0, "cpu_us": 100.0,
                                 "device_us": 0.0}  # 100 less its grandchildren's 30 + 20
    assert ops["aten::mul"]["count"] == 2 and ops["aten::mul"]["cpu_us"] == pytest.approx(60)
    assert ops["aten::to"]["count"] == 3 and ops["aten::to"]["self_cpu_us"] == pytest.approx(20 + 10 + 10)


@pytest.mark.slow
def test_ops_agree_with_torch_profilers_key_averages_on_a_real_window():
    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(16, 64)

    def step():
        m(x).square().mean().backward()
        opt.step()
        opt.zero_grad()

    step()
    p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    p.start()
    for _ in range(10):
        step()
    with torch.autograd.profiler.record_function("gputop::window_end"):  # the loader's end mark (torch_window)
        pass
    p.stop()
    summary = summarize(p.profiler.kineto_results.events(), torch.autograd.DeviceType.CUDA,
                        end_mark="gputop::window_end")
    assert summary["ended_at_us"] is not None, "the mark is a host event in the window's clock"
    got = {o["name"]: o for o in summary["ops"]}
    assert "gputop::window_end" not in got
    averages = {e.key: e for e in p.key_averages()}
    top = sorted(averages.values(), key=lambda e: -e.self_cpu_time_total)[:8]
    for e in top:
        assert e.key in got, e.key
        assert got[e.key]["self_cpu_us"] == pytest.approx(e.self_cpu_time_total, rel=0.02, abs=5), e.key
        assert got[e.key]["cpu_us"] == pytest.approx(e.cpu_time_total, rel=0.02, abs=5), e.key
