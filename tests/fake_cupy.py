"""A fake ``cupy`` module for driving the roofline workload's GPU code path on a CPU-only machine.

It implements only what workloads/roofline.py and gputop/measure/ceilings.py call, with NumPy arrays as device arrays and the
kernels of kernels/roofline.cu and kernels/ceilings.cu emulated in NumPy: a launch checks its argument types the way the
real kernel signature needs them (np.int32 / np.int64 / np.float32 scalars), that the kernel name
exists as an ``extern "C" __global__`` function in the compiled source, and computes only the elements
the launch's grid really covers. Events read ``time.perf_counter()`` (the fake kernels run
synchronously), so times are real host times. It proves the plumbing, not GPU performance.
"""

from __future__ import annotations

import re
import time
import types

import numpy as np

L2_BYTES = 1 << 20
FREE_BYTES = 64 << 20


class FakeKernel:
    def __init__(self, module: "RawModule", name: str):
        self.module, self.name = module, name
        self.num_regs = 32
        self.launches = 0

    def __call__(self, grid, block, args, **kw):
        (g,), (b,) = grid, block
        assert g >= 1 and 1 <= b <= 1024, (g, b)
        self.launches += 1
        threads = g * b
        if self.name in ("compute_k_terms", "compute_k_terms_fma"):
            a, out, n, k = args
            assert isinstance(n, np.int32) and isinstance(k, np.int32), "n and k must be np.int32 (int in the kernel)"
            m = min(int(n), threads)  # threads past the grid never run
            x = a[:m].astype(np.float32)
            r = np.zeros(m, np.float32)
            if self.name == "compute_k_terms":
                p = x.copy()
                for _ in range(int(k)):
                    r += p
                    p *= x
            else:
                for _ in range(int(k)):
                    r = r * x + x
            out[:m] = r
        elif self.name == "stream_copy":
            src, dst, n4 = args
            assert isinstance(n4, np.int64), "n4 must be np.int64 (long long in the kernel)"
            assert src.size == dst.size == int(n4) * 4
            dst[:] = src  # the grid-stride loop covers every element for any grid >= 1
        elif self.name == "stream_read":
            src, sink, n4, never = args
            assert isinstance(n4, np.int64) and isinstance(never, np.float32)
            assert src.size == int(n4) * 4 and sink.size >= threads
            if float(src.sum()) == float(never):  # the data never sums to ``never``: nothing is written
                sink[:threads] = never
        elif self.name == "l2_read":
            src, sink, mask, iters, never = args
            assert isinstance(mask, np.int64) and isinstance(iters, np.int32) and isinstance(never, np.float32)
            assert src.size == (int(mask) + 1) * 4 and (int(mask) & (int(mask) + 1)) == 0, "n4 a power of two"
            assert sink.size >= threads and int(iters) % 8 == 0
        elif self.name in ("fma_peak", "fma_peak_f64"):
            out, x, y, iters = args
            want = np.float32 if self.name == "fma_peak" else np.float64
            assert type(x) is want and type(y) is want and isinstance(iters, np.int32)
            assert out.size >= threads and out.dtype == want
            out[:threads] = 1.0
        else:
            raise AssertionError(f"no emulation for {self.name}")


class RawModule:
    instances = 0

    def __init__(self, code: str = None, options=(), **kw):
        RawModule.instances += 1
        self.code = code
        self.options = options

    def get_function(self, name: str) -> FakeKernel:
        declared = set(re.findall(r'extern "C" __global__ void (\w+)\s*\(', self.code))
        if name not in declared:
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        return FakeKernel(self, name)


class Event:
    def __init__(self, *a, **k):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        assert self.t is not None, "synchronize() on an event never recorded"


def get_elapsed_time(start: Event, stop: Event) -> float:
    return (stop.t - start.t) * 1e3


class _Stream:
    def synchronize(self):
        pass


class _Pool:
    def free_all_blocks(self):
        pass


def _runtime():
    rt = types.SimpleNamespace()
    rt.getDevice = lambda: 0
    rt.getDeviceCount = lambda: 1
    rt.getDeviceProperties = lambda i: {
        "name": b"Fake GPU", "major": 9, "minor": 0, "multiProcessorCount": 4, "maxThreadsPerMultiProcessor": 2048,
        "maxBlocksPerMultiProcessor": 32, "regsPerMultiprocessor": 65536, "l2CacheSize": L2_BYTES,
        "totalGlobalMem": 1 << 30,
    }
    rt.deviceGetPCIBusId = lambda i: "0000:19:00.0"
    rt.memGetInfo = lambda: (FREE_BYTES, 1 << 30)
    rt.runtimeGetVersion = lambda: 13000
    return rt


def make_module() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.__version__ = "0.0-fake"
    cp.float32 = np.float32
    cp.float64 = np.float64
    cp.full = lambda n, v, dtype=np.float32: np.full(n, v, dtype=dtype)
    cp.zeros = lambda n, dtype=np.float32: np.zeros(n, dtype=dtype)
    cp.empty = lambda n, dtype=np.float32: np.empty(n, dtype=dtype)
    cp.ones = lambda n, dtype=np.float32: np.ones(n, dtype=dtype)
    cp.empty_like = np.empty_like
    cp.copyto = np.copyto
    cp.isfinite = np.isfinite
    cp.RawModule = RawModule
    cp.get_default_memory_pool = lambda: _Pool()
    cuda = types.SimpleNamespace(Event=Event, get_elapsed_time=get_elapsed_time, runtime=_runtime(),
                                 get_current_stream=lambda: _Stream())
    cp.cuda = cuda
    return cp
