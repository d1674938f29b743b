"""The words of a verdict: its classes, their labels for people, and the subclass labels.

The one home of this vocabulary: the classifier, the workloads' own verdicts, the JSON schemas (their
``class`` enum lists :data:`CLASSES`) and every frontend use these names.

Classes (``class`` in the JSON, ``label`` for people):

  idle             the GPU did no work
  compute-bound    a pipe near its peak; subclass tensor / fp32 / fp64 / fp16 (None without GPM)
  memory-bound     DRAM bandwidth near its peak
  latency-bound    kernels resident but SMs barely busy (subclass launch), or busy SMs with no unit
                   near its peak (stalls / underfilled)
  input-starved    GPU idle between bursts while the feeding process tree is busy on the CPU (or,
                   with recurring bursts, waits on I/O / sleeps: lower score)
  host-bound       the GPU nearly idle while the process holding its CUDA context keeps a CPU core busy
                   (input preparation or CPU-side overhead: the GPU waits on the host)
  pcie-bound       PCIe traffic high while the SMs wait
  comms-bound      NVLink traffic high while the SMs wait: the GPUs of a job wait for each other's data
                   (subclass link: the link near its peak; exposed: an all-reduce not hidden by compute)
  stalled          kernels resident doing nothing, no traffic anywhere: a wait that does not end (subclass
                   collective: the job's other GPUs wait in it too, or left, or idle: a stuck collective)
  throttled        clocks held down by heat, hardware slowdown, or a power cap far below normal
  memory-capacity  device memory near full, or an out-of-memory error

A subclass is free text: the classifier's come from :data:`SUBCLASS_LABELS`; a workload puts its own
nuance there ("amp speedup", "launch overhead").
"""

from __future__ import annotations

LABELS = {
    "idle": "idle",
    "compute-bound": "compute-bound",
    "memory-bound": "memory-bound",
    "latency-bound": "latency/launch-bound",
    "input-starved": "input-starved",
    "host-bound": "host-bound",  # issue 11
    "pcie-bound": "PCIe/transfer-bound",
    "comms-bound": "communication-bound",
    "stalled": "stalled",  # issue 25: its own class, not a comms-bound subclass (gputop/analysis/collectives.py)
    "throttled": "power/thermal-throttled",
    "memory-capacity": "memory-capacity pressure",
}
CLASSES = tuple(LABELS)
# The "what is the GPU doing" classes, one of which always fits; throttling and capacity overlay them.
BASE_CLASSES = ("comms-bound", "stalled", "pcie-bound", "memory-bound", "compute-bound", "host-bound", "input-starved",
                "latency-bound", "idle")
PRIORITY = {c: i for i, c in enumerate(("throttled", "memory-capacity") + BASE_CLASSES)}  # ties: first wins
GPM_CLASSES = ("compute-bound", "memory-bound", "latency-bound", "stalled")
# Main classes whose window is also judged sample by sample (to spot a mixed window). Not input
# starvation (a property of bursts over a window) nor the overlays (throttling, capacity).
SPLIT_CLASSES = ("compute-bound", "memory-bound", "latency-bound", "pcie-bound")

PIPE_NAMES = {"tensor": "tensor", "fp64": "FP64", "fp32": "FP32", "fp16": "FP16", "int": "INT"}
SUBCLASS_LABELS = {
    "tensor": "tensor cores", "fp64": "FP64", "fp32": "FP32 pipe", "fp16": "FP16 pipe", "int": "integer pipe",
    "cache": "on-chip memory", "kernel mix": "mix of memory-bound kernels",
    "launch": "launch/sync", "stalls": "stalls", "underfilled": "under-filled kernels",
    "thermal": "thermal", "hardware": "hardware slowdown", "power": "power cap", "oom": "out of memory",
    "startup": "startup", "one thread": "one thread at a core", "workers": "worker processes", "waiting": "waiting: sleep, I/O or a lock",
    "link": "link near its peak", "pageable": "pageable host memory",
    "exposed": "exposed all-reduce", "collective latency": "collective latency",
    "collectives": "waiting in collectives", "straggler": "waiting for a straggler",
    "collective": "stuck collective",
    "pcie": "through host memory over PCIe",
}
