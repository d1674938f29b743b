"""gputop: why is my GPU slow? Live NVML + GPM telemetry, peaks, and workloads that teach bottlenecks."""

__version__ = "0.1.0"
