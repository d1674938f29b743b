"""Shipped with gputop as gputop.workloads (see gputop/paths.py)."""
