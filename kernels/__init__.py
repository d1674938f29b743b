"""Shipped with gputop as gputop.kernels (see gputop/paths.py)."""
