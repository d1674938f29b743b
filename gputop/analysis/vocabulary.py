"""The words of a verdict: its classes and the classifier's subclasses, each with its label for people.

The one home of this vocabulary: the classifier, the workloads' own verdicts, the JSON schemas (their
``class`` enum lists :data:`CLASSES`; tests/test_rules.py checks it) and every frontend use these names.

:class:`Cls` is also the registry of the classifier's rules: each member has its rule in
``gputop/analysis/rules/<value with _>.py`` (:mod:`gputop.analysis.rules`). Its order is the vocabulary's
order: ``mixed`` lists, the scores and the Prometheus series follow it.

Both enums mix in ``str`` (Python 3.10 has no ``StrEnum``): a member equals, hashes, formats and serialises
(JSON) as its value, so ``Cls.IDLE == "idle"`` and documents keep their strings.

A subclass is free text where a workload sets it ("amp speedup", "launch overhead"); the classifier's are
:class:`Sub` members.
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A word with its label for people; equal to, and printed as, its value."""

    def __new__(cls, value: str, label: str):
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.label = label
        return obj

    __str__ = str.__str__
    __format__ = str.__format__


class Cls(_Word):
    """The bottleneck classes (``class`` in the JSON, ``label`` for people). The rule of each, with its
    thresholds, score, words and examples: gputop/analysis/rules/<value with _>.py."""

    IDLE = "idle", "idle"  # the GPU did no work
    COMPUTE_BOUND = "compute-bound", "compute-bound"  # a pipe near its peak
    MEMORY_BOUND = "memory-bound", "memory-bound"  # DRAM bandwidth near its peak (or on-chip, or a kernel mix)
    LATENCY_BOUND = "latency-bound", "latency/launch-bound"  # kernels resident, nothing near a peak
    INPUT_STARVED = "input-starved", "input-starved"  # the GPU idle between bursts, its feeder busy or waiting
    HOST_BOUND = "host-bound", "host-bound"  # issue 11: the GPU nearly idle, its process busy on the CPU
    PCIE_BOUND = "pcie-bound", "PCIe/transfer-bound"  # PCIe traffic high while the SMs wait
    COMMS_BOUND = "comms-bound", "communication-bound"  # the GPUs of a job wait for each other's data
    STALLED = "stalled", "stalled"  # issue 25: kernels resident doing nothing, nothing moves
    CULPRIT = "culprit", "holding up its job"  # issue 36: a job's GPU whose rank is not where its stalled peers wait
    THROTTLED = "throttled", "power/thermal-throttled"  # clocks held down by heat, hardware or a power cap
    MEMORY_CAPACITY = "memory-capacity", "memory-capacity pressure"  # device memory near full, or an OOM


class Sub(_Word):
    """The classifier's subclasses (and two of the allreduce lesson's), with their labels."""

    TENSOR = "tensor", "tensor cores"
    FP64 = "fp64", "FP64"
    FP32 = "fp32", "FP32 pipe"
    FP16 = "fp16", "FP16 pipe"
    INT = "int", "integer pipe"
    CACHE = "cache", "on-chip memory"
    KERNEL_MIX = "kernel mix", "mix of memory-bound kernels"
    LAUNCH = "launch", "launch/sync"
    STALLS = "stalls", "stalls"
    UNDERFILLED = "underfilled", "under-filled kernels"
    THERMAL = "thermal", "thermal"
    HARDWARE = "hardware", "hardware slowdown"
    POWER = "power", "power cap"
    OOM = "oom", "out of memory"
    STARTUP = "startup", "startup"
    ONE_THREAD = "one thread", "one thread at a core"
    WORKERS = "workers", "worker processes"
    WAITING = "waiting", "waiting: sleep, I/O or a lock"
    LINK = "link", "link near its peak"
    PAGEABLE = "pageable", "pageable host memory"
    EXPOSED = "exposed", "exposed all-reduce"
    COLLECTIVE_LATENCY = "collective latency", "collective latency"
    COLLECTIVES = "collectives", "waiting in collectives"
    STRAGGLER = "straggler", "waiting for a straggler"
    COLLECTIVE = "collective", "stuck collective"
    PCIE = "pcie", "through host memory over PCIe"
    LEFT = "left", "its rank left"
    OUTSIDE = "outside", "not in the collective"
    MISMATCH = "mismatch", "in another collective"


CLASSES = tuple(Cls)
LABELS = {c: c.label for c in Cls}
SUBCLASS_LABELS = {s: s.label for s in Sub}
PIPE_NAMES = {Sub.TENSOR: "tensor", Sub.FP64: "FP64", Sub.FP32: "FP32", Sub.FP16: "FP16", Sub.INT: "INT"}


def subclass(x):
    """A subclass as the vocabulary has it: a :class:`Sub` member where it is one, else the text as given (a
    workload's own nuance), or None."""
    if x is None or isinstance(x, Sub):
        return x
    try:
        return Sub(x)
    except ValueError:
        return x
